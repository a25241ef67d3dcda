"""HTTP endpoints of the connectors app."""

from __future__ import annotations

from ninja import Router

router = Router(tags=["connectors"])
