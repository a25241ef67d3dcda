"""Write the crafted hostile mail set (``corpus/``) with invented content.

Run ``python tests/data/hostile_mail/make.py`` to regenerate; the files are committed.
Links and a FIFO cannot live in git portably: ``tests/connectors/test_import_corpus.py``
adds them to a copy at test time (``add_links_and_fifo``).
Every person and company here is invented; the domains are reserved examples.
"""

from __future__ import annotations

import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"


def msg(
    *,
    mid: str,
    subject: str = "Fern Walk",
    frm: str = "Ada Quill <ada@example.org>",
    to: str = "Bram Fennick <bram@example.net>",
    date: str = "Mon, 3 Mar 2025 09:15:00 +0000",
    body: str = "Can you send the pallet count by Friday?\n",
    extra: str = "",
) -> bytes:
    """One plain-text message (LF line endings)."""
    head = (
        f"From: {frm}\nTo: {to}\nSubject: {subject}\nDate: {date}\n"
        f"Message-ID: <{mid}>\n{extra}"
    )
    return (head + "\n" + body).encode("utf-8")


def deep_multipart(depth: int) -> bytes:
    """A multipart nested ``depth`` levels deep (a RecursionError in naive walks)."""
    lines = [
        "From: Cleo Marsh <cleo@example.org>",
        "To: Ada Quill <ada@example.org>",
        "Subject: Russian dolls",
        "Date: Tue, 4 Mar 2025 10:00:00 +0000",
        "Message-ID: <dolls@example.org>",
        "MIME-Version: 1.0",
        'Content-Type: multipart/mixed; boundary="b0"',
        "",
    ]
    for level in range(1, depth):
        lines += [
            f"--b{level - 1}",
            f'Content-Type: multipart/mixed; boundary="b{level}"',
            "",
        ]
    lines += [f"--b{depth - 1}", "Content-Type: text/plain", "", "Innermost doll.", ""]
    for level in range(depth - 1, -1, -1):
        lines += [f"--b{level}--", ""]
    return "\n".join(lines).encode()


