"""HTTP endpoints of the loops app."""

from __future__ import annotations

from ninja import Router

router = Router(tags=["loops"])
