"""Models of the connectors app."""

from __future__ import annotations
