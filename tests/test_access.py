"""SPEC §8: the one scoping function and API-key authentication."""

from __future__ import annotations

import pytest

from accounts.models import ApiKey
from accounts.services import apikey_authenticate, apikey_revoke, hash_key
from brain.access import local_caller
from brain.exceptions import NotFound, ScopeDenied
from interfaces.callers import caller_for_key
from tests.factories import SourceFactory

pytestmark = pytest.mark.django_db


def test_keys_are_stored_hashed_and_authenticate(make_key, source_a) -> None:  # type: ignore[no-untyped-def]
    issued = make_key(source_a)
    stored = ApiKey.objects.get(pk=issued.api_key.pk)
    assert stored.key_hash == hash_key(issued.plaintext)
    assert issued.plaintext not in stored.key_hash
    assert apikey_authenticate(plaintext=issued.plaintext).pk == stored.pk
    assert apikey_authenticate(plaintext=issued.plaintext + "x") is None


def test_revoked_keys_no_longer_authenticate(make_key, source_a) -> None:  # type: ignore[no-untyped-def]
    issued = make_key(source_a)
    assert apikey_revoke(api_key=issued.api_key, actor="t") is True
    assert apikey_revoke(api_key=issued.api_key, actor="t") is False
    assert apikey_authenticate(plaintext=issued.plaintext) is None


def test_unqualified_reads_cover_federated_readable_sources_only(
    make_key, source_a, source_b
) -> None:  # type: ignore[no-untyped-def]
    SourceFactory(id="archive", federated=False)
    caller = caller_for_key(make_key(source_a).api_key)
    assert caller.read_scope().source_ids == ("team-a",)
    assert local_caller().read_scope().source_ids == ("default", "team-a", "team-b")
    assert "archive" in local_caller().read_scope(["archive"]).source_ids


def test_explicit_source_outside_the_grant_is_denied(
    make_key, source_a, source_b
) -> None:  # type: ignore[no-untyped-def]
    caller = caller_for_key(make_key(source_a).api_key)
    with pytest.raises(ScopeDenied, match="not readable"):
        caller.read_scope(["team-b"])
    with pytest.raises(ScopeDenied, match="not readable"):
        caller.read_scope(["no-such-source"])


def test_remote_keys_never_include_private(make_key, source_a) -> None:  # type: ignore[no-untyped-def]
    remote = caller_for_key(make_key(source_a).api_key)
    trusted = caller_for_key(make_key(source_a, trusted=True).api_key)
    assert remote.remote and not remote.read_scope(include_private=True).include_private
    assert trusted.read_scope().include_private
    assert not trusted.read_scope(include_private=False).include_private


def test_writes_go_only_to_the_key_write_source(make_key, source_a, source_b) -> None:  # type: ignore[no-untyped-def]
    caller = caller_for_key(make_key(source_a).api_key)
    assert caller.write_source().id == "team-a"
    with pytest.raises(ScopeDenied, match="writes only to source 'team-a'"):
        caller.write_source("team-b")
    reader = caller_for_key(make_key(source_a, scopes=("read",)).api_key)
    with pytest.raises(ScopeDenied, match="lacks the 'write' scope"):
        reader.write_source()


def test_forgetting_a_readable_fact_of_another_source_says_where_it_lives(
    make_key, source_a, source_b
) -> None:  # type: ignore[no-untyped-def]
    """Regression (newcomer): forget on a fact the key may read but not write
    answered "Omit 'source' or use 'team-a'" although no source was sent; it now
    names the fact's source and how to get a key for it, as loops_close does."""
    from brain.services.facts import fact_forget, fact_remember

    fact = fact_remember(
        caller=local_caller(), text="Ona likes figs", provenance="test", source=source_b
    ).fact
    caller = caller_for_key(make_key(source_a, readable=(source_b,)).api_key)
    with pytest.raises(ScopeDenied) as refused:
        fact_forget(caller=caller, fact_id=str(fact.pk), reason="wrong")
    assert str(refused.value) == (
        f"Fact {fact.pk} is in source 'team-b'; this key writes only to source 'team-a'."
    )
    assert "--write-source team-b" in refused.value.suggestion
    assert "Omit 'source'" not in refused.value.suggestion


def test_a_keyless_caller_naming_an_unknown_source_is_told_it_does_not_exist(
    source_a,  # type: ignore[no-untyped-def]
) -> None:
    """The CLI has no key: ``waiting --source nosuch`` says the source does not
    exist and names those that do, instead of "not readable with this key"."""
    from io import StringIO

    from django.core.management import CommandError, call_command

    with pytest.raises(NotFound, match=r"do not exist"):
        local_caller().read_scope(["nosuch"])
    with pytest.raises(CommandError) as raised:
        call_command("waiting", "--source", "nosuch", stdout=StringIO())
    message = str(raised.value)
    assert "['nosuch'] do not exist" in message and "team-a" in message
    assert "with this key" not in message
