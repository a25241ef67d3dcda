"""People resolve to one page (issue 25; SPEC §6.2, §4 ``entity``, §9 push): each
kind of fault seen in real mailboxes, reproduced with invented people and small
messages driven through ``manage.py import_mail``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone

from brain.access import ReadScope, local_caller
from brain.models import Alias, MergeProposal, Page, Source
from brain.services.dream import Budget, phase_duplicates
from brain.services.entities import entity_resolve
from brain.services.push import push_context
from brain.services.verbs import verb_entity

pytestmark = pytest.mark.django_db

OWNER = "sam@corp.example"
SOURCE = "people"
START = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)


class Box:
    """A folder of .eml files written in order, imported with ``import_mail``."""

    def __init__(self, root: Path) -> None:
        self.root = root / "box"
        self.root.mkdir()
        self.count = 0

    def mail(self, *, headers: dict[str, str], subject: str, body: str = "") -> None:
        """One message; ``headers`` holds From/To/Cc/X-… lines as written. Each
        body differs, so no two messages are taken for copies of one."""
        self.count += 1
        body = body or f"Note {self.count} for {headers.get('To', '')}."
        when = START + timedelta(hours=self.count)
        lines = [f"{k}: {v}" for k, v in headers.items()]
        lines += [
            f"Subject: {subject}",
            f"Date: {when:%a, %d %b %Y %H:%M:%S +0000}",
            f"Message-ID: <m{self.count}@corp.example>",
            "Content-Type: text/plain; charset=us-ascii",
            "",
            body,
            "",
        ]
        (self.root / f"{self.count:03d}.eml").write_text("\n".join(lines))

    def mine(self, to: str, subject: str, **extra: str) -> None:
        """A message from the owner."""
        self.mail(
            headers={"From": f'"Sam Owner" <{OWNER}>', "To": to, **extra},
            subject=subject,
        )

    def reply(self, sender: str, subject: str, **extra: str) -> None:
        """A reply to the owner."""
        self.mail(
            headers={"From": sender, "To": OWNER, **extra}, subject=f"Re: {subject}"
        )

    def run(self) -> str:
        out = StringIO()
        call_command(
            "import_mail",
            str(self.root),
            "--source",
            SOURCE,
            "--owner",
            OWNER,
            stdout=out,
        )
        return out.getvalue()


@pytest.fixture
def box(tmp_path: Path) -> Box:
    return Box(tmp_path)


def page_of(address: str) -> Page:
    """The live person page holding ``address`` as an alias."""
    return Alias.objects.get(
        source_id=SOURCE, alias=address, page__deleted_at__isnull=True
    ).page


def aliases(page: Page) -> set[str]:
    return set(Alias.objects.filter(page=page).values_list("alias", flat=True))


def resolve(text: str) -> Page | None:
    scope = ReadScope(source_ids=(SOURCE,), include_private=True)
    return entity_resolve(scope=scope, name=text).page


def people_proposals() -> list[MergeProposal]:
    phase_duplicates(Budget(usd=0.0, max_items=1000), timezone.now())
    return list(
        MergeProposal.objects.filter(
            source_id=SOURCE, reason=MergeProposal.Reason.PEOPLE_EVIDENCE
        ).select_related("keep_page", "merge_page")
    )


def test_names_in_to_and_cc_headers_become_aliases(box: Box) -> None:
    """Recipient names are read from To/Cc and from the export's X-To/X-cc."""
    box.mine(
        '"Avery Lind" <avery.lind@example.org>', "Plans", Cc="bo.reyes@example.org"
    )
    box.mine(
        "wen.okafor@example.org",
        "Budget",
        **{"X-To": "Okafor, Wen </O=CORP/OU=NA/CN=RECIPIENTS/CN=WOKAFOR>"},
    )
    box.mail(
        headers={
            "From": OWNER,
            "To": "bo.reyes@example.org",
            "X-From": "Sam Owner",
            "X-To": "Bo Reyes",
        },
        subject="Numbers",
    )
    box.run()
    avery = page_of("avery.lind@example.org")
    assert "avery lind" in aliases(avery) and avery.title == "Avery Lind"
    assert "bo reyes" in aliases(page_of("bo.reyes@example.org"))
    wen = page_of("wen.okafor@example.org")
    assert wen.title == "Wen Okafor" and "wen okafor" in aliases(wen)


