"""Request and response schemas of the HTTP API, one module per router."""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

from ninja import Field, Schema
from ninja.pagination import LimitOffsetPagination
from pydantic import ConfigDict, ValidationInfo, field_validator

# Bounds the OpenAPI document states and the server enforces (issue 46): a number
# past them is 400 ``invalid_params``, never a database "bigint out of range".
MAX_ID = 2**63 - 1  # PostgreSQL bigint: row ids
MAX_BUDGET_TOKENS = 1_000_000
MAX_PAGE_LIMIT = 1000
MAX_OFFSET = 1_000_000_000
MAX_REQUESTED = 10_000  # limits the server caps lower (stated in their description)


def _allows(annotation: Any, kind: type) -> bool:
    """True when ``annotation`` is ``kind`` or a union containing it."""
    if annotation is kind:
        return True
    if get_origin(annotation) in (Union, types.UnionType):
        return any(arg is kind for arg in get_args(annotation))
    return False


class RequestIn(Schema):
    """Base of every top-level request body: an unknown key is refused (400
    ``invalid_params``, the field named with problem "unknown argument"), as MCP's
    ``call_tool`` refuses an unknown argument (SPEC §4: one contract on every
    transport), so a misspelt optional (``budget_token``) is never dropped silently.
    Booleans and integers are strict, as the OpenAPI document types them: ``"yes"``
    is not a boolean and ``false`` not an integer (400 ``invalid_params``).
    Nested objects (turns, relations) keep pydantic's default and ignore extra keys."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _strict_scalars(cls, value: Any, info: ValidationInfo) -> Any:
        """Refuse a non-boolean for a boolean field and a boolean (or any
        non-integer) for an integer field; other types pass to pydantic."""
        field = cls.model_fields.get(info.field_name or "")
        if field is None or value is None:
            return value
        annotation = field.annotation
        wants_bool = _allows(annotation, bool)
        wants_int = _allows(annotation, int)
        if wants_bool and not wants_int and not isinstance(value, bool):
            if not _allows(annotation, str):
                raise ValueError("must be a JSON boolean (true or false)")
        if wants_int and isinstance(value, bool):
            raise ValueError("must be a JSON integer, not a boolean")
        return value


class BoundedPagination(LimitOffsetPagination):
    """limit/offset pagination with the bounds stated in OpenAPI (``limit`` 1..1000,
    ``offset`` 0..1e9); past them: 400 ``invalid_params``."""

    class Input(Schema):
        limit: int = Field(100, ge=1, le=MAX_PAGE_LIMIT)
        offset: int = Field(0, ge=0, le=MAX_OFFSET)
