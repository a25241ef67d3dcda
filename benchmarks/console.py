"""Benchmark: server time of every console page in the issue 19 flows, on demo data.

Run ``bin/demo --no-serve`` first (it imports the bundled mailbox into the
development database), then::

    .venv/bin/python benchmarks/console.py [--runs 7] [--source enron-allen-p]

Each page is requested through Django's test client in this process as a logged-in
staff user (the whole request: middleware, views, queries, templates), once to warm
up and then ``--runs`` times; the median and the worst are printed in milliseconds,
beside the floor measured in the same run (the admin's empty Groups list: the cost of
the admin frame itself) and the ratio to it. The target is under 1 s (1000 ms) per
page. The embedding model is loaded before timing, as the web server does at
startup (the search page embeds its query with it). POSTs (Done, Change due, Mute and close, Save, Merge) run inside a transaction
that is rolled back, so the demo data is left as it was.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gbrain_site.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import transaction  # noqa: E402
from django.db.models import Count, Q  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import reverse  # noqa: E402

from accounts.models import User  # noqa: E402
from brain.embeddings import embeddings_warm_up  # noqa: E402
from brain.models import Page  # noqa: E402
from loops.models import LoopStatus, OpenLoop  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable

TARGET_MS = 1000.0
BENCH_USER = "bench-console"


class Rollback(Exception):
    """Raised to undo a timed POST."""


def timed(fn: Callable[[], Any], runs: int) -> list[float]:
    """Milliseconds of ``runs`` calls after one warm-up call."""
    fn()
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def get(client: Client, url: str, **params: Any) -> Callable[[], Any]:
    def call() -> Any:
        response = client.get(url, params)
        if response.status_code != 200:
            raise SystemExit(f"GET {url} {params}: {response.status_code}")
        return response

    return call


def post_rolled_back(
    client: Client, url: str, data: dict[str, Any]
) -> Callable[[], Any]:
    def call() -> Any:
        try:
            with transaction.atomic():
                response = client.post(url, data)
                if response.status_code not in (200, 302):
                    raise SystemExit(f"POST {url}: {response.status_code}")
                raise Rollback
        except Rollback:
            return None

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--source", default="enron-allen-p")
    args = parser.parse_args()
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    # As a web server does at startup: the search page embeds its query with a
    # model loaded once per process, never inside a request.
    loading = embeddings_warm_up()
    if loading is not None:
        loading.join()

    user = User.objects.filter(username=BENCH_USER).first() or (
        User.objects.create_superuser(BENCH_USER, "bench@example.org", None)
    )
    client = Client()
    client.force_login(user)

    people = (
        Page.objects.filter(
            source_id=args.source, type__name="person", deleted_at__isnull=True
        )
        .annotate(
            n=Count(
                "loops_as_counterparty",
                filter=Q(loops_as_counterparty__status=LoopStatus.OPEN),
            )
        )
        .order_by("-n", "id")
    )
    top, second = list(people[:2])
    loop = (
        OpenLoop.objects.filter(counterparty=top, status=LoopStatus.OPEN)
        .order_by("id")
        .first()
    )
    thread = (
        Page.objects.filter(
            source_id=args.source, type__name="email", deleted_at__isnull=True
        )
        .order_by("-updated_at")
        .first()
    )
    if loop is None or thread is None:
        raise SystemExit(f"No demo data in source {args.source}: run bin/demo first.")
    print(
        f"source {args.source}: {people.count()} people, "
        f"{OpenLoop.objects.filter(source_id=args.source, status='open').count()} open "
        f"loops; person {top.title!r} ({top.n} open loops), thread {thread.slug!r}; "
        f"{args.runs} runs after one warm-up"
    )
    act = reverse("admin:console_loop_act", args=[loop.pk])
    pages: list[tuple[str, Callable[[], Any]]] = [
        (
            "floor: empty Groups list",
            get(client, reverse("admin:auth_group_changelist")),
        ),
        ("home (dashboard)", get(client, reverse("admin:index"))),
        ("waiting", get(client, reverse("admin:loops_waiting"))),
        (
            "waiting, one mailbox",
            get(client, reverse("admin:loops_waiting"), source=args.source),
        ),
        (
            "loop page",
            get(client, reverse("admin:loops_openloop_change", args=[loop.pk])),
        ),
        ("people", get(client, reverse("admin:console_people"))),
        (
            "person card",
            get(client, reverse("admin:console_person", args=[args.source, top.slug])),
        ),
        (
            "person card, merge search",
            get(
                client,
                reverse("admin:console_person", args=[args.source, top.slug]),
                q=second.title[:6],
            ),
        ),
        (
            "merge preview",
            get(client, reverse("admin:console_merge"), keep=top.pk, merge=second.pk),
        ),
        (
            "thread page (conversation)",
            get(client, reverse("admin:console_page", args=[args.source, thread.slug])),
        ),
        (
            "page editor",
            get(
                client,
                reverse("admin:console_page_edit", args=[args.source, thread.slug]),
            ),
        ),
        (
            "revisions",
            get(
                client,
                reverse(
                    "admin:console_page_revisions", args=[args.source, thread.slug]
                ),
            ),
        ),
        ("search", get(client, reverse("admin:console_search"), q="gas prices")),
        ("jobs list", get(client, reverse("admin:jobs_job_changelist"))),
        ("API docs", get(client, "/api/docs")),
        ("POST Done", post_rolled_back(client, act, {"action": "done"})),
        (
            "POST Change due",
            post_rolled_back(client, act, {"action": "due", "due": "2031-05-04"}),
        ),
        (
            "POST Mute and close",
            post_rolled_back(client, act, {"action": "mute_close"}),
        ),
        (
            "POST Save page",
            post_rolled_back(
                client,
                reverse("admin:console_page_edit", args=[args.source, thread.slug]),
                {"title": thread.title, "body": "Benchmark text.", "mode": "append"},
            ),
        ),
        (
            "POST Merge",
            post_rolled_back(
                client,
                reverse("admin:console_merge"),
                {"keep": top.pk, "merge": second.pk, "decision": "merge"},
            ),
        ),
    ]
    floor = None
    worst_name, worst_ms = "", 0.0
    print(
        f"{'page':32} {'median ms':>10} {'worst ms':>10} {'floor ms':>9} {'ratio':>7}"
    )
    for name, fn in pages:
        runs = timed(fn, args.runs)
        median, worst = statistics.median(runs), max(runs)
        if floor is None:
            floor = median
        ratio = median / floor if floor else float("nan")
        flag = "" if worst < TARGET_MS else f"  over {TARGET_MS:.0f} ms"
        print(
            f"{name:32} {median:10.1f} {worst:10.1f} {floor:9.1f} {ratio:6.1f}x{flag}"
        )
        if worst > worst_ms and not name.startswith("floor"):
            worst_name, worst_ms = name, worst
    verdict = "every page under" if worst_ms < TARGET_MS else "NOT every page under"
    print(f"{verdict} {TARGET_MS:.0f} ms; slowest: {worst_name} at {worst_ms:.1f} ms")


if __name__ == "__main__":
    main()
