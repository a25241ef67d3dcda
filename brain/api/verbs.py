"""HTTP endpoints: verbs (SPEC §4)."""

from __future__ import annotations

from ninja import Router

router = Router(tags=["verbs"])
