"""One model per vector (SPEC §3, issue 46): a change of embedding model never
mixes vectors and never fails a request.

Embeddings come from ``HashingProvider``, a deterministic bag-of-words fake of a
provider (its model id, dimension and hash seed are what a model change changes);
the database, the search SQL, the job runner and the HTTP API are real.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterator

import pytest
from django.test import Client
from pgvector import Vector

from brain import embeddings
from brain.models import Chunk, Fact, Source
from brain.search.vector import _vector_arm
from interfaces.doctor import doctor_report
from jobs.models import Job
from jobs.runner import execute_job
from jobs.services import job_enqueue

BODY = "The harbour crane inspection is booked for Tuesday with Orla."
QUERY = "harbour crane inspection"


class HashingProvider:
    """A provider whose vectors are hashed word counts, unit length: texts sharing
    words are near, and two seeds are two unrelated models of one dimension."""

    def __init__(self, name: str, dimensions: int) -> None:
        self.name = name
        self.dimensions = dimensions

    def embed(self, texts: list[str]) -> list[embeddings.Vector]:
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        vector[0] = 0.01
        for word in re.findall(r"\w+", text.lower()):
            digest = hashlib.sha256(f"{self.name}:{word}".encode()).digest()
            vector[int.from_bytes(digest[:4], "big") % self.dimensions] += 1.0
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector]


MODEL_A = HashingProvider("openai:model-a", 384)
MODEL_B = HashingProvider("openai:model-b", 384)
MODEL_C = HashingProvider("openai:model-c", 256)


@pytest.fixture
def use_model(settings, monkeypatch) -> Callable[[HashingProvider], None]:  # type: ignore[no-untyped-def]
    """``use_model(p)`` makes ``p`` the configured provider (starts with model A)."""
    settings.BRAIN_EMBEDDING_PROVIDER = "openai"
    current = [MODEL_A]
    monkeypatch.setattr(embeddings, "get_provider", lambda: current[0])

    def switch(provider: HashingProvider) -> None:
        current[0] = provider

    return switch


@pytest.fixture
def client(make_key, api_client, default_source: Source) -> Iterator[Client]:  # type: ignore[no-untyped-def]
    yield api_client(make_key(default_source).plaintext)


def write_page(client: Client, capture, title: str, body: str) -> None:  # type: ignore[no-untyped-def]
    """POST a page and run its after-commit embedding, as a real request would."""
    with capture(execute=True):
        response = client.post(
            "/api/pages",
            {"title": title, "body": body},
            content_type="application/json",
        )
    assert response.status_code == 201, response.json()


def search(client: Client) -> dict:  # type: ignore[type-arg]
    response = client.get("/api/search", {"query": QUERY})
    assert response.status_code == 200, response.json()
    return response.json()


def vector_hits(provider: HashingProvider, source: Source) -> list[int]:
    """Page ids the vector arm finds for ``QUERY`` embedded by ``provider``."""
    from django.db import connection

    literal = Vector(provider.embed([QUERY])[0]).to_text()
    with connection.cursor() as cursor:
        found = _vector_arm(
            cursor,
            vector=literal,
            excluded=[],
            source_ids=[source.id],
            visibilities=["private", "world"],
        )
    return [page_id for _chunk, page_id, _part in found]


def run_reembed() -> Job:
    job, _ = job_enqueue(kind="reembed", dispatch=False)
    done = execute_job(job_id=job.pk)
    assert done is not None and done.status == Job.Status.SUCCEEDED, done.error
    return done


def check(name: str) -> dict | None:  # type: ignore[type-arg]
    report = doctor_report(deploy=False)
    return next((c for c in report["checks"] if c["name"] == name), None)


@pytest.mark.django_db
def test_a_same_size_model_change_says_embeddings_stale_until_job_reembed(
    use_model, client, default_source, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    write_page(client, django_capture_on_commit_callbacks, "Crane", BODY)
    assert set(Chunk.objects.values_list("embedding_model", flat=True)) == {
        MODEL_A.name
    }
    assert search(client).get("search_degraded") is None
    with django_capture_on_commit_callbacks(execute=True):
        remembered = client.post(
            "/api/remember",
            {"fact": "Orla books the crane inspections.", "provenance": "test"},
            content_type="application/json",
        )
    assert remembered.status_code in (200, 201), remembered.json()
    assert set(Fact.objects.values_list("embedding_model", flat=True)) == {MODEL_A.name}

    use_model(MODEL_B)
    answer = search(client)
    assert answer["search_degraded"].startswith("embeddings_stale: 1 of 1 (")
    assert "reembed" in answer["search_degraded"]
    assert [r["slug"] for r in answer["results"]] == ["notes/crane"]  # by keywords
    assert vector_hits(MODEL_B, default_source) == []  # A's vectors never ranked
    stale = check("embedding model")
    assert stale is not None and stale["status"] == "fail"
    assert stale["seen"].startswith("1 of 1 chunk vector(s) stale")
    assert "run_job reembed" in stale["fix"]
    health = Client().get("/api/health").json()
    assert health["status"] == "degraded" and "embedding model" in health["failing"]
    assert "0 of 1 chunk(s) embedded by openai:model-b" in check("embeddings")["seen"]

    job = run_reembed()

    assert job.progress["step"] == job.progress["total"] == 1
    assert job.result["embedded"] == 1
    assert set(Chunk.objects.values_list("embedding_model", flat=True)) == {
        MODEL_B.name
    }
    assert search(client).get("search_degraded") is None
    assert len(vector_hits(MODEL_B, default_source)) == 1
    assert check("embedding model") is None
    # The fact remembered under model A is re-embedded too: no two models' fact
    # vectors are left side by side.
    assert job.result["facts"] == 1
    assert set(Fact.objects.values_list("embedding_model", flat=True)) == {MODEL_B.name}


@pytest.mark.django_db
def test_a_new_dimension_fails_no_request_and_job_reembed_migrates_the_columns(
    use_model, client, default_source, django_capture_on_commit_callbacks
) -> None:  # type: ignore[no-untyped-def]
    write_page(client, django_capture_on_commit_callbacks, "Crane", BODY)
    remembered = client.post(
        "/api/remember",
        {"fact": "Orla books the crane inspections.", "provenance": "test"},
        content_type="application/json",
    )
    assert remembered.status_code in (200, 201), remembered.json()

    use_model(MODEL_C)
    answer = search(client)
    assert answer["search_degraded"].startswith("embeddings_stale: 1 of 1 (")
    assert [r["slug"] for r in answer["results"]] == ["notes/crane"]
    write_page(client, django_capture_on_commit_callbacks, "Crane two", BODY)
    remembered = client.post(
        "/api/remember",
        {"fact": "Tuesday is the crane day.", "provenance": "test"},
        content_type="application/json",
    )
    assert remembered.status_code in (200, 201), remembered.json()
    stale = check("embedding model")
    assert stale is not None and "384-d" in stale["seen"] and "256-d" in stale["seen"]

    job = run_reembed()

    assert job.result["migrated_to"] == 256
    assert embeddings.column_dimensions("brain_chunk") == 256
    assert embeddings.column_dimensions("brain_fact") == 256
    assert set(Chunk.objects.values_list("embedding_model", flat=True)) == {
        MODEL_C.name
    }
    assert all(len(c.embedding) == 256 for c in Chunk.objects.all())
    assert not Fact.objects.filter(embedding__isnull=True).exists()
    assert search(client).get("search_degraded") is None
    assert len(vector_hits(MODEL_C, default_source)) == 2
    assert check("embedding model") is None


class FailingAfter(HashingProvider):
    """Model B that fails (endpoint down) after ``calls`` successful calls."""

    def __init__(self, calls: int) -> None:
        super().__init__(MODEL_B.name, MODEL_B.dimensions)
        self.left = calls

    def embed(self, texts: list[str]) -> list[embeddings.Vector]:
        if self.left <= 0:
            raise embeddings.EmbeddingUnavailable("endpoint down")
        self.left -= 1
        return super().embed(texts)


@pytest.mark.django_db
def test_job_reembed_resumes_where_a_failed_attempt_stopped(
    use_model, client, django_capture_on_commit_callbacks, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from brain.services.pages import index as page_index

    for n in range(3):
        write_page(client, django_capture_on_commit_callbacks, f"Crane {n}", BODY)
    monkeypatch.setattr(page_index, "EMBED_BATCH", 1)
    flaky = FailingAfter(calls=1)
    use_model(flaky)
    job, _ = job_enqueue(kind="reembed", dispatch=False)

    first = execute_job(job_id=job.pk)

    assert first is not None and first.status == Job.Status.QUEUED  # a retry
    assert "2 chunk(s) still wait" in first.error
    assert first.progress["step"] == 1 and first.progress["total"] == 3
    assert Chunk.objects.filter(embedding_model=MODEL_B.name).count() == 1
    flaky.left = 10  # the endpoint is back
    assert search(client)["search_degraded"].startswith("embeddings_stale: 2 of 3")

    Job.objects.filter(pk=job.pk).update(run_after=None)
    second = execute_job(job_id=job.pk)

    assert second is not None and second.status == Job.Status.SUCCEEDED
    assert second.result["embedded"] == 2  # only what was left
    assert second.progress["total"] == 2
    assert search(client).get("search_degraded") is None


class CollidingProvider(HashingProvider):
    """Model B: hashed word counts of its own, except that it maps ``text`` to the
    very vector model A gave ``twin``: compared across models, the two facts
    look identical; within model B (the meaning stage's own embeddings) they do
    not."""

    def __init__(self, name: str, *, text: str, twin: str) -> None:
        super().__init__(name, 384)
        self.text, self.twin = text, twin

    def _one(self, text: str) -> list[float]:
        if text == self.text:
            return MODEL_A._one(self.twin)
        return super()._one(text)


@pytest.mark.django_db
def test_remember_never_deduplicates_against_another_models_vector(
    use_model, client
) -> None:  # type: ignore[no-untyped-def]
    def remember(text: str) -> dict:  # type: ignore[type-arg]
        response = client.post(
            "/api/remember",
            {"fact": text, "provenance": "test", "entity": "Orla"},
            content_type="application/json",
        )
        assert response.status_code in (200, 201), response.json()
        return response.json()

    first, other = "Orla books the crane inspections.", "Orla prefers tea over coffee."
    remember(first)
    use_model(CollidingProvider("openai:model-b", text=other, twin=first))

    second = remember(other)

    assert second["status"] != "duplicate", second
    assert Fact.objects.count() == 2
