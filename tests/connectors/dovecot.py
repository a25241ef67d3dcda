"""A real IMAP server for the tests: Dovecot (Debian ``dovecot-imapd``), run from a
temp folder as a subprocess (SPEC §6.1a: "tested against a real IMAP server started by
the tests").

The session fixture ``dovecot`` writes its own ``dovecot.conf`` (base_dir, state and
log under the temp folder, a ``passwd-file`` user database, maildirs under the temp
folder), generates a self-signed certificate with ``cryptography``, listens on two
free loopback ports (plain/STARTTLS and implicit TLS) and is stopped at teardown. No
system service is involved. Run as root (CI), the login processes use Debian's
``dovenull`` user and mail is owned by the ``dovecot`` user (Dovecot refuses root for
both); run as another user, everything runs as that user.

Each test gets its own account (``imap_account``) whose maildir is seeded with the
Enron messages of ``tests/data/enron/allen-p`` (inbox → INBOX, sent_items → Sent,
which carries the ``\\Sent`` SPECIAL-USE flag).
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as dt
import grp
import json
import os
import pwd
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from imapclient import IMAPClient

from connectors.imap.client import ImapSettings
from tests.connectors.helpers import ENRON

PASSWORD = "correct-horse-battery"  # noqa: S105 - a test account on a loopback server
ACCOUNTS = 60  # accounts in the passwd-file, one per test that asks for one


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to send SIGTERM when the test process
    dies (``PR_SET_PDEATHSIG``), so a killed test run leaves no Dovecot behind."""
    # Without prctl (not Linux glibc) the fixture's own teardown still stops it.
    with contextlib.suppress(OSError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A throw-away certificate for 127.0.0.1 / localhost (RSA 2048, 1 day)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    import ipaddress

    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


@dataclass
class DovecotServer:
    """A running Dovecot: ``port`` (plain + STARTTLS), ``tls_port`` (implicit TLS),
    ``cert`` (the self-signed certificate to trust)."""

    root: Path
    conf: Path
    port: int
    tls_port: int
    cert: Path
    mail_uid: int
    mail_gid: int
    process: subprocess.Popen[bytes]
    identity: ThreadingHTTPServer | None = None
    accounts_used: int = 0

    def doveadm(self, *args: str) -> str:
        """Run ``doveadm`` against this instance; returns its stdout."""
        done = subprocess.run(
            ["doveadm", "-c", str(self.conf), *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"doveadm {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def log(self) -> str:
        """The server log (for failure messages)."""
        parts = []
        for name in ("stderr.log", "dovecot.log"):
            path = self.root / name
            if path.exists():
                parts.append(path.read_text(errors="replace"))
        return "\n".join(parts)


@dataclass
class ImapAccount:
    """One test account on the server, with helpers that use a plain (unguarded)
    ``IMAPClient``, as another mail client of the same mailbox would."""

    server: DovecotServer
    user: str
    home: Path

    def settings(self, **overrides: object) -> ImapSettings:
        """Our reader's settings for this account (plain port unless overridden)."""
        base: dict[str, object] = {
            "host": "127.0.0.1",
            "port": self.server.port,
            "security": "plain",
            "username": self.user,
            "secret": PASSWORD,
            "timeout": 10.0,
        }
        base.update(overrides)
        return ImapSettings(**base)  # type: ignore[arg-type]

    def other_client(self) -> IMAPClient:
        """Another client of the mailbox (writes allowed: it stands for the mail
        provider delivering or a person moving mail)."""
        client = IMAPClient("127.0.0.1", port=self.server.port, ssl=False, timeout=10)
        client.login(self.user, PASSWORD)
        return client

    def deliver(self, raw: bytes, folder: str = "INBOX") -> None:
        """Append ``raw`` to ``folder`` (new mail arriving)."""
        client = self.other_client()
        try:
            client.append(folder, raw)
        finally:
            client.logout()

    def uidvalidity(self, folder: str = "INBOX") -> int:
        """The folder's current UIDVALIDITY."""
        client = self.other_client()
        try:
            return int(client.folder_status(folder, [b"UIDVALIDITY"])[b"UIDVALIDITY"])
        finally:
            client.logout()

    def set_uidvalidity(self, value: int, folder: str = "INBOX") -> None:
        """Give ``folder`` a new UIDVALIDITY, as a server rebuild would."""
        self.server.doveadm(
            "mailbox", "update", "-u", self.user, "--uid-validity", str(value), folder
        )

    def issue_token(self) -> str:
        """An OAuth 2.0 access token for this account (XOAUTH2), valid at the fake
        identity provider Dovecot asks."""
        token = f"ya29.{uuid.uuid4().hex}"
        _Introspection.tokens[token] = self.user
        return token

    def kick(self) -> None:
        """Drop every open IMAP connection of this account (server side) and wait
        (up to 10 s) until the server lists none: ``doveadm kick`` only signals the
        imap processes, and on a busy machine the next command could still reach one
        that has not exited yet."""
        self.server.doveadm("kick", self.user)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if self.user not in self.server.doveadm("who", self.user):
                    return
            except RuntimeError:
                return  # no anvil to ask: the kick itself is all we have
            time.sleep(0.05)


def enron_folders() -> dict[str, list[bytes]]:
    """The seed of every test account: Enron inbox → INBOX, sent_items → Sent."""
    return {
        folder: [
            path.read_bytes()
            for path in sorted((ENRON / src).iterdir())
            if path.is_file()
        ]
        for folder, src in (("INBOX", "inbox"), ("Sent", "sent_items"))
    }


def seed_maildir(
    home: Path, folders: dict[str, list[bytes]], uid: int, gid: int
) -> None:
    """Write ``folders`` (name → raw messages, INBOX or a Maildir++ sub-folder) as
    a maildir under ``home``, marked seen, owned by the mail user."""
    maildir = home / "Maildir"
    for folder, messages in folders.items():
        base = maildir if folder == "INBOX" else maildir / f".{folder}"
        for part in ("cur", "new", "tmp"):
            (base / part).mkdir(parents=True, exist_ok=True)
        for index, data in enumerate(messages):
            name = f"{1_000_000_000 + index}.M{index}P1.brain-test:2,S"
            (base / "cur" / name).write_bytes(data.replace(b"\r\n", b"\n"))
    subscribed = [f for f in folders if f != "INBOX"]
    (maildir / "subscriptions").write_text("".join(f"{f}\n" for f in subscribed))
    for dirpath, _dirnames, filenames in os.walk(home):
        os.chown(dirpath, uid, gid)
        for name in filenames:
            os.chown(Path(dirpath) / name, uid, gid)


def _oauth2_conf(introspection_port: int) -> str:
    """Dovecot's OAuth 2.0 passdb: tokens are checked at the fake identity
    provider's RFC 7662 introspection endpoint."""
    return (
        "introspection_mode = post\n"
        f"introspection_url = http://127.0.0.1:{introspection_port}/introspect\n"
        "username_attribute = username\n"
        "active_attribute = active\n"
        "active_value = true\n"
    )


class _Introspection(BaseHTTPRequestHandler):
    """RFC 7662 token introspection of the fake identity provider: a token issued
    by ``ImapAccount.issue_token`` is active for its account."""

    tokens: dict[str, str] = {}

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers.get("content-length") or 0)
        form = parse_qs(self.rfile.read(length).decode())
        token = (form.get("token") or [""])[0]
        user = self.tokens.get(token)
        body = {"active": "true", "username": user} if user else {"active": "false"}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        return


def _conf(root: Path, port: int, tls_port: int, cert: Path, key: Path) -> str:
    if os.geteuid() == 0:
        login_user, internal_user = "dovenull", "dovecot"
        chroot = ""
    else:
        login_user = internal_user = pwd.getpwuid(os.geteuid()).pw_name
        chroot = "  chroot =\n"
    mail = pwd.getpwnam(internal_user)
    group = grp.getgrgid(mail.pw_gid).gr_name
    return f"""# Written by tests/connectors/dovecot.py for one test session.
base_dir = {root}/run
state_dir = {root}/state
instance_name = brain-test-{uuid.uuid4().hex[:8]}
protocols = imap
listen = 127.0.0.1
log_path = {root}/dovecot.log
info_log_path = {root}/dovecot.log
default_login_user = {login_user}
default_internal_user = {internal_user}
default_internal_group = {group}
first_valid_uid = {mail.pw_uid}
last_valid_uid = {mail.pw_uid}
mail_location = maildir:~/Maildir
disable_plaintext_auth = no
auth_mechanisms = plain login xoauth2
auth_verbose = yes
auth_failure_delay = 0
ssl = yes
ssl_cert = <{cert}
ssl_key = <{key}
passdb {{
  driver = oauth2
  mechanisms = xoauth2
  args = {root}/oauth2.conf.ext
}}
passdb {{
  driver = passwd-file
  mechanisms = plain login
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = static
  args = uid={mail.pw_uid} gid={mail.pw_gid} home={root}/home/%u allow_all_users=yes
}}
service imap-login {{
{chroot}  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {tls_port}
    ssl = yes
  }}
}}
service anvil {{
{chroot}}}
namespace inbox {{
  inbox = yes
  separator = /
  mailbox Sent {{
    special_use = \\Sent
  }}
}}
"""


def _wait_listening(server: DovecotServer, deadline: float) -> None:
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    server.process.kill()
    raise RuntimeError(f"Dovecot did not start:\n{server.log()}")


def start_dovecot() -> DovecotServer:
    """Start a Dovecot in a new temp folder (see module docstring). Raises
    ``RuntimeError`` when it is not installed or does not start."""
    binary = shutil.which("dovecot") or (
        "/usr/sbin/dovecot" if Path("/usr/sbin/dovecot").exists() else None
    )
    if binary is None:
        raise RuntimeError(
            "Dovecot is not installed: apt-get install -y dovecot-imapd (.ci/run does)."
        )
    root = Path(tempfile.mkdtemp(prefix="brain-dovecot-"))
    root.chmod(0o755)
    for sub in ("run", "state", "home"):
        (root / sub).mkdir()
    # Every account is in the passwd-file from the start: Dovecot re-reads a changed
    # passwd-file at most once a second, too late for an account added mid-test.
    (root / "passwd").write_text(
        "".join(
            f"team-{n:03d}@shared.example:{{PLAIN}}{PASSWORD}\n"
            for n in range(1, ACCOUNTS + 1)
        )
    )
    cert, key = _self_signed(root)
    port, tls_port = _free_port(), _free_port()
    identity = ThreadingHTTPServer(("127.0.0.1", 0), _Introspection)
    threading.Thread(target=identity.serve_forever, daemon=True).start()
    (root / "oauth2.conf.ext").write_text(_oauth2_conf(identity.server_port))
    conf = root / "dovecot.conf"
    conf.write_text(_conf(root, port, tls_port, cert, key))
    internal = "dovecot" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    mail = pwd.getpwnam(internal)
    os.chown(root / "home", mail.pw_uid, mail.pw_gid)
    with (root / "stderr.log").open("wb") as stderr:
        process = subprocess.Popen(  # noqa: S603 - our own config, loopback only
            [binary, "-F", "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - prctl only, no threads used
        )
    server = DovecotServer(
        root=root,
        conf=conf,
        port=port,
        tls_port=tls_port,
        cert=cert,
        mail_uid=mail.pw_uid,
        mail_gid=mail.pw_gid,
        process=process,
        identity=identity,
    )
    _wait_listening(server, time.monotonic() + 20)
    return server


def stop_dovecot(server: DovecotServer) -> None:
    """Stop the server and remove its temp folder (kept when
    ``BRAIN_KEEP_DOVECOT`` is set, for reading its log)."""
    if server.identity is not None:
        server.identity.shutdown()
        server.identity.server_close()
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=5)
    if not os.environ.get("BRAIN_KEEP_DOVECOT"):
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture(scope="session")
def dovecot() -> Iterator[DovecotServer]:
    """A Dovecot for the whole test session, stopped at the end."""
    try:
        server = start_dovecot()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield server
    finally:
        stop_dovecot(server)


@pytest.fixture
def imap_account(dovecot: DovecotServer) -> ImapAccount:
    """A fresh account (``team-NNN@shared.example``) seeded with the Enron sample."""
    return make_account(dovecot)


def make_account(
    dovecot: DovecotServer, folders: dict[str, list[bytes]] | None = None
) -> ImapAccount:
    """The next unused account of the passwd-file, its maildir seeded with
    ``folders`` (default: the Enron sample, ``enron_folders``)."""
    dovecot.accounts_used += 1
    if dovecot.accounts_used > ACCOUNTS:
        raise RuntimeError(f"More than {ACCOUNTS} IMAP test accounts: raise ACCOUNTS.")
    user = f"team-{dovecot.accounts_used:03d}@shared.example"
    home = dovecot.root / "home" / user
    seed_maildir(home, folders or enron_folders(), dovecot.mail_uid, dovecot.mail_gid)
    return ImapAccount(server=dovecot, user=user, home=home)


def tls_context(server: DovecotServer) -> ssl.SSLContext:
    """A client context that trusts only the server's self-signed certificate."""
    context = ssl.create_default_context(cafile=str(server.cert))
    return context
