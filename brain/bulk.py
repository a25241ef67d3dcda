"""Batch inserts in one statement whatever the number of rows (SPEC §11 ingest rate).

``QuerySet.bulk_create`` compiles every value of every row into the statement: a
batch of 200 mail threads is tens of thousands of placeholders, each prepared by
Django and numbered by psycopg in Python, which cost more than the database's own
work. ``bulk_insert`` sends each column as ONE array parameter instead::

    INSERT INTO t (a, b) SELECT r.a, r.b FROM unnest(%s::int[], %s::text[]) AS r(a, b)
    [ON CONFLICT …] [RETURNING …]

Values are prepared by the model fields themselves (``get_db_prep_save``), and Python
defaults (``default=``, ``auto_now``) are filled in as ``bulk_create`` would, so a
row written here reads back exactly like one written by the ORM. It is for the hot
import paths only; everything else uses the ORM.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.db import connection
from django.db.models import (
    BooleanField,
    CharField,
    DateTimeField,
    Field,
    ForeignKey,
    IntegerField,
    JSONField,
    Model,
    TextField,
)
from django.utils import timezone
from pgvector import Vector


def _db_column(model: type[Model], name: str) -> str:
    """The database column of ``model``'s concrete field ``name``."""
    field = model._meta.get_field(name)
    if not isinstance(field, Field) or not field.column:
        raise ValueError(f"{model.__name__}.{name} is not a concrete column.")
    return field.column


def _db_type(field: Field) -> str:
    """The column type of a concrete field (raises ``ValueError`` for a field
    without one, which has no column to insert)."""
    db_type = field.db_type(connection)
    if db_type is None:
        raise ValueError(f"{field} has no database column type.")
    return db_type


def _column(field: Field, alias: str) -> tuple[str, str]:
    """(array parameter type, SELECT expression) for one column of the unnest row.

    JSON and array columns travel as JSON text (an array of arrays would be
    flattened by ``unnest``), character columns as text (a value too long for the
    column is refused, never cut); other columns as arrays of their own type.
    """
    db_type = _db_type(field)
    if isinstance(field, JSONField):
        return "text[]", f"{alias}::jsonb"
    if isinstance(field, ArrayField):
        base = _db_type(field.base_field)
        elements = f"ARRAY(SELECT jsonb_array_elements_text({alias}::jsonb))"
        # Character elements stay text so the column refuses an over-long one.
        if base.startswith("varchar"):
            return "text[]", elements
        return "text[]", f"{elements}::{base}[]"
    if db_type in ("bigserial", "serial"):
        db_type = "bigint" if db_type == "bigserial" else "integer"
    if db_type.startswith("vector"):
        return "text[]", f"{alias}::{db_type}"
    if db_type.startswith("varchar"):
        # Not ``varchar(n)[]``: an explicit cast would cut a long value silently.
        # As text, the column's own assignment cast refuses it (DataError).
        return "text[]", alias
    return f"{db_type}[]", alias


class JsonText(str):
    """A JSON column's value already serialised (``json.dumps``): ``bulk_insert``
    sends its text as it is instead of encoding the value a second time (a raw
    record's metadata holds the message body, SPEC §11 ingest rate). Any other
    ``str`` is a JSON string value and is encoded as usual."""


def _converter(field: Field) -> Callable[[Any], Any]:
    """A function turning a Python value into the array element ``_column``
    expects for ``field`` (decided once per column, not per value)."""
    if isinstance(field, JSONField):
        encoder = field.encoder
        return lambda v: (
            None
            if v is None
            else str(v)
            if type(v) is JsonText
            else json.dumps(v, cls=encoder)
        )
    if isinstance(field, ArrayField):
        return lambda v: None if v is None else json.dumps(list(v))
    if _db_type(field).startswith("vector"):
        return lambda v: None if v is None else Vector(v).to_text()
    if isinstance(field, (CharField, TextField, IntegerField, BooleanField)):
        return lambda v: v  # their get_db_prep_save is the identity
    if isinstance(field, ForeignKey):
        # A key is its target column's value (the import's page and source ids).
        return _converter(field.target_field)
    if isinstance(field, DateTimeField):
        # An aware datetime goes through unchanged (PostgreSQL's adapter is the
        # identity); the field's own preparation handles the rest (naive, text).
        prepare = field.get_db_prep_save
        return lambda v: (
            v
            if v is None or (isinstance(v, datetime) and v.tzinfo is not None)
            else prepare(v, connection)
        )
    return lambda v: field.get_db_prep_save(v, connection)


