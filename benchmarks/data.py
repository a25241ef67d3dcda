"""Where benchmarks read the shared real data: ``../shared/data`` next to the
repository root, or the folder named by ``BRAIN_SHARED_DATA``."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def shared_data() -> Path:
    """The shared data folder (``$BRAIN_SHARED_DATA`` or ``<repo>/../shared/data``)."""
    override = os.environ.get("BRAIN_SHARED_DATA")
    return Path(override) if override else ROOT.parent / "shared" / "data"
