"""The dev set's dated corpora (``PATH@YYYY-MM-DD``, tests/data/loops_dev/README.md):
the benchmarks import a mailbox as an export taken on that day would hold it."""

from __future__ import annotations

from pathlib import Path

from benchmarks.data import corpus_path, exported_before

MBOX = """From ann@partner.example Mon Mar  4 09:00:00 2024
From: ann@partner.example
To: olivia.owner@acme.example
Subject: Before the cut
Date: Mon, 04 Mar 2024 09:00:00 +0000
Message-ID: <1@mail.example>

Can you send the Q2 numbers?

From bob@partner.example Mon Jun 10 09:00:00 2024
From: bob@partner.example
To: olivia.owner@acme.example
Subject: After the cut
Date: Mon, 10 Jun 2024 09:00:00 +0000
Message-ID: <2@mail.example>

A stray late message.

From carl@partner.example Mon Mar  4 10:00:00 2024
From: carl@partner.example
To: olivia.owner@acme.example
Subject: Undated
Message-ID: <3@mail.example>

No date header at all.
"""


def test_a_dated_corpus_keeps_only_the_mail_of_an_export_taken_that_day(
    tmp_path: Path,
) -> None:
    box = tmp_path / "owner.mbox"
    box.write_text(MBOX)
    path, until = corpus_path("owner.mbox@2024-03-05", tmp_path)
    assert (path, until) == (box, "2024-03-05")
    kept = [e.data.decode() for e in exported_before(path, until)]
    assert len(kept) == 2
    assert "Before the cut" in kept[0] and "Undated" in kept[1]


def test_a_corpus_without_a_cut_names_its_path() -> None:
    assert corpus_path("enron/allen-p", Path("/data")) == (
        Path("/data/enron/allen-p"),
        "",
    )