def test_sender_name_through_a_notes_gateway_is_kept(box: Box) -> None:
    box.mine("rpike@example.net", "Lease")
    box.reply(
        "rpike@example.net",
        "Lease",
        **{
            "X-From": '"Rowan Pike" <rpike@example.net>@ENRON <IMCEANOTES-+22Rowan+20Pike'
            "+22+20+3Crpike+40example+2Enet+3E+40ENRON@ENRON.com>"
        },
    )
    box.run()
    page = page_of("rpike@example.net")
    assert "rowan pike" in aliases(page)
    assert page.title == "Rowan Pike"


def test_last_first_exchange_and_notes_forms_resolve_everywhere(box: Box) -> None:
    """``Harlow, Quinn`` (plain or X.500) and ``Ines Varga/HOU/CORP@CORP`` find the
    person in entity() and in push context."""
    box.mine(
        "quinn.harlow@corp.example, ines.varga@corp.example",
        "Q3 review",
        **{
            "X-To": "Harlow, Quinn </O=CORP/OU=NA/CN=RECIPIENTS/CN=QHARLOW>, "
            "Ines Varga/HOU/CORP@CORP"
        },
    )
    box.run()
    quinn = page_of("quinn.harlow@corp.example")
    ines = page_of("ines.varga@corp.example")
    forms = {
        "Harlow, Quinn": quinn,
        "Harlow, Quinn </O=CORP/OU=NA/CN=RECIPIENTS/CN=QHARLOW>": quinn,
        '"Harlow, Quinn" <quinn.harlow@corp.example>@CORP': quinn,
        "Quinn Harlow": quinn,
        "Ines Varga/HOU/CORP@CORP": ines,
        "Varga, Ines": ines,
    }
    caller = local_caller(actor="test")
    for text, page in forms.items():
        assert resolve(text) == page, text
        answer = verb_entity(caller=caller, name=text, source=SOURCE)
        assert answer["found"] and answer["card"]["entity"]["slug"] == page.slug, text
    for text, page in (
        ("Can you chase Harlow, Quinn about the deck?", quinn),
        (
            "Send it to Harlow, Quinn </O=CORP/OU=NA/CN=RECIPIENTS/CN=QHARLOW> today",
            quinn,
        ),
        ("Loop in Ines Varga/HOU/CORP@CORP on the numbers", ines),
    ):
        pushed = push_context(caller=caller, turns=["Morning.", text], source=SOURCE)
        assert [p["slug"] for p in pushed["pages"]] == [page.slug], text


def test_middle_initial_address_is_one_page(box: Box) -> None:
    box.mine('"Tova Brandt" <tova.brandt@corp.example>', "Offsite")
    box.reply('"Tova Brandt" <t.j.brandt@corp.example>', "Offsite")
    box.run()
    page = page_of("tova.brandt@corp.example")
    assert page_of("t.j.brandt@corp.example") == page
    assert Page.objects.filter(source_id=SOURCE, type__name="person").count() == 1


def test_typo_address_seen_once_in_a_bounce_gets_a_proposal(box: Box) -> None:
    box.mine('"Kestrel Lind" <kestrel.lind@example.org>', "Invoice")
    box.mine("kestrel.lnid@example.org", "Invoice again")
    box.mail(
        headers={"From": "MAILER-DAEMON@example.org", "To": OWNER},
        subject="Undeliverable: Invoice again",
        body="Delivery to kestrel.lnid@example.org failed.",
    )
    box.run()
    right, typo = (
        page_of("kestrel.lind@example.org"),
        page_of("kestrel.lnid@example.org"),
    )
    assert right != typo
    (proposal,) = people_proposals()
    assert {proposal.keep_page, proposal.merge_page} == {right, typo}
    assert any("typo" in e for e in proposal.evidence["evidence"])
    assert proposal.status == MergeProposal.Status.PENDING  # auto-merge is off


def test_address_built_from_a_name_at_the_same_organisation_gets_a_proposal(
    box: Box,
) -> None:
    """``kholst@`` beside Keith Holst's ``keith.holst@`` (no name of its own)."""
    box.mine('"Keith Holst" <keith.holst@corp.example>', "Desk move")
    box.mine("kholst@corp.example", "Parking")
    box.mine("kholst@other.example", "Parking too")
    box.run()
    (proposal,) = people_proposals()
    assert {proposal.keep_page, proposal.merge_page} == {
        page_of("keith.holst@corp.example"),
        page_of("kholst@corp.example"),
    }
    assert (
        "kholst@corp.example is built from the name Keith Holst"
        in (proposal.evidence["evidence"])
    )


