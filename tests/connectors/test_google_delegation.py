"""Google Workspace shared mailboxes through domain-wide delegation (SPEC §6.1 shared
mailboxes): google-auth's real service-account credentials sign a JWT-bearer
assertion for the shared address, a fake token endpoint at the HTTP layer verifies it
and answers, and the unchanged Gmail sync runs on ``HttpMockSequence``."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

import httplib2
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth import jwt

from accounts.models import User
from brain.models import Page, Source
from connectors.base import PermanentError
from connectors.google import delegation
from connectors.google.client import READONLY_SCOPES
from connectors.google.delegation import (
    DELEGATION_SCOPES,
    DelegationNotConfigured,
    delegated_http,
    service_account_info,
)
from connectors.google.sync import google_sync
from connectors.models import SharedMailbox, WorkspaceServiceAccount
from connectors.services_shared import shared_mailbox_create, workspace_key_upload
from tests.connectors.google_fakes import (
    ann_question,
    my_answer,
    newsletter,
    ok,
    sequence,
    thread,
)

pytestmark = pytest.mark.django_db

SHARED = "support@acme.example"
TOKEN_URI = "https://oauth2.googleapis.com/token"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


@pytest.fixture(scope="module")
def key_pair() -> tuple[dict[str, Any], bytes]:
    """A service-account key (as Google's JSON) and its public key in PEM."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode("ascii")
    info = {
        "type": "service_account",
        "project_id": "brain-test",
        "private_key_id": "0123456789abcdef",
        "private_key": pem,
        "client_email": "brain-sync@brain-test.iam.gserviceaccount.com",
        "client_id": "112233445566778899",
        "token_uri": TOKEN_URI,
    }
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return info, public


class TokenEndpointFake:
    """An httplib2-compatible transport: Google's token endpoint (it verifies the
    JWT-bearer assertion with the service account's public key) in front of an
    ``HttpMockSequence`` for the API calls. Records the verified claims and the
    Authorization header of every API call."""

    def __init__(self, api: Any, public_key: bytes, *, refuse: bool = False) -> None:
        self.api = api
        self.public_key = public_key
        self.refuse = refuse
        self.claims: list[dict[str, Any]] = []
        self.authorizations: list[str] = []

    def request(
        self,
        uri: str,
        method: str = "GET",
        body: Any = None,
        headers: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> tuple[httplib2.Response, bytes]:
        if uri == TOKEN_URI:
            form = parse_qs(body.decode() if isinstance(body, bytes) else body)
            assert method == "POST" and form["grant_type"] == [JWT_BEARER]
            claims = jwt.decode(
                form["assertion"][0], certs=self.public_key, audience=TOKEN_URI
            )
            self.claims.append(claims)
            if self.refuse:
                return httplib2.Response(
                    {"status": "401", "content-type": "application/json"}
                ), json.dumps(
                    {
                        "error": "unauthorized_client",
                        "error_description": "Client is unauthorized to retrieve "
                        "access tokens using this method, or client not authorized "
                        "for any of the scopes requested.",
                    }
                ).encode()
            answer = {
                "access_token": f"ya29.fake-{len(self.claims)}",
                "expires_in": 3599,
                "token_type": "Bearer",
            }
            return httplib2.Response(
                {"status": "200", "content-type": "application/json"}
            ), json.dumps(answer).encode()
        self.authorizations.append((headers or {}).get("authorization", ""))
        return self.api.request(uri, method, body=body, headers=headers, **kwargs)


def _gmail_backfill() -> Any:
    return sequence(
        ok({"emailAddress": SHARED, "messagesTotal": 3, "historyId": "5000"}),
        ok(
            {
                "messages": [
                    {"id": "m2", "threadId": "t1"},
                    {"id": "m1", "threadId": "t1"},
                    {"id": "m3", "threadId": "t2"},
                ],
                "resultSizeEstimate": 3,
            }
        ),
        ok(thread("t1", ann_question(), my_answer())),
        ok(thread("t2", newsletter())),
    )


def _workspace_mailbox(**kwargs: Any) -> SharedMailbox:
    return shared_mailbox_create(
        address=SHARED, provider=SharedMailbox.Provider.WORKSPACE, **kwargs
    )


def test_the_uploaded_key_is_stored_encrypted_and_read_back(
    key_pair: tuple[dict[str, Any], bytes],
) -> None:
    info, _public = key_pair
    row = workspace_key_upload(key_json=json.dumps(info))
    stored = WorkspaceServiceAccount.objects.get(pk=row.pk)
    assert stored.client_email == info["client_email"]
    assert stored.client_id == info["client_id"]
    assert "PRIVATE KEY" not in stored.key_encrypted
    assert info["private_key"][40:80] not in stored.key_encrypted
    assert service_account_info() == info


def test_a_file_that_is_not_a_service_account_key_is_refused() -> None:
    from brain.exceptions import InvalidParams

    with pytest.raises(InvalidParams) as caught:
        workspace_key_upload(key_json='{"type": "authorized_user", "secret": "s3"}')
    assert "s3" not in str(caught.value)
    assert not WorkspaceServiceAccount.objects.exists()


def test_without_a_key_delegation_says_how_to_configure_it() -> None:
    with pytest.raises(DelegationNotConfigured) as caught:
        delegated_http(SHARED)
    assert "BRAIN_GOOGLE_SERVICE_ACCOUNT_FILE" in caught.value.detail["fix"]


def test_the_key_file_from_the_environment_takes_precedence(
    key_pair: tuple[dict[str, Any], bytes], tmp_path: Any, settings: Any
) -> None:
    info, _public = key_pair
    path = tmp_path / "key.json"
    path.write_text(json.dumps({**info, "client_id": "from-file"}))
    workspace_key_upload(key_json=json.dumps(info))
    settings.BRAIN_GOOGLE_SERVICE_ACCOUNT_FILE = str(path)
    assert service_account_info()["client_id"] == "from-file"


def test_shared_mailbox_syncs_gmail_as_the_shared_address_with_readonly_scopes(
    key_pair: tuple[dict[str, Any], bytes],
) -> None:
    info, public = key_pair
    workspace_key_upload(key_json=json.dumps(info))
    mailbox = _workspace_mailbox()
    assert mailbox.source.kind == Source.Kind.GOOGLE
    fake = TokenEndpointFake(_gmail_backfill(), public)

    report = google_sync(
        source=mailbox.source,
        http=delegated_http(SHARED, http=fake),
        services=("gmail",),
        sleep=lambda _s: None,
    )

    assert report.status == "succeeded"
    assert len(fake.claims) == 1  # one token exchange, reused for every call
    claims = fake.claims[0]
    assert claims["sub"] == SHARED
    assert claims["iss"] == info["client_email"]
    assert claims["scope"].split() == list(READONLY_SCOPES)
    assert DELEGATION_SCOPES.split(",") == list(READONLY_SCOPES)
    assert fake.authorizations and set(fake.authorizations) == {"Bearer ya29.fake-1"}
    page = Page.objects.get(source=mailbox.source, type__name="email")
    assert page.frontmatter["thread_id"] == "t1"
    cursor = Source.objects.get(pk=mailbox.source.pk).cursor["google"]["gmail"]
    assert cursor["history_id"] == "5000"


def test_a_refused_delegation_is_a_permanent_auth_failure_with_the_fix(
    key_pair: tuple[dict[str, Any], bytes],
) -> None:
    info, public = key_pair
    mailbox = _workspace_mailbox()
    fake = TokenEndpointFake(sequence(), public, refuse=True)
    with pytest.raises(PermanentError) as caught:
        google_sync(
            source=mailbox.source,
            http=delegated_http(SHARED, info=info, http=fake),
            services=("gmail",),
            sleep=lambda _s: None,
        )
    assert caught.value.code == "auth_failed"
    assert "Workspace console" in caught.value.detail["fix"]
    assert info["private_key"][40:80] not in str(caught.value)
    assert fake.authorizations == []  # no API call went out without a token


def test_members_addresses_count_as_the_mailbox_owner() -> None:
    dana = User.objects.create_user("dana", "dana@acme.example", "pw", is_staff=True)
    mailbox = _workspace_mailbox(members=[dana])
    owners = Source.objects.get(pk=mailbox.source_id).owner_addresses
    assert sorted(owners) == ["dana@acme.example", SHARED]


def test_delegation_module_asks_for_no_other_scope(
    key_pair: tuple[dict[str, Any], bytes],
) -> None:
    info, _public = key_pair
    creds = delegation.delegated_credentials(SHARED, info=info)
    assert creds._subject == SHARED  # noqa: SLF001 - google-auth keeps it private
    assert tuple(creds.scopes) == READONLY_SCOPES


def test_a_scheduled_sync_of_a_workspace_mailbox_uses_delegation_on_its_own(
    key_pair: tuple[dict[str, Any], bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``http`` given (a job or ``sync_source``): the account has no sign-in, so
    the connector builds the delegated transport itself."""
    info, public = key_pair
    workspace_key_upload(key_json=json.dumps(info))
    mailbox = _workspace_mailbox()
    fake = TokenEndpointFake(_gmail_backfill(), public)
    monkeypatch.setattr(delegation.httplib2, "Http", lambda timeout: fake)

    report = google_sync(source=mailbox.source, services=("gmail",))

    assert report.status == "succeeded"
    assert [c["sub"] for c in fake.claims] == [SHARED]
    assert Page.objects.filter(source=mailbox.source, type__name="email").count() == 1
