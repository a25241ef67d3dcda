"""Facts (SPEC §2.4): dedup, supersession, ttl, forget, expiry and no ghosts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from brain.access import Caller, local_caller
from brain.exceptions import InvalidParams, NotFound, ProvenanceRequired, ScopeDenied
from brain.models import AuditEvent, Fact
from brain.selectors_facts import fact_decay_score
from brain.services.facts import fact_expire, fact_forget, fact_remember, parse_ttl
from brain.services.verbs import verb_context_pack, verb_entity, verb_recall
from tests.brain.conftest import add_page

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(default_source):  # type: ignore[no-untyped-def]
    return add_page(default_source, title="Alice Example", slug="people/alice-example")


def remember(text: str, **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("provenance", "chat with Alice, 2026-11-01")
    return fact_remember(caller=kw.pop("caller", local_caller()), text=text, **kw)


def test_an_identical_fact_is_a_duplicate_and_writes_nothing(alice) -> None:  # type: ignore[no-untyped-def]
    first = remember(
        "Alice prefers green tea.", entity="Alice Example", kind="preference"
    )
    again = remember(
        "alice prefers green tea", entity="people/alice-example", kind="preference"
    )
    assert first.status == "inserted" and again.status == "duplicate"
    assert again.fact.pk == first.fact.pk
    assert Fact.objects.count() == 1


def test_same_kind_near_identical_text_supersedes_at_cosine_095(alice) -> None:  # type: ignore[no-untyped-def]
    old = remember("Alice prefers tea over coffee", entity=alice, kind="preference")
    new = remember("Alice prefers coffee over tea", entity=alice, kind="preference")
    assert new.status == "superseded" and new.superseded.pk == old.fact.pk
    old.fact.refresh_from_db()
    assert old.fact.superseded_by_id == new.fact.pk and old.fact.expired_at is not None


def test_works_at_acme_then_left_acme_now_at_beta_is_superseded(alice) -> None:  # type: ignore[no-untyped-def]
    old = remember("Alice works at Acme as head of sales", entity="Alice Example")
    new = remember("left Acme, now at Beta", entity="Alice Example")
    assert new.status == "superseded"
    assert new.superseded.pk == old.fact.pk
    assert AuditEvent.objects.filter(
        action="fact_superseded", target_id=str(old.fact.pk)
    ).exists()


def test_unrelated_facts_of_one_entity_are_both_kept(alice) -> None:  # type: ignore[no-untyped-def]
    remember("Alice works at Acme", entity=alice)
    other = remember("Alice plays the cello on weekends", entity=alice)
    mention = remember("Alice's sister works at Acme too", entity=alice)
    assert other.status == "inserted" and mention.status == "inserted"
    assert Fact.objects.filter(expired_at__isnull=True).count() == 3


def test_no_ghosts_superseded_fact_never_appears_in_recall_entity_or_pack(
    alice,
) -> None:  # type: ignore[no-untyped-def]
    remember("Alice works at Acme", entity=alice, kind="commitment")
    remember("left Acme, now at Beta", entity=alice, kind="commitment")
    caller = local_caller()
    recall = verb_recall(caller=caller, entity="Alice Example")
    assert [f["fact"] for f in recall["facts"]] == ["left Acme, now at Beta"]
    by_query = verb_recall(caller=caller, query="Acme")
    assert "Alice works at Acme" not in str(by_query)
    card = verb_entity(caller=caller, name="Alice Example")["card"]
    assert card["active_fact_count"] == 1
    assert [t["text"] for t in card["open_threads"]] == ["left Acme, now at Beta"]
    pack = verb_context_pack(caller=caller, entities="Alice Example")
    assert "Alice works at Acme" not in pack["text"] and "now at Beta" in pack["text"]


def test_without_embeddings_and_slot_remember_inserts_with_degraded_dedup(
    alice, settings
) -> None:  # type: ignore[no-untyped-def]
    """SPEC §2.4: no embedding and no slot → plain insert, ``degraded_dedup``."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    first = remember("Alice stopped by the café on Friday", entity=alice)
    second = remember("Alice stopped by the café on Friday", entity=alice)
    assert first.degraded_dedup and second.degraded_dedup
    assert second.status == "inserted" and Fact.objects.count() == 2


