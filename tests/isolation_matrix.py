"""The isolation matrix (SPEC §8): every key shape × every HTTP operation and MCP tool.

The operations come from ``/api/openapi.json`` and the MCP tool list, so a new
endpoint or tool is tried automatically. Request bodies and arguments are built from
each operation's JSON Schema; fields that name something (a slug, an id, a source)
are varied over targets in two sources (world and private pages, world and private
facts, loops, jobs) plus a name that does not exist; a job request's ``kind`` is
varied over every registered kind and its ``params`` over each source, no source and
a server path.

Each case runs inside a savepoint that is rolled back, so every case starts from the
same seeded rows. A case is a *violation* when:

- ``leak``: the answer carries a marker the key may not read (a page body or fact of
  a source outside its grant, or a private one for an untrusted key, or a loop quote
  for an untrusted key);
- ``write``: a row changed in a source the key may not write (or an existing private
  row changed by an untrusted key); a ``Job`` row created or changed counts as a
  write to the sources its params name (every source when it names none, unless
  its kind touches none), and one naming a server path (``path``, ``directory``,
  ``keep``, or an import kind) as a write no key may make (issue 46);
- ``reveal``: a request naming an existing target the key cannot read got anything
  but ``not_found`` / ``scope_denied`` / ``invalid_params`` (a 200 or a 409 says the
  target is there);
- ``crash``: a 5xx other than ``unavailable`` (503, no LLM configured), or an MCP
  ``internal`` error.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from asgiref.sync import async_to_sync
from django.apps import apps
from django.db import connection, transaction
from django.db.models import ForeignKey
from django.test import Client

from accounts.models import ApiKey
from accounts.services import hash_key
from brain.access import Caller, local_caller
from brain.models import Source
from brain.services.facts import fact_remember
from interfaces.callers import caller_for_key
from jobs.models import Job
from jobs.registry import job_kinds
from loops.models import Detector, LoopType, OpenLoop
from tests.brain.conftest import add_page

SOURCES = ("team-a", "team-b")
GHOST_SLUG = "notes/nobody-wrote-this"
GHOST_ID = "987654321"
LOOP_ID_BASE = 700_000  # loop ids never collide with fact ids
# Rows written for bookkeeping by reads (cursors, audit, usage) are not data writes.
BOOKKEEPING = {"SessionCursor", "AuditEvent", "LlmUsage", "ApiKey", "SyncRun"}
# Columns reads may touch (retrieval recency), not data.
NOISY_COLUMNS = {"last_retrieved_at", "last_used_at"}
# Jobs (issue 46), as the matrix reads them (independently of jobs.registry): the
# param naming the source(s) each kind writes, kinds that read a server folder, kinds
# that touch no source's rows and the params of those that name a path or prune.
JOB_SOURCE_PARAM = {
    "sync_source": "source_id",
    "extract_loops": "source_id",
    "extract_commitments": "source_id",
    "import_mail": "source_id",
    "import_markdown": "source_id",
    "loops_sweep": "source_ids",
    "embed_pending": "source_ids",
}
JOB_PATH_KINDS = {"import_mail", "import_markdown"}
JOB_NO_SOURCE_KINDS = {"backup": ("directory", "keep")}
SERVER_PATH = "<a server path>"
EVERY = "<every source>"
NONE = "<no source>"
JOB_PARAMS = (
    {},
    *({"source_id": s} for s in SOURCES),
    *({"source_ids": [s]} for s in SOURCES),
    {"source_ids": list(SOURCES)},
    {"path": "/tmp/brain-probe", "directory": "/tmp/brain-probe", "keep": 1},  # noqa: S108
)


@dataclass(frozen=True)
class Shape:
    """One key shape: trust, scopes, write source, readable sources."""

    name: str
    trusted: bool
    scopes: tuple[str, ...]
    write_source: str | None
    readable: tuple[str, ...]

    def may_read(self, source_id: str, visibility: str) -> bool:
        return source_id in self.readable and (self.trusted or visibility == "world")

    def may_write(self, source_id: str) -> bool:
        scoped = "write" in self.scopes or "admin" in self.scopes
        return (
            scoped and self.write_source is not None and source_id == self.write_source
        )


SHAPES = (
    Shape(
        "trusted-rw-a",
        trusted=True,
        scopes=("read", "write"),
        write_source="team-a",
        readable=("team-a",),
    ),
    Shape(
        "remote-rw-a",
        trusted=False,
        scopes=("read", "write"),
        write_source="team-a",
        readable=("team-a",),
    ),
    Shape(
        "remote-read-ab",
        trusted=False,
        scopes=("read",),
        write_source=None,
        readable=SOURCES,
    ),
    Shape(
        "remote-write-no-source-b",
        trusted=False,
        scopes=("read", "write"),
        write_source=None,
        readable=("team-b",),
    ),
    Shape(
        "trusted-admin-b",
        trusted=True,
        scopes=("admin",),
        write_source="team-b",
        readable=("team-b",),
    ),
    Shape(
        "remote-admin-a-reads-ab",
        trusted=False,
        scopes=("admin",),
        write_source="team-a",
        readable=SOURCES,
    ),
)


@dataclass
class Target:
    """Something a request can name: its value, source and visibility."""

    value: str
    source_id: str | None
    visibility: str = "world"


@dataclass
class Seed:
    """The seeded rows: markers per (source, visibility) and nameable targets."""

    markers: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    slugs: list[Target] = field(default_factory=list)
    ids: list[Target] = field(default_factory=list)
    job_ids: list[Target] = field(default_factory=list)


@dataclass
class Outcome:
    """What a run found."""

    cases: int = 0
    violations: list[str] = field(default_factory=list)


def seed_two_sources() -> Seed:
    """Two federated sources, each with a world and a private page, a world and a
    private fact, and an open loop whose quote only trusted keys may see."""
    seed = Seed()
    caller = local_caller()
    for n, sid in enumerate(SOURCES):
        tag = sid[-1].upper()
        src, _ = Source.objects.get_or_create(
            id=sid, defaults={"name": f"Team {tag}", "federated": True}
        )
        world = add_page(
            src,
            title=f"Wren Tallow {tag}",
            slug=f"people/wren-tallow-{tag.lower()}",
            body=f"Wren is a world page. MK-{tag}-WORLD-PAGE",
        )
        add_page(
            src,
            title=f"Quill Marrow {tag}",
            slug=f"people/quill-marrow-{tag.lower()}",
            body=f"Quill is a private page. MK-{tag}-PRIVATE-PAGE",
            visibility="private",
        )
        wf = fact_remember(
            caller=caller,
            text=f"Wren likes kites MK-{tag}-WORLD-FACT",
            provenance="seed",
            entity=world,
            source=src,
        ).fact
        pf = fact_remember(
            caller=caller,
            text=f"Wren owes a favour MK-{tag}-PRIVATE-FACT",
            provenance="seed",
            entity=world,
            source=src,
            visibility="private",
            kind="commitment",
        ).fact
        loop = OpenLoop.objects.create(
            pk=LOOP_ID_BASE + n,
            source=src,
            dedup_key=f"probe-{sid}",
            loop_type=LoopType.UNANSWERED_INBOUND,
            summary=f"Reply to Wren MK-{tag}-WORLD-LOOP",
            detector=Detector.MANUAL,
            counterparty_email=f"wren.{tag.lower()}@example.invalid",
            thread_id=f"thread-{sid}",
            evidence=[{"quote": f"Please answer MK-{tag}-PRIVATE-QUOTE"}],
        )
        job = Job.objects.create(
            kind="sync_source",
            params={"source_id": sid},
            status=Job.Status.FAILED,
            error=f"sync of {sid} failed MK-{tag}-WORLD-JOB",
        )
        seed.job_ids.append(Target(str(job.pk), sid, "world"))
        seed.markers[(sid, "world")] = [
            f"MK-{tag}-WORLD-PAGE",
            f"MK-{tag}-WORLD-FACT",
            f"MK-{tag}-WORLD-LOOP",
            f"MK-{tag}-WORLD-JOB",
        ]
        seed.markers[(sid, "private")] = [
            f"MK-{tag}-PRIVATE-PAGE",
            f"MK-{tag}-PRIVATE-FACT",
            f"MK-{tag}-PRIVATE-QUOTE",
        ]
        seed.slugs += [
            Target(f"people/wren-tallow-{tag.lower()}", sid, "world"),
            Target(f"people/quill-marrow-{tag.lower()}", sid, "private"),
        ]
        seed.ids += [
            Target(str(wf.pk), sid, "world"),
            Target(str(pf.pk), sid, "private"),
            Target(str(loop.pk), sid, "world"),
        ]
    seed.slugs.append(Target(GHOST_SLUG, None))
    seed.ids.append(Target(GHOST_ID, None))
    seed.job_ids.append(Target(GHOST_ID, None))
    return seed


def make_keys() -> dict[str, tuple[Shape, str]]:
    """Create one key per shape directly (a legacy write key without a write source
    included: the fix refuses to *create* one, the matrix checks it cannot write)."""
    keys = {}
    for n, shape in enumerate(SHAPES):
        plaintext = f"gbr_iso{n:05d}_matrix-secret-{n}"
        key = ApiKey.objects.create(
            name=shape.name,
            prefix=f"iso{n:05d}",
            key_hash=hash_key(plaintext),
            scopes=list(shape.scopes),
            write_source_id=shape.write_source,
            trusted=shape.trusted,
        )
        key.readable_sources.set(Source.objects.filter(id__in=shape.readable))
        keys[shape.name] = (shape, plaintext)
    return keys


# --- row fingerprints ------------------------------------------------------------------


def _source_models() -> list[tuple[str, str, bool, list[str]]]:
    """(table, source column, has visibility, data columns) of every source-owned
    model."""
    found = []
    for model in apps.get_models():
        if model.__name__ in BOOKKEEPING:
            continue
        fk = [
            f
            for f in model._meta.fields
            if isinstance(f, ForeignKey) and f.related_model is Source
        ]
        if fk:
            has_visibility = any(f.name == "visibility" for f in model._meta.fields)
            columns = [
                f.column
                for f in model._meta.concrete_fields
                if f.column not in NOISY_COLUMNS
            ]
            found.append((model._meta.db_table, fk[0].column, has_visibility, columns))
    return found


def job_reach(kind: str, params: dict[str, Any]) -> str:
    """The source a job writes, as the matrix reads it: the source its kind's source
    param names (a list of several, or none, is ``EVERY``); ``SERVER_PATH`` for a
    kind that reads a server folder or a path param given; ``NONE`` for a kind that
    touches no source; ``EVERY`` for any other kind."""
    params = params or {}
    if kind in JOB_PATH_KINDS or any(
        params.get(p) is not None for p in JOB_NO_SOURCE_KINDS.get(kind, ())
    ):
        return SERVER_PATH
    if kind in JOB_NO_SOURCE_KINDS:
        return NONE
    value = params.get(JOB_SOURCE_PARAM.get(kind, ""))
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    return value if isinstance(value, str) and value else EVERY


def fingerprint() -> dict[tuple[str, Any], tuple[str, str, str]]:
    """Every source-owned row: (table, pk) → (source id, visibility, row hash); jobs
    with the source they write (``job_reach``)."""
    rows = {}
    for job in Job.objects.order_by("id"):
        digest = json.dumps(
            [job.kind, job.params, job.status, job.max_attempts, job.finished_at],
            default=str,
        )
        rows[("jobs_job", job.pk)] = (job_reach(job.kind, job.params), "world", digest)
    with connection.cursor() as cursor:
        for table, source_column, has_visibility, columns in _source_models():
            visibility = "t.visibility" if has_visibility else "'world'"
            cursor.execute(
                f"SELECT t.id, t.{source_column}, {visibility}, "  # noqa: S608
                f"md5(ROW({', '.join('t.' + c for c in columns)})::text) "
                f"FROM {table} t"
            )
            for pk, sid, vis, digest in cursor.fetchall():
                rows[(table, pk)] = (sid, vis, digest)
    return rows


def write_violations(
    shape: Shape,
    before: dict[tuple[str, Any], tuple[str, str, str]],
    after: dict[tuple[str, Any], tuple[str, str, str]],
) -> list[str]:
    """Rows changed where ``shape`` may not write."""
    found = []
    for key in before.keys() | after.keys():
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        source_id = (old or new)[0]  # type: ignore[index]
        if source_id == NONE and "admin" in shape.scopes:
            continue
        if not shape.may_write(source_id):
            found.append(f"write in {source_id}")
        elif old is not None and old[1] == "private" and not shape.trusted:
            found.append(f"write private row in {source_id}")
    return found


def leak_violations(shape: Shape, seed: Seed, text: str) -> list[str]:
    """Markers in ``text`` the shape may not read."""
    found = []
    for (sid, visibility), markers in seed.markers.items():
        if shape.may_read(sid, visibility):
            continue
        found += [f"leak {m}" for m in markers if m in text]
    return found


# --- inputs from JSON Schema -------------------------------------------------------------


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    for combiner in ("anyOf", "oneOf"):
        if combiner in schema:
            options = [
                _resolve(o, defs) for o in schema[combiner] if o.get("type") != "null"
            ]
            return options[0] if options else {"type": "null"}
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _resolve(schema["allOf"][0], defs)
    return schema


FILLERS = {
    "provenance": "probe",
    "fact": "probe fact",
    "body": "probe body",
    "title": "Probe Title",
    "question": "Who is Wren?",
    "query": "Wren",
    "name": "Wren Tallow A",
    "entity": "Wren Tallow A",
    "entities": "Wren Tallow A,Wren Tallow B",
    "since": "1970-01-01T00:00:00Z",
    "as_of": "2030-01-01T00:00:00Z",
    "ttl": "30d",
    "turns": ["Talked to Wren Tallow A and Wren Tallow B today"],
    "value": "wren@example.invalid",
    "due": "2030-01-01",
    "kind_job": "noop",
}


def _fill(name: str, schema: dict[str, Any], defs: dict[str, Any]) -> Any:
    schema = _resolve(schema, defs)
    if name in FILLERS:
        return FILLERS[name]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "integer":
        return max(int(schema.get("minimum", 1)), 1)
    if kind == "number":
        return 1
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return {
            k: _fill(k, v, defs)
            for k, v in schema.get("properties", {}).items()
            if k in schema.get("required", [])
        }
    if schema.get("format") == "date-time":
        return "1970-01-01T00:00:00Z"
    if schema.get("format") == "date":
        return "2030-01-01"
    return "probe"


def variants(
    fields: dict[str, dict[str, Any]],
    required: set[str],
    defs: dict[str, Any],
    seed: Seed,
) -> list[tuple[dict[str, Any], list[Target]]]:
    """Inputs for one operation: the required fields filled, then every nameable
    field (slug, id, source) varied over the targets, crossed with the write modes
    and visibilities. Returns (inputs, targets named)."""
    base = {k: _fill(k, v, defs) for k, v in fields.items() if k in required}
    axes: list[list[tuple[str, Any, Target | None]]] = []
    for name, raw in fields.items():
        schema = _resolve(raw, defs)
        if name == "kind" and "params" in fields:  # a job request (issue 46)
            axes.append([(name, k, None) for k in sorted(job_kinds())])
            axes.append([("params", dict(p), None) for p in JOB_PARAMS])
        elif name == "job_id":
            axes.append([(name, t.value, t) for t in seed.job_ids])
        elif name in ("slug", "path"):
            axes.append([(name, t.value, t) for t in seed.slugs])
        elif name in ("id", "loop_id", "fact_id"):
            axes.append([(name, t.value, t) for t in seed.ids])
        elif name in ("source", "source_id"):
            named = [(name, s, Target(s, s)) for s in SOURCES]
            axes.append(named if name in required else [(name, None, None), *named])
        elif name in ("mode", "visibility") and "enum" in schema:
            axes.append([(name, v, None) for v in schema["enum"]])
    out = []
    for combo in itertools.product(*axes) if axes else [()]:
        params = dict(base)
        targets = []
        for name, value, target in combo:
            if value is None:
                params.pop(name, None)
            else:
                params[name] = value
            if target is not None:
                targets.append(target)
        out.append((params, targets))
    return out


def reveals(
    shape: Shape, inputs: dict[str, Any], targets: list[Target], status: int
) -> bool:
    """True when an answer other than a refusal names an existing target the shape
    cannot read. Ids name one row anywhere; a slug names a page of the source the
    request addresses (its ``source`` or the key's write source)."""
    addressed = inputs.get("source") or inputs.get("source_id") or shape.write_source
    hidden = [
        t
        for t in targets
        if t.source_id is not None
        and t.value not in SOURCES
        and ("/" not in t.value or t.source_id == addressed)
        and not shape.may_read(t.source_id, t.visibility)
    ]
    return bool(hidden) and status not in (400, 403, 404)


# --- the two transports -------------------------------------------------------------------


def _in_savepoint(run: Any) -> tuple[Any, list[str]]:
    """Run ``run()`` in a savepoint, fingerprinting before and after, then roll back."""
    with transaction.atomic():
        before = fingerprint()
        answer = run()
        after = fingerprint()
        transaction.set_rollback(True)  # the call's writes go; the fingerprints stay
    return answer, [before, after]


def _send(
    client: Client, method: str, url: str, query: dict[str, Any], body: dict[str, Any]
) -> Any:
    """One HTTP request: query parameters in the URL, the body as JSON."""
    if method == "get":
        return client.get(url, query)
    qs = "&".join(f"{k}={v}" for k, v in query.items())
    return client.post(
        url + (f"?{qs}" if qs else ""),
        data=json.dumps(body),
        content_type="application/json",
    )


def run_http(schema: dict[str, Any], seed: Seed, keys: dict[str, Any]) -> Outcome:
    """Every operation of the OpenAPI document × every key shape."""
    outcome = Outcome()
    defs = schema.get("components", {}).get("schemas", {})
    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            params = {p["name"]: p for p in op.get("parameters", [])}
            fields = {n: p.get("schema", {}) for n, p in params.items()}
            required = {n for n, p in params.items() if p.get("required")}
            body_schema = (
                op.get("requestBody", {})
                .get("content", {})
                .get("application/json", {})
                .get("schema")
            )
            body_fields: dict[str, Any] = {}
            if body_schema:
                resolved = _resolve(body_schema, defs)
                body_fields = resolved.get("properties", {})
                required |= set(resolved.get("required", []))
            cases = variants({**fields, **body_fields}, required, defs, seed)
            for shape, plaintext in keys.values():
                client = Client(headers={"Authorization": f"Bearer {plaintext}"})
                for inputs, targets in cases:
                    outcome.cases += 1
                    url = path
                    query = {}
                    for name, value in inputs.items():
                        if name in params and params[name]["in"] == "path":
                            url = url.replace("{" + name + "}", str(value))
                        elif name in params:
                            query[name] = value
                    body = {k: v for k, v in inputs.items() if k in body_fields}

                    response, (before, after) = _in_savepoint(
                        partial(_send, client, method, url, query, body)
                    )
                    label = f"{shape.name} {method.upper()} {url} {query} {body}"
                    found = leak_violations(shape, seed, response.content.decode())
                    found += write_violations(shape, before, after)
                    if reveals(shape, inputs, targets, response.status_code):
                        found.append(f"reveal {response.status_code}")
                    if response.status_code >= 500 and response.status_code != 503:
                        found.append(f"crash {response.status_code}")
                    if found:
                        outcome.violations.append(f"{label}: {_summary(found)}")
    return outcome


def run_mcp(tools: list[Any], seed: Seed, keys: dict[str, Any]) -> Outcome:
    """Every MCP tool × every key shape, through the MCP server of the ``full``
    surface with the caller an HTTP key resolves to."""
    from interfaces.mcp.server import build_server

    outcome = Outcome()
    current: dict[str, Caller] = {}
    server = build_server(surface="full", resolve_caller=lambda ctx: current["c"])
    call = async_to_sync(server.call_tool)
    for tool in tools:
        schema = tool.parameters
        defs = schema.get("$defs", {})
        cases = variants(
            schema.get("properties", {}), set(schema.get("required", [])), defs, seed
        )
        for shape, plaintext in keys.values():
            key = ApiKey.objects.get(key_hash=hash_key(plaintext))
            current["c"] = caller_for_key(key, client="isolation")
            for inputs, targets in cases:
                outcome.cases += 1
                answer, (before, after) = _in_savepoint(
                    lambda tool=tool, inputs=inputs: call(tool.name, inputs)
                )
                text = _mcp_text(answer)
                status = _mcp_status(text, answer)
                label = f"{shape.name} mcp:{tool.name} {inputs}"
                found = leak_violations(shape, seed, text)
                found += write_violations(shape, before, after)
                if reveals(shape, inputs, targets, status):
                    found.append(f"reveal {status}")
                if status == 500:
                    found.append("crash internal")
                if found:
                    outcome.violations.append(f"{label}: {_summary(found)}")
    return outcome


def _summary(found: list[str]) -> str:
    """One line per violating case: its distinct kinds of violation."""
    return "; ".join(sorted(set(found)))


def _mcp_text(answer: Any) -> str:
    if hasattr(answer, "content"):
        return " ".join(getattr(c, "text", "") for c in answer.content)
    return json.dumps(answer, default=lambda o: getattr(o, "__dict__", str(o)))


ERROR_STATUS = {
    "not_found": 404,
    "scope_denied": 403,
    "invalid_params": 400,
    "provenance_required": 400,
    "unavailable": 503,
    "internal": 500,
}


def _mcp_status(text: str, answer: Any) -> int:
    """The HTTP status the same answer would have had (errors by envelope code)."""
    if getattr(answer, "is_error", False):
        try:
            return ERROR_STATUS.get(json.loads(text)["error"], 500)
        except (ValueError, KeyError):
            return 500
    return 200
