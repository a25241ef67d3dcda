"""MCP round-trip latency over both transports, driven by the SDK's own client.

For each transport it times ``N`` calls of ``whoami`` (transport + dispatch overhead,
one cheap ORM-free tool) and of ``brain_search`` (keyword-only, so the query embedding
is not measured) against the local database (``var/``, or ``DATABASE_URL``), and
prints p50/p95/p99 in milliseconds.

- stdio: spawns ``manage.py mcp --surface full`` (trusted local caller);
- HTTP: serves ``gbrain_site.asgi:application`` with uvicorn on 127.0.0.1 and uses a
  throwaway API key for the ``default`` source (revoked at the end).

Usage:
    .venv/bin/python benchmarks/mcp_latency.py [--calls 200] [--query "budget"]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")
os.environ["BRAIN_EMBEDDING_PROVIDER"] = "none"


def _report(label: str, samples: list[float]) -> None:
    ms = sorted(s * 1000 for s in samples)
    q = statistics.quantiles(ms, n=100, method="inclusive")
    print(
        f"{label:<28} n={len(ms):<5} p50={q[49]:7.2f} ms  p95={q[94]:7.2f} ms  "
        f"p99={q[98]:7.2f} ms"
    )


async def _time_calls(client, calls: int, query: str) -> dict[str, list[float]]:  # type: ignore[no-untyped-def]
    out: dict[str, list[float]] = {"whoami": [], "brain_search": []}
    await client.call_tool("whoami", {})  # warm-up: connections, imports
    for name, args in (("whoami", {}), ("brain_search", {"query": query})):
        for _ in range(calls):
            start = time.perf_counter()
            result = await client.call_tool(name, args)
            out[name].append(time.perf_counter() - start)
            if result.is_error:
                raise SystemExit(f"{name} failed: {result.content[0].text}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--query", default="budget")
    args = parser.parse_args()

    import anyio
    import django

    django.setup()
    import httpx2
    import uvicorn
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    from accounts.services import apikey_create, apikey_revoke
    from brain.models import Page, Source
    from gbrain_site.asgi import application

    print(f"pages in the database: {Page.objects.count()}; {args.calls} calls each")

    env = {
        k: v
        for k, v in os.environ.items()
        if k.startswith(("DJANGO_", "DATABASE_", "BRAIN_"))
    }
    stdio = StdioServerParameters(
        command=sys.executable,
        args=[str(ROOT / "manage.py"), "mcp", "--surface", "full"],
        env=env,
    )

    async def over_stdio() -> dict[str, list[float]]:
        async with Client(stdio) as client:
            return await _time_calls(client, args.calls, args.query)

    for name, samples in anyio.run(over_stdio).items():
        _report(f"stdio {name}", samples)

    issued = apikey_create(
        name="benchmark (mcp)",
        scopes=["read"],
        write_source=Source.objects.get(id="default"),
    )
    server = uvicorn.Server(
        uvicorn.Config(application, host="127.0.0.1", port=0, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]

    async def over_http() -> dict[str, list[float]]:
        headers = {"Authorization": f"Bearer {issued.plaintext}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            url = f"http://127.0.0.1:{port}/mcp"
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return await _time_calls(client, args.calls, args.query)

    try:
        for name, samples in anyio.run(over_http).items():
            _report(f"http {name}", samples)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        apikey_revoke(api_key=issued.api_key, actor="benchmark")


if __name__ == "__main__":
    main()
