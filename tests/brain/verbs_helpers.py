"""Helpers shared by the verb tests: POST a verb as JSON with a bearer key."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client


def call(client: Client, verb: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """POST ``/api/<verb>`` with a JSON body; returns (status, parsed JSON)."""
    response = client.post(
        f"/api/{verb}", data=json.dumps(body), content_type="application/json"
    )
    return response.status_code, response.json()
