"""A counting wrapper around the real embedding provider (no mocks of our code or DB).

``CountingProvider`` delegates to the configured provider and records every text it
was asked to embed, so tests can prove which pages were (re-)embedded.
"""

from __future__ import annotations

from brain.embeddings import EmbeddingProvider, Vector


class CountingProvider:
    """Delegates ``embed`` to ``inner`` and keeps the texts of every call."""

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimensions = inner.dimensions
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> list[Vector]:
        self.calls.append(list(texts))
        return self.inner.embed(texts)

    @property
    def texts(self) -> list[str]:
        """Every text embedded so far, in call order."""
        return [t for call in self.calls for t in call]


def count_local_embeddings(settings, monkeypatch) -> CountingProvider:  # type: ignore[no-untyped-def]
    """Switch the tests to the real local provider, wrapped in a ``CountingProvider``
    that ``brain.embeddings.get_provider`` returns; the body of the ``counter``
    fixtures."""
    from brain import embeddings

    settings.BRAIN_EMBEDDING_PROVIDER = "local"
    inner = embeddings.get_provider()
    assert inner is not None
    provider = CountingProvider(inner)
    monkeypatch.setattr(embeddings, "get_provider", lambda: provider)
    return provider


class CachingProvider:
    """Delegates to ``inner`` and memoises vectors per text for the test session,
    so a corpus re-created in every test is embedded by the real model only once."""

    _cache: dict[tuple[str, str], Vector] = {}

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimensions = inner.dimensions

    def embed(self, texts: list[str]) -> list[Vector]:
        todo = [t for t in dict.fromkeys(texts) if (self.name, t) not in self._cache]
        if todo:
            for text, vector in zip(todo, self.inner.embed(todo), strict=True):
                self._cache[(self.name, text)] = vector
        return [self._cache[(self.name, t)] for t in texts]
