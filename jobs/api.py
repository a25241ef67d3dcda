"""HTTP endpoints of the jobs app."""

from __future__ import annotations

from ninja import Router

router = Router(tags=["jobs"])