def test_without_embeddings_a_slot_still_dedups_and_supersedes(alice, settings) -> None:  # type: ignore[no-untyped-def]
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    first = remember("Alice prefers green tea", entity=alice)
    again = remember("Alice prefers green tea", entity=alice)
    assert not first.degraded_dedup and again.status == "duplicate"
    moved = remember("Alice lives in Lisbon", entity=alice)
    assert remember("Alice lives in Porto", entity=alice).status == "superseded"
    assert Fact.objects.get(pk=moved.fact.pk).expired_at is not None


def test_remember_warns_when_the_entity_names_no_page(alice, settings) -> None:  # type: ignore[no-untyped-def]
    """Regression (newcomer): ``entity: "Nobody Atall Zzz"`` stored the fact under a
    made-up slug without a word; the answer now says no page answered the name.
    A name that resolves carries no warning."""
    from brain.services.verbs import verb_remember

    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    stray = verb_remember(
        caller=local_caller(),
        fact="Prefers window seats",
        provenance="test",
        entity="Nobody Atall Zzz",
    )
    assert stray["entity_slug"] == "nobody-atall-zzz"
    assert len(stray["warnings"]) == 1
    assert "No page answers 'Nobody Atall Zzz'" in stray["warnings"][0]
    found = verb_remember(
        caller=local_caller(),
        fact="Alice prefers aisle seats",
        provenance="test",
        entity=alice.title,
    )
    assert found["entity_slug"] == alice.slug and found["warnings"] == []


def test_ttl_accepts_days_hours_minutes_and_iso_timestamps() -> None:
    now = timezone.now()
    assert parse_ttl("30d", now=now) == now + timedelta(days=30)
    assert parse_ttl("12h", now=now) == now + timedelta(hours=12)
    assert parse_ttl("45m", now=now) == now + timedelta(minutes=45)
    assert parse_ttl("2999-01-31T18:00:00Z", now=now).year == 2999
    assert parse_ttl(None, now=now) is None


@pytest.mark.parametrize(
    ("ttl", "hint"), [("P30D", "30d"), ("PT12H", "12h"), ("P2W", "14d")]
)
def test_ttl_iso_duration_is_refused_with_the_short_form(ttl: str, hint: str) -> None:
    with pytest.raises(InvalidParams, match="ISO 8601 duration") as info:
        parse_ttl(ttl)
    assert f"'{hint}'" in info.value.suggestion


@pytest.mark.parametrize("ttl", ["tomorrow", "0d", "2001-01-01T00:00:00Z"])
def test_ttl_garbage_zero_and_past_are_refused(ttl: str) -> None:
    with pytest.raises(InvalidParams):
        parse_ttl(ttl)


def test_provenance_missing_blank_and_too_long(alice) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidParams, match="needs 'provenance'"):
        fact_remember(caller=local_caller(), text="x", provenance=None)
    with pytest.raises(ProvenanceRequired):
        fact_remember(caller=local_caller(), text="x", provenance="  ")
    with pytest.raises(InvalidParams, match="longer than 500"):
        fact_remember(caller=local_caller(), text="x", provenance="p" * 501)
    assert Fact.objects.count() == 0


def test_unresolved_entity_is_kept_as_a_reference_and_recalled(default_source) -> None:  # type: ignore[no-untyped-def]
    written = remember("Zed likes chess", entity="Zed Unknown")
    assert written.fact.entity is None and written.entity_slug == "zed-unknown"
    recall = verb_recall(caller=local_caller(), entity="Zed Unknown")
    assert [f["fact"] for f in recall["facts"]] == ["Zed likes chess"]