def test_address_named_by_an_exchange_mailbox_gets_a_proposal(box: Box) -> None:
    """``pkaufma@`` is the mailbox the X.500 entry of Paul Kaufman names."""
    box.mine(
        "paul.kaufman@corp.example",
        "Rates",
        **{"X-To": "Kaufman, Paul </O=CORP/OU=NA/CN=RECIPIENTS/CN=PKAUFMA>"},
    )
    box.mine("pkaufma@corp.example", "Rates again")
    box.run()
    paul = page_of("paul.kaufman@corp.example")
    assert paul.frontmatter["mailboxes"] == ["pkaufma"]
    (proposal,) = people_proposals()
    assert {proposal.keep_page, proposal.merge_page} == {
        paul,
        page_of("pkaufma@corp.example"),
    }
    assert any("Exchange mailbox" in e for e in proposal.evidence["evidence"])


def test_auto_merge_happens_only_above_the_admin_setting(box: Box) -> None:
    box.mine('"Kestrel Lind" <kestrel.lind@example.org>', "Invoice")
    box.mine("kestrel.lnid@example.org", "Invoice again")
    box.run()
    source = Source.objects.get(id=SOURCE)
    source.config = {**source.config, "people_auto_merge_score": 0.99}
    source.save(update_fields=["config"])
    (proposal,) = people_proposals()
    assert proposal.status == MergeProposal.Status.PENDING  # 0.8 < 0.99
    MergeProposal.objects.all().delete()
    source.config = {**source.config, "people_auto_merge_score": 0.7}
    source.save(update_fields=["config"])
    (proposal,) = people_proposals()
    assert proposal.status == MergeProposal.Status.MERGED
    assert page_of("kestrel.lnid@example.org") == page_of("kestrel.lind@example.org")


def test_role_address_is_a_role_page_never_a_human(box: Box) -> None:
    """``events@`` (a role local part) and an address two different humans sign
    for are role pages that take neither human's name."""
    for role in ("events@club.example", "crew.mail@club.example"):
        box.mine(role, f"Booking {role}")
        box.reply(f'"Dana Voss" <{role}>', f"Booking {role}")
        box.reply(f'"Lee Marsh" <{role}>', f"Booking {role}")
    box.run()
    for role in ("events@club.example", "crew.mail@club.example"):
        page = page_of(role)
        assert page.frontmatter.get("role") is True
        assert page.title == role
        assert not {"dana voss", "lee marsh"} & aliases(page)
    assert resolve("Dana Voss") is None


def test_owner_personal_address_is_an_owner_address_not_a_person(box: Box) -> None:
    box.mine('"Sam Owner" <sam.owner@home.example>', "Note to self")
    box.mine('"Ada Quill" <ada.quill@example.org>', "Hello")
    box.run()
    assert not Alias.objects.filter(source_id=SOURCE, alias="sam.owner@home.example")
    assert page_of("ada.quill@example.org").title == "Ada Quill"


def test_numbered_lookalikes_and_similar_names_are_not_proposed(box: Box) -> None:
    box.mine("jkent4@corp.example", "Shift")
    box.mine("jkent5@corp.example", "Shift")
    box.mine('"Nora Port" <nport@corp.example>', "Desk")
    box.mine('"Nora V. Porter" <nora.porter@corp.example>', "Desk")
    box.run()
    assert Page.objects.filter(source_id=SOURCE, type__name="person").count() == 4
    assert people_proposals() == []
    assert not MergeProposal.objects.filter(source_id=SOURCE).exists()


def test_address_titled_page_takes_the_name_when_one_arrives(box: Box) -> None:
    """A page made before any name was known is retitled by a later import."""
    box.mine("mo.quist@example.org", "First")
    box.run()
    assert page_of("mo.quist@example.org").title == "mo.quist@example.org"
    box.reply('"Mo Quist" <mo.quist@example.org>', "First")
    box.run()
    page = page_of("mo.quist@example.org")
    assert page.title == "Mo Quist" and "mo quist" in aliases(page)
