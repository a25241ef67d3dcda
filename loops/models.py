"""Models of the loops app."""

from __future__ import annotations