def test_forget_expires_with_reason_and_audit_and_is_idempotent(alice) -> None:  # type: ignore[no-untyped-def]
    made = remember("Alice is vegetarian", entity=alice)
    fact, expired = fact_forget(
        caller=local_caller(), fact_id=str(made.fact.pk), reason="wrong person"
    )
    assert expired and fact.expired_reason == "forgotten: wrong person"
    again, expired_again = fact_forget(caller=local_caller(), fact_id=made.fact.pk)
    assert not expired_again and again.expired_reason == "forgotten: wrong person"
    assert AuditEvent.objects.filter(action="fact_forgotten").count() == 1
    assert Fact.objects.filter(pk=made.fact.pk).exists()  # never deleted
    assert verb_recall(caller=local_caller(), entity="Alice Example")["facts"] == []


def test_forget_unknown_id_is_not_found() -> None:
    with pytest.raises(NotFound, match="No fact with id"):
        fact_forget(caller=local_caller(), fact_id="999999999")


def test_forget_needs_write_access_to_the_fact_source(
    alice, make_key, source_a
) -> None:  # type: ignore[no-untyped-def]
    from interfaces.callers import caller_for_key

    made = remember("Alice is vegetarian", entity=alice)
    reader = caller_for_key(
        make_key(
            source_a, scopes=("read",), trusted=True, readable=(alice.source,)
        ).api_key
    )
    with pytest.raises(ScopeDenied):
        fact_forget(caller=reader, fact_id=made.fact.pk)


def test_fact_expire_marks_lapsed_facts_once(alice) -> None:  # type: ignore[no-untyped-def]
    made = remember(
        "Alice is in Lisbon this week", entity=alice, kind="event", ttl="1h"
    )
    Fact.objects.filter(pk=made.fact.pk).update(
        valid_until=timezone.now() - timedelta(minutes=1)
    )
    assert fact_expire() == 1
    assert fact_expire() == 0
    made.fact.refresh_from_db()
    assert made.fact.expired_at == made.fact.valid_until


def test_decay_half_lives_per_kind(alice) -> None:  # type: ignore[no-untyped-def]
    now = timezone.now()
    event = Fact(kind="event", confidence=1.0, valid_from=now - timedelta(days=7))
    belief = Fact(kind="belief", confidence=1.0, valid_from=now - timedelta(days=365))
    lapsed = Fact(
        kind="fact",
        confidence=1.0,
        valid_from=now,
        valid_until=now - timedelta(seconds=1),
    )
    assert fact_decay_score(event, now=now) == pytest.approx(0.3679, abs=1e-3)
    assert fact_decay_score(belief, now=now) == pytest.approx(0.3679, abs=1e-3)
    assert fact_decay_score(lapsed, now=now) == 0.0


def test_a_world_fact_about_a_private_page_does_not_name_it_to_a_remote_key(
    default_source,
) -> None:  # type: ignore[no-untyped-def]
    """SPEC §8: a remote (untrusted) key reads world rows only. A world fact whose
    entity is a private person page comes back without ``entity_slug``, so the key
    learns neither that the private page exists nor its slug; a trusted caller
    still gets the slug."""
    add_page(
        default_source,
        title="Heather Quill",
        slug="people/heather-quill",
        visibility="private",
    )
    remember("Heather Quill prefers the weekly report", entity="people/heather-quill")
    remote = Caller(
        actor="key:remote",
        trusted=False,
        scopes=frozenset({"read"}),
        readable_source_ids=frozenset({"default"}),
    )

    seen = verb_recall(caller=remote, query="weekly report")["facts"]
    trusted = verb_recall(caller=local_caller(), query="weekly report")["facts"]

    assert [f["fact"] for f in seen] == ["Heather Quill prefers the weekly report"]
    assert seen[0]["entity_slug"] is None
    assert trusted[0]["entity_slug"] == "people/heather-quill"


def test_recall_of_a_query_as_long_as_a_pasted_page_answers(alice) -> None:  # type: ignore[no-untyped-def]
    """A 20,000-word query made the facts arm's tsquery exceed PostgreSQL's stack
    ("stack depth limit exceeded", a 500 on every transport); the keyword reads
    take the query's first ``MAX_TSQUERY_WORDS`` words, as search keeps its first
    terms."""
    remember("Alice reviews the curve every Monday", entity=alice)
    out = verb_recall(caller=local_caller(), query="curve " * 20000)
    assert [f["fact"] for f in out["facts"]] == ["Alice reviews the curve every Monday"]