def bulk_insert(
    model: type[Model],
    rows: Sequence[Mapping[str, Any]],
    *,
    computed: Mapping[str, tuple[str, Sequence[Any]]] | None = None,
    extra: Mapping[str, str] | None = None,
    conflict: Sequence[str] | None = None,
    update: Sequence[str] = (),
    returning: Sequence[str] = (),
) -> list[tuple[Any, ...]]:
    """Insert ``rows`` (dicts keyed by field attname, e.g. ``page_id``) into
    ``model``'s table with one statement; returns the ``returning`` columns of the
    rows written, in no guaranteed order (``[]`` when ``returning`` is empty).

    Fields a row leaves out get their Python default (``auto_now`` fields: now,
    UTC); the auto primary key is left to the database. A JSON column's value may
    be given serialised already, as ``JsonText``. ``extra`` names additional
    unnest columns that are not stored (``{"title": "text"}``) for ``computed``
    columns: ``{"tsv": ("<SQL over r.<column>>", params)}``. ``conflict`` is the
    unique columns of ``ON CONFLICT``: with ``update`` empty the conflicting rows
    are skipped (``DO NOTHING``), else those columns are overwritten from the new
    row (``DO UPDATE``). Database errors propagate (``IntegrityError``,
    ``DataError``) and leave the caller's transaction to roll back.
    """
    if not rows:
        return []
    computed = dict(computed or {})
    extra = dict(extra or {})
    fields = [
        f
        for f in model._meta.concrete_fields
        if not (f.primary_key and f.attname not in rows[0])
        and f.attname not in computed
    ]
    now = timezone.now()
    arrays: list[list[Any]] = []
    names: list[str] = []
    types: list[str] = []
    selects: list[str] = []
    for field in fields:
        alias = f"r.{field.attname}"
        array_type, select = _column(field, alias)
        convert = _converter(field)
        if field.attname in rows[0]:
            values = [convert(row[field.attname]) for row in rows]
        elif getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            values = [now] * len(rows)
        else:
            values = [convert(field.get_default()) for _ in rows]
        arrays.append(values)
        names.append(_db_column(model, field.name))
        types.append(array_type)
        selects.append(select)
    aliases = [f.attname for f in fields]
    for name, sql_type in extra.items():
        arrays.append([row[name] for row in rows])
        aliases.append(name)
        types.append(f"{sql_type}[]")
    params: list[Any] = []
    for column, (sql, sql_params) in computed.items():
        names.append(_db_column(model, column))
        selects.append(sql)
        params.extend(sql_params)
    quote = connection.ops.quote_name
    # Binary parameters (``%b``) skip psycopg's per-element text escaping of the
    # arrays; they need server-side binding (on in settings), else text (``%s``).
    binary = connection.settings_dict["OPTIONS"].get("server_side_binding")
    mark = "%b" if binary else "%s"
    sql = (
        f"INSERT INTO {quote(model._meta.db_table)} "
        f"({', '.join(quote(n) for n in names)}) "
        f"SELECT {', '.join(selects)} "
        f"FROM unnest({', '.join(f'{mark}::{t}' for t in types)}) "
        f"AS r({', '.join(aliases)})"
    )
    if conflict:
        target = ", ".join(quote(_db_column(model, c)) for c in conflict)
        if update:
            sets = ", ".join(
                f"{quote(c)} = EXCLUDED.{quote(c)}"
                for c in (_db_column(model, u) for u in update)
            )
            sql += f" ON CONFLICT ({target}) DO UPDATE SET {sets}"
        else:
            sql += f" ON CONFLICT ({target}) DO NOTHING"
    if returning:
        sql += " RETURNING " + ", ".join(quote(_db_column(model, c)) for c in returning)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *arrays])
        return list(cursor.fetchall()) if returning else []


def bulk_insert_objects(
    objs: Sequence[Model],
    *,
    conflict: Sequence[str] | None = None,
    update: Sequence[str] = (),
) -> None:
    """``bulk_insert`` for unsaved model instances, like ``bulk_create``: every
    concrete field is written from the instance, and without ``conflict`` the new
    primary keys are set on the instances (in insertion order, as ``bulk_create``
    does on PostgreSQL) and they are marked saved. With ``conflict`` the rows that
    conflict are skipped or updated (see ``bulk_insert``) and no key is set."""
    if not objs:
        return
    model = type(objs[0])
    pk = model._meta.pk
    rows = [
        {
            f.attname: getattr(obj, f.attname)
            for f in model._meta.concrete_fields
            if f is not pk
        }
        for obj in objs
    ]
    for row, obj in zip(rows, objs, strict=True):
        for field in model._meta.concrete_fields:
            if getattr(field, "auto_now", False) and row.get(field.attname) is None:
                row[field.attname] = timezone.now()
                setattr(obj, field.attname, row[field.attname])
    if conflict:
        bulk_insert(model, rows, conflict=conflict, update=update)
        return
    keys = bulk_insert(model, rows, returning=[pk.attname])
    for obj, (key,) in zip(objs, keys, strict=True):
        setattr(obj, pk.attname, key)
        obj._state.adding = False
        obj._state.db = connection.alias