def write(path: str, data: bytes) -> None:
    target = CORPUS / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def main() -> None:
    shutil.rmtree(CORPUS, ignore_errors=True)
    # Maildir with cur/ only (git drops empty new/ and tmp/).
    write("no-new/cur/1740990000.M1P1.host:2,S", msg(mid="cur-only@example.org"))
    # A maildir root with a non-dot sub-folder, a loose file, new/ and tmp/.
    write(
        "kernel/cur/1740990001.M2P1.host:2,S",
        msg(mid="k1@example.org", subject="[PATCH] pallet: fix count"),
    )
    write(
        "kernel/new/1740990002.M3P1.host",
        msg(
            mid="k2@example.org",
            subject="Re: [PATCH] pallet: fix count",
            frm="Bram Fennick <bram@example.net>",
            to="Ada Quill <ada@example.org>",
            extra="In-Reply-To: <k1@example.org>\n",
            body="Looks right to me.\n",
        ),
    )
    write("kernel/tmp/1740990003.M4P1.host", msg(mid="k-tmp@example.org"))
    write("kernel/archive/msg-0001", msg(mid="k3@example.org", subject="Archive one"))
    write("kernel/loose-message", msg(mid="k4@example.org", subject="Loose one"))
    write("kernel/maildirfolder", b"")
    # MH: numbered files and a sequences file.
    write("mh/inbox/1", msg(mid="mh1@example.org", subject="MH one"))
    write("mh/inbox/2", msg(mid="mh2@example.org", subject="MH two"))
    write("mh/inbox/.mh_sequences", b"unseen: 2\n")
    # Maildir++ dot folder.
    write(
        "plus/cur/1740990010.M5P1.host:2,S",
        msg(mid="p1@example.org", body="Plus folder inbox.\n"),
    )
    write(
        "plus/.Sent/cur/1740990011.M6P1.host:2,S",
        msg(
            mid="p2@example.org",
            frm="Ada Quill <ada@example.org>",
            subject="Sent from plus",
        ),
    )
    # An .mbox holding one message and no envelope line.
    write("mbox/no-envelope.mbox", msg(mid="noenv@example.org", subject="No envelope"))
    # mboxo: an unquoted body line starting with "From " after a blank line.
    write(
        "mbox/warehouse.mbox",
        b"From ada@example.org Mon Mar  3 09:15:00 2025\n"
        + msg(
            mid="warehouse@example.org",
            subject="Shipping",
            body=(
                "Hello Bram,\n\nFrom the warehouse we shipped 40 pallets on Monday.\n\n"
                "Could you confirm the count by Thursday?\n"
            ),
        )
        + b"\nFrom bram@example.net Mon Mar  3 10:00:00 2025\n"
        + msg(
            mid="warehouse-2@example.org",
            subject="Re: Shipping",
            frm="Bram Fennick <bram@example.net>",
            to="Ada Quill <ada@example.org>",
            extra="In-Reply-To: <warehouse@example.org>\n",
            body="Confirmed: 40.\n",
        ),
    )
    # mboxrd: ">From " and ">>From " quoting.
    write(
        "mbox/quoted.mbox",
        b"From ada@example.org Mon Mar  3 11:00:00 2025\n"
        + msg(
            mid="rd1@example.org",
            subject="Quoted",
            body=">From the top, please.\n>>From here too.\n",
        )
        + b"\n",
    )
    # Content-Length delimited (mboxcl): the body holds an envelope-like line.
    body = "Forwarded log:\n\nFrom log@example.org Mon Mar  3 12:00:00 2025\nline two\n"
    head = msg(mid="cl1@example.org", subject="Length", body="").decode()
    first = (
        head.rstrip("\n") + f"\nContent-Length: {len(body.encode())}\n\n" + body
    ).encode()
    write(
        "mbox/content-length.mbox",
        b"From ada@example.org Mon Mar  3 12:00:00 2025\n"
        + first
        + b"\nFrom bram@example.net Mon Mar  3 12:05:00 2025\n"
        + msg(mid="cl2@example.org", subject="Length two", body="Second.\n")
        + b"\n",
    )
    # Hostile single messages.
    write(
        "hostile/nul-subject.eml",
        msg(mid="nulsubj@example.org", subject="=?utf-8?B?AA==?="),
    )
    write(
        "hostile/nul-name.eml",
        msg(mid="nulname@example.org", frm="=?utf-8?B?AA==?= <ghost@example.org>"),
    )
    write(
        "hostile/raw-nul.eml",
        msg(mid="rawnul@example.org", body="before\x00after\n"),
    )
    write(
        "hostile/latin1.eml",
        msg(mid="latin1@example.org", subject="Caf\u00e9", body="").replace(
            b"Caf\xc3\xa9", b"Caf\xe9"
        )
        + "Cr\u00e8me br\u00fbl\u00e9e for the launch.\n".encode("latin-1"),
    )
    write("hostile/deep.eml", deep_multipart(1000))
    write(
        "hostile/same-id-a.eml",
        msg(mid="twin@example.org", subject="Twin", body="First twin.\n"),
    )
    write(
        "hostile/same-id-b.eml",
        msg(mid="twin@example.org", subject="Twin", body="Second, different twin.\n"),
    )
    write(
        "hostile/year-0000.eml",
        msg(
            mid="y0@example.org",
            subject="Year zero",
            date="Mon, 1 Jan 0000 00:00:00 +0000",
        ),
    )
    write(
        "hostile/year-0001.eml",
        msg(
            mid="y1@example.org",
            subject="Year one",
            date="Mon, 1 Jan 0001 00:00:00 +0000",
        ),
    )
    write(
        "hostile/year-9999.eml",
        msg(
            mid="y9999@example.org",
            subject="Far future",
            date="Fri, 31 Dec 9999 23:59:59 +0000",
        ),
    )
    write(
        "hostile/bad-charset.eml",
        msg(
            mid="charset@example.org",
            body="caf\u00e9\n",
            extra='MIME-Version: 1.0\nContent-Type: text/plain; charset="x-no\x00such"\n',
        ),
    )
    write("hostile/empty.eml", b"")
    write("hostile/notes.txt", b"shopping: pears, flour\nremember: call the vet\n")
    # A byte-identical copy in another folder: a duplicate.
    write("copies/cur/1740990020.M7P1.host:2,S", msg(mid="cur-only@example.org"))


if __name__ == "__main__":
    main()
