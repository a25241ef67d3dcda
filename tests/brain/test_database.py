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
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        with pytest.raises(SocketConnectBlockedError):
            sock.connect(("192.0.2.1", 80))
