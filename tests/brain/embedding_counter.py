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
