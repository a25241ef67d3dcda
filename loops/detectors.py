"""The deterministic thread detector (SPEC §5.2): a pure function from a thread's
messages, the owner's addresses, the mutes and the reference time to a verdict.

No database, no LLM: ``loops.services.loop_apply_verdict`` applies a verdict, and
``waiting --as-of`` replays the same function for any day.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

from loops.asks import (
    QUESTION,
    Ask,
    ask_deadline,
    asks_the_readers,
    declines,
    is_fulfilment,
    live_asks,
    readers_asks,
    settles_by_silence,
    vocative,
    withdraws,
)
from loops.definitions import (
    REPLY_PREFIX_RE,
    asks_question,
    before_sign_off,
    collapse,
    display_subject,
    in_bulk_category,
    is_acknowledgement_only,
    is_mine,
    is_substantive,
    quote_of,
    quoted_messages,
    replied_to_author,
    reply_text,
    sender_names,
    topic_subject,
)
from loops.models import CLOSED_BY_FULFILLED, CLOSED_BY_REPLY, LoopType
from loops.senders import (
    CLOCK_SLACK,
    Contact,
    has_opt_out_wording,
    is_list_address,
    is_my_address,
)

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from loops.definitions import MailCoverage
    from loops.message import MailMessage

INBOUND_GRACE = timedelta(hours=24)
OUTBOUND_GRACE = timedelta(hours=72)
# A message to this many recipients (To + Cc) or more is addressed to a crowd: it
# opens no reply owed by me (SPEC §5.1a "not to a list of 30").
CROWD_RECIPIENTS = 9
# A greeting to a group ("All,", "Team,") marks a crowd from this many recipients.
GROUP_GREETING_RECIPIENTS = 4
# My ask to more than this many other people is a broadcast: one loop, no single
# counterparty (the group).
BROADCAST_RECIPIENTS = 3
# Correspondence with the same person this long after an unanswered ask, in
# another thread, supersedes the ask (they were in touch since: it was handled or
# moot).
SUPERSEDE_GAP = timedelta(days=7)
# My question in reply to an announcement someone sent to a crowd (comments on a
# report, a newsletter, a policy note) is answered, if at all, soon or in the next
# announcement: unchased, it is moot this long after I asked (SPEC §5.1a). On the
# allen-p dev set my answered asks were answered in a median 0.07 days and at the
# 75th percentile 2.3 days (n=16), so two weeks is six times the usual wait.
REPLY_TO_CROWD_LIFETIME = timedelta(days=14)
# Characters of my ask's own text a re-sent copy must carry to be that ask again.
RESENT_MATCH_CHARS = 120
# Characters of my ask's own text a quoted message must carry below an answer for
# that answer to be a reply to the ask (an ask of under a third of this is too
# short to recognise).
QUOTED_ASK_CHARS = 60
# A delivery-failure notice this soon after my message is about that message.
BOUNCE_WINDOW = timedelta(days=2)
AUTOMATED = "automated"
# closed_by of a reply-owed loop retracted because no reply is expected after all
# (its sender was found or marked automated, or the messages ask nothing of me).
CLOSED_BY_NOT_EXPECTED = "not_expected"
_GROUP_GREETING = re.compile(
    r"^\s*(?:hi|hello|dear|good morning|good afternoon)?\s*(?:all|everyone|everybody|"
    r"team|folks|guys|gentlemen|ladies and gentlemen|colleagues|friends)\b",
    re.I,
)


@dataclass(frozen=True)
class LoopSpec:
    """A loop the detector wants open (times are aware UTC datetimes)."""

    loop_type: str
    thread_id: str
    counterparty_email: str
    counterparty_name: str
    summary: str
    opened_at: datetime
    last_activity_at: datetime
    evidence: list[dict[str, Any]]
    # The day the ask wants its answer by (``loops.asks.ask_deadline``), if any.
    due: date | None = None

    @property
    def dedup_key(self) -> str:
        """``thread:<thread_id>:<loop_type>`` (SPEC §5.2 rule 7)."""
        return f"thread:{self.thread_id}:{self.loop_type}"


@dataclass
class Verdict:
    """What to do with one thread: loops to open, loop types to close (turn flip),
    when to re-check a thread still inside its grace window, and why nothing
    opened. ``closed_by`` overrides the default ``reply_detected`` per closed type
    (``fulfilled`` with ``evidence`` when the counterparty delivered); ``retract``
    names open loop types no longer expected, with the reason (they close as
    dropped, ``not_expected: <reason>``)."""

    open: list[LoopSpec] = field(default_factory=list)
    close: list[str] = field(default_factory=list)
    recheck_at: datetime | None = None
    reason: str = ""
    closed_by: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    retract: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Mutes:
    """The source's mutes, lower-cased (SPEC §5: they gate new detection only)."""

    senders: frozenset[str] = frozenset()
    threads: frozenset[str] = frozenset()

    def sender_muted(self, address: str) -> bool:
        """True when ``address`` is a muted sender."""
        return (address or "").lower() in self.senders

    def thread_muted(self, thread_id: str) -> bool:
        """True when ``thread_id`` is muted."""
        return (thread_id or "").lower() in self.threads


_JUST_AFTER = timedelta(microseconds=1)


def _bare_id(message_id: str | None) -> str:
    return (message_id or "").strip().strip("<>").lower()


def reply_order(messages: Sequence[MailMessage]) -> list[MailMessage]:
    """Dated ``messages`` in the order they were written: by Date, except that a
    reply comes after the message it answers (its In-Reply-To, else the last of its
    References, names a message of ``messages``) even when a skewed clock dated it
    earlier: an answer sent three minutes "before" its question still answers it
    (SPEC §5.2 rule 2). Ties keep Message-ID order; a reply cycle (broken headers)
    falls back to Date order. Returns a new list; the messages are unchanged."""
    by_id = {_bare_id(m.message_id): m for m in messages}
    dated = sorted(messages, key=lambda m: (m.date, m.message_id))
    # A message's effective time: its Date, or later when its parent's is later.
    effective: dict[int, datetime] = {}

    def parent_of(m: MailMessage) -> MailMessage | None:
        ref = m.in_reply_to or (m.references[-1] if m.references else "")
        parent = by_id.get(_bare_id(ref))
        return parent if parent is not m else None

    for m in dated:
        chain: list[MailMessage] = []
        node: MailMessage | None = m
        seen: set[int] = set()
        while node is not None and id(node) not in effective:
            if id(node) in seen:  # a cycle: Date order for what is left
                break
            seen.add(id(node))
            chain.append(node)
            node = parent_of(node)
        floor = effective.get(id(node)) if node is not None else None
        for link in reversed(chain):
            if floor is None or link.sent_at > floor:
                floor = link.sent_at
            else:  # just after the message it answers
                floor += _JUST_AFTER
            effective[id(link)] = floor
    order = {id(m): i for i, m in enumerate(dated)}
    return sorted(dated, key=lambda m: (effective[id(m)], order[id(m)]))


def _participants(messages: Sequence[MailMessage], owners: Collection[str]) -> set[str]:
    """Every From/To/Cc address; the From of a message of mine counts as mine even
    when it is an address the owner list lacks (sent folder, SENT label)."""
    people: set[str] = set()
    for m in messages:
        senders = [] if is_mine(m, owners) else [m.from_addr]
        people.update(a.lower() for a in [*senders, *m.to, *m.cc] if a)
    return people


def _effective_turns(
    messages: Sequence[MailMessage], owners: Collection[str]
) -> list[MailMessage]:
    """Substantive messages minus replies of mine that only acknowledge a question
    ("Thanks!" after "Can you…?" is not an answer; SPEC §5.2 rule 2)."""
    turns: list[MailMessage] = []
    for m in messages:
        if (
            turns
            and is_mine(m, owners)
            and not is_mine(turns[-1], owners)
            and asks_question(turns[-1].body)
            and is_acknowledgement_only(m.body)
        ):
            continue
        turns.append(m)
    return turns


def _recipients(message: MailMessage) -> set[str]:
    return {a.lower() for a in (*message.to, *message.cc) if a}


def addressed_to_crowd(message: MailMessage) -> bool:
    """True when a message goes to a crowd: ``CROWD_RECIPIENTS`` or more people in
    To and Cc, or a group greeting ("All,", "Team,") to several (SPEC §5.1a)."""
    count = len(_recipients(message))
    if count >= CROWD_RECIPIENTS:
        return True
    opening = collapse(reply_text(message.body))[:40]
    return count >= GROUP_GREETING_RECIPIENTS and bool(_GROUP_GREETING.match(opening))


def crowd_ask(
    message: MailMessage, owners: Collection[str], earlier: Sequence[MailMessage]
) -> bool:
    """True when ``message``'s asks are put to a crowd (``addressed_to_crowd``),
    unless it answers me: its To holds only my addresses, a message of mine is in
    ``earlier`` (the thread before it) and it opens with no group greeting. A reply
    to my post that names me alone in To and keeps the others in Cc (a reviewer
    answering my patch with the list in copy) asks me, however many are copied;
    a cold message with a crowd in copy stays a crowd message (SPEC §5.1a)."""
    if not addressed_to_crowd(message):
        return False
    to = {a.lower() for a in message.to if a}
    if not to or not to <= set(owners):
        return True
    if not any(is_mine(m, owners) for m in earlier):
        return True
    return bool(_GROUP_GREETING.match(collapse(reply_text(message.body))[:40]))


def through_list(message: MailMessage) -> bool:
    """True when ``message`` went to a mailing list: a list address among its
    recipients (``is_list_address``), or a list server delivered it
    (``MailMessage.list_unsubscribe``, or, from lists that send none, its other
    list headers: ``mailing_list``). Its readers, not one person, are its
    audience."""
    return (
        message.list_unsubscribe
        or message.mailing_list
        or any(is_list_address(a) for a in _recipients(message))
    )


def ask_text(message: MailMessage) -> str:
    """The words of ``message`` that can ask: its newest part (``reply_text``) up
    to the writer's sign-off (``before_sign_off`` with the From's names), so a
    signature or a webmail advert under it ("Do You Yahoo!?") asks nothing
    (SPEC §5.1a)."""
    return before_sign_off(
        reply_text(message.body), sender_names(message.from_name, message.from_addr)
    )


def asks_of_me(
    message: MailMessage, *, now: datetime, owners: Collection[str] = ()
) -> list[Ask]:
    """The live asks (``loops.asks.live_asks``) of ``message``'s newest text that
    ask me something: on mail that went to a mailing list (``through_list``), an
    ask in a paragraph carrying a smiley or a grin (``Ask.jest``: "keep it till
    it has chicks, and send me two :)") is banter for the list, not an ask of me
    (SPEC §5.1a). When the message has recipients other than me (``owners``), a
    sentence addressed by name to one of them ("Theo, does it work for you
    now?") asks them, and a question to whoever reads ("Anyone else noticing
    this?", ``asks_the_readers``) asks nobody in particular: neither is an ask
    of me."""
    asks = live_asks(ask_text(message), sent_at=message.date, now=now)
    if asks and through_list(message):
        asks = [a for a in asks if not a.jest]
    mine = {o.lower() for o in owners}
    others = {a.lower() for a in (*message.to, *message.cc) if a} - mine
    if asks and mine and others:
        asks = [
            a
            for a in asks
            if not asks_the_readers(a.sentence)
            and not _names_another(a.sentence, mine, others)
        ]
    return asks


def _replies_to_me(
    message: MailMessage, previous: MailMessage, owners: Collection[str]
) -> bool:
    """True when ``message`` quotes, as the message it replies to, a message of
    mine (``loops.senders.is_my_address``) sent after ``previous``: a reply of
    mine stood between the two, though the source does not hold it."""
    author = replied_to_author(message)
    return (
        author is not None
        and author.date is not None
        and previous.date is not None
        and message.date is not None
        and previous.date < author.date <= message.date + CLOCK_SLACK
        and is_my_address(author, owners, ())
    )


def _to_myself(message: MailMessage, owners: Collection[str]) -> bool:
    """True for a message of mine whose every recipient is one of my addresses
    (a note or a forward to myself)."""
    recipients = {a.lower() for a in (*message.to, *message.cc, *message.bcc) if a}
    return is_mine(message, owners) and bool(recipients) and recipients <= set(owners)


def _names_another(sentence: str, owners: set[str], others: set[str]) -> bool:
    """True when ``sentence`` opens by naming (``vocative``) one of ``others`` and
    none of ``owners``: it is addressed to them."""
    name = vocative(sentence)
    if not name or any(name in _name_tokens(o) for o in owners):
        return False
    return any(name in _name_tokens(a) for a in others)


def _name_tokens(address: str) -> set[str]:
    local = (address or "").lower().split("@", 1)[0]
    return {t for t in re.split(r"[._+\-]", local) if len(t) >= 2}


def _run_withdrawn(run: Sequence[MailMessage]) -> bool:
    """True when the newest message of the current turn (``run``: one writer's
    consecutive messages) takes back what the writer's earlier message of that
    turn asked (``loops.asks.withdraws``: "Never mind, found it." after "Where
    are the slides?")."""
    return len(run) > 1 and withdraws(ask_text(run[-1]))


def addressed_elsewhere(message: MailMessage, owners: Collection[str]) -> bool:
    """True when the message opens by naming another of its recipients ("Pam, can
    you help with below?" sent to me and Pam): its asks are not for me."""
    name = vocative(reply_text(message.body))
    if not name:
        return False
    if any(name in _name_tokens(o) for o in owners):
        return False
    others = {a.lower() for a in (*message.to, *message.cc) if a} - set(owners)
    return any(name in _name_tokens(a) for a in others)


def detect_thread(
    messages: Sequence[MailMessage],
    *,
    owner_addresses: Collection[str],
    mutes: Mutes = Mutes(),
    now: datetime,
    sender_kinds: Mapping[str, str] | None = None,
    contacts: Mapping[str, Contact] | None = None,
    answers_visible: bool = True,
    undeliverable: Mapping[str, Sequence[datetime]] | None = None,
    list_asks: bool = False,
    coverage: MailCoverage | None = None,
    timezones: Mapping[str, tzinfo] | None = None,
) -> Verdict:
    """Which deterministic loops of one thread open and close (SPEC §5.2, §5.1a).

    ``messages``: one thread's messages in any order; those dated after ``now``
    are ignored (replay). ``sender_kinds``: address → ``person``/``automated``
    (``loops.senders``; absent counts as a person). ``contacts``: address →
    ``Contact`` over the whole source (later correspondence, or my report of
    contact, supersedes an ask: ``superseded_by_contact``). No
    waiting loop opens when ``answers_visible`` is False (the source holds only
    my sent mail: ``loops.selectors.answers_visible``) or ``coverage`` says the
    source kept next to none of others' mail in the weeks around my last message
    (``MailCoverage.answers_visible``). ``undeliverable`` (address → times
    delivery-failure notices arrived) and ``list_asks``
    (``settings.LOOPS_LIST_ASKS``) are read as ``_outbound_people`` says;
    ``timezones`` (message id → sender's zone, ``SenderTimezones``) dates a due
    day in its writer's zone (``_deadline``; without it, UTC). Stages: substantive
    messages → self-thread → last turn (``_current_run``) → withdrawn → my run
    still waiting on them (``_waiting_on_them``) → my ask (``_outbound``) or
    theirs (``_inbound``). Returns a ``Verdict``; never raises."""
    owners = {a.lower() for a in owner_addresses}
    subs = reply_order(
        [m for m in messages if is_substantive(m) and m.date and m.date <= now]
    )
    if not subs:
        return Verdict(reason="no_substantive_messages")
    if _participants(subs, owners) <= owners:
        return Verdict(reason="self_thread")
    # A message of mine to myself alone (their ask forwarded to my other
    # address) answers nobody: it is no turn of the conversation.
    subs = [m for m in subs if not _to_myself(m, owners)]
    turns = _effective_turns(subs, owners)
    last = turns[-1]
    mine = is_mine(last, owners)
    run = _current_run(turns, owners, mine=mine)
    if _run_withdrawn(run):
        # "Never mind, found it.": the writer took their own question back.
        return _flip_verdict(mine=mine, reason="withdrawn")
    waiting_run: list[MailMessage] | None = None  # my run that waits on them
    answered: set[str] = set()  # recipients of my ask to each who answered
    if mine:
        at = run[-1].sent_at
        if not answers_visible or not (
            coverage is None or coverage.answers_visible(at=at, now=now)
        ):
            return _flip_verdict(mine=True, reason="no_inbound_mail")
        waiting_run = run
    elif answers_visible:
        waiting_run, answered = _waiting_on_them(
            turns, run, subs, owners, list_asks=list_asks
        )
    t = _Thread(
        owners,
        sender_kinds or {},
        contacts or {},
        mutes,
        now,
        last.thread_id,
        display_subject(last.subject or subs[0].subject),
        opener=turns[0],
        undeliverable=undeliverable or {},
        list_asks=list_asks,
        timezones=timezones,
    )
    if waiting_run is None:
        return _inbound(subs, run, last, t)
    before = _replied_to(turns, waiting_run[0])
    return _outbound(waiting_run, t, replied_to=before, answered=answered)


def _current_run(
    turns: Sequence[MailMessage], owners: set[str], *, mine: bool
) -> list[MailMessage]:
    """The last turn: the newest messages by the same side, oldest first. The clock
    starts at its oldest message, so a nudge ("bumping this") does not restart it
    (SPEC §5.2 rule 6). Their message that replies to a message of mine the source
    lacks (its quoted header is mine, after their previous message) starts a new
    turn: what they asked before it, I answered."""
    run: list[MailMessage] = []
    for m in reversed(turns):
        if is_mine(m, owners) != mine:
            break
        run.append(m)
    run.reverse()
    if mine:
        return run
    cut = max(
        (i for i in range(1, len(run)) if _replies_to_me(run[i], run[i - 1], owners)),
        default=0,
    )
    return run[cut:]


def _flip_verdict(*, mine: bool, reason: str) -> Verdict:
    """The turn's writer settles the other side's loop and expects nothing: the
    loop they were owed closes, their own waiting loop is retracted as
    ``not_expected: <reason>``."""
    owed, waiting = (
        (LoopType.UNANSWERED_INBOUND, LoopType.UNANSWERED_OUTBOUND)
        if mine
        else (LoopType.UNANSWERED_OUTBOUND, LoopType.UNANSWERED_INBOUND)
    )
    verdict = Verdict(close=[owed], reason=reason)
    verdict.retract[waiting] = reason
    return verdict


def _waiting_on_them(
    turns: Sequence[MailMessage],
    run: Sequence[MailMessage],
    subs: Sequence[MailMessage],
    owners: set[str],
    *,
    list_asks: bool,
) -> tuple[list[MailMessage] | None, set[str]]:
    """When their turn is last, whether my previous run still waits on them: (my
    run or None, the recipients who answered my ask to each). It waits when my ask
    went to each of them and some have not answered, when their only answer hands
    my ask to someone else, or when my list post's only "replies" belong to other
    conversations."""
    mine_run = _previous_run(turns, run, owners)
    if not mine_run:
        return None, set()
    if _still_to_answer(mine_run, run, owners):
        # My ask to each of them ("Can each of you send me your
        # availability?"): one answer leaves the others owing theirs.
        return mine_run, {(m.from_addr or "").lower() for m in run}
    if _handed_off(run, owners):
        # Their only answer hands my ask to someone else ("Pam, can you help
        # with below?"): it answers nothing, so my ask is still waiting on them.
        return mine_run, set()
    if (
        list_asks
        and through_list(mine_run[-1])
        and all(_off_thread(m, subs, mine_run) for m in run)
    ):
        # My list post's only "replies" belong to other conversations (a
        # subject-alike reply to a message this thread lacks, a new topic
        # started by replying to me): nobody answered it.
        return mine_run, set()
    return None, set()


def _replied_to(turns: Sequence[MailMessage], first: MailMessage) -> MailMessage | None:
    """The message just before ``first`` in the thread's turns (what my run of
    messages replies to), or None when my run opens the thread."""
    index = next((i for i, m in enumerate(turns) if m is first), 0)
    return turns[index - 1] if index > 0 else None


def _expired_reply_to_crowd(
    asking: Sequence[MailMessage],
    replied_to: MailMessage | None,
    counterparty: str,
    now: datetime,
) -> bool:
    """True when my ask answers an announcement the counterparty sent to a crowd
    (``addressed_to_crowd``), I asked once (no chase) and it is
    ``REPLY_TO_CROWD_LIFETIME`` old at ``now``: feedback on a broadcast, moot."""
    return bool(
        replied_to is not None
        and counterparty
        and (replied_to.from_addr or "").lower() == counterparty
        and addressed_to_crowd(replied_to)
        and len(asking) == 1
        and asking[0].date is not None
        and now - asking[0].date >= REPLY_TO_CROWD_LIFETIME
    )


# The quote markers opening a line of quoted text ("> > ", "| ").
_QUOTE_PREFIX = re.compile(r"^[ \t>|]+", re.M)


# An ask put to each of its recipients: every one of them owes an answer.
_TO_EACH = re.compile(
    r"\b(?:each of you|all of you|every one of you|each one of you|both of you)\b",
    re.I,
)


def _still_to_answer(
    mine_run: Sequence[MailMessage], run: Sequence[MailMessage], owners: set[str]
) -> set[str]:
    """The To recipients of my last message of ``mine_run`` who have not yet
    answered in ``run`` (their turn), when that message asks each of them
    (``_TO_EACH``: "Can each of you send me your availability?"); empty
    otherwise, or when every one answered."""
    if not mine_run:
        return set()
    ask = mine_run[-1]
    if not _TO_EACH.search(ask_text(ask)):
        return set()
    addressed = {a.lower() for a in ask.to if a} - owners
    return addressed - {(m.from_addr or "").lower() for m in run}


def _previous_run(
    turns: Sequence[MailMessage], run: Sequence[MailMessage], owners: set[str]
) -> list[MailMessage]:
    """My messages of the turn just before ``run`` (their turn, the thread's last):
    what their turn answers. Empty when the turn before is not mine."""
    mine_run: list[MailMessage] = []
    for m in reversed(turns[: len(turns) - len(run)]):
        if not is_mine(m, owners):
            break
        mine_run.insert(0, m)
    return mine_run


def _off_thread(
    message: MailMessage,
    thread: Sequence[MailMessage],
    mine_run: Sequence[MailMessage],
) -> bool:
    """True when ``message``, though threaded after my post, is not a reply to
    it (LOOPS_LABELLING: a reply that does not answer does not close my ask):

    - its In-Reply-To/References name only messages the thread does not hold
      (it joined by subject alone: "Re: modem problems" answering another
      "Modem problems" conversation; an In-Reply-To naming a participant's
      address, as MH-style clients write it, names their message), or
    - it replies to my post but starts a new topic: no reply prefix, a subject
      of its own (``topic_subject``) and none of my post's text quoted (a
      hijacked thread: "Routine problem; this time it's mine.").

    A message with no threading headers at all (joined by subject, as Enron's
    are) is never off-thread: it may well answer."""
    # An MH/exmh-style In-Reply-To ("Message from Dana <dana@x.org> of Tue, …")
    # names the person, whose message is in the thread.
    known = {m.message_id.strip("<> ").lower() for m in thread if m.message_id} | {
        m.from_addr.lower() for m in thread if m.from_addr
    }
    parents = [
        p.strip("<> ").lower() for p in (message.in_reply_to, *message.references) if p
    ]
    if parents and not known.intersection(parents):
        return True
    if not parents or REPLY_PREFIX_RE.match(message.subject or ""):
        return False
    if topic_subject(message.subject) == topic_subject(mine_run[0].subject):
        return False
    body = collapse(_QUOTE_PREFIX.sub("", message.body)).lower()
    for mine in mine_run:
        needle = collapse(reply_text(mine.body)).lower()[:QUOTED_ASK_CHARS]
        if len(needle) >= QUOTED_ASK_CHARS // 3 and needle in body:
            return False
    return True


def _handed_off(run: Sequence[MailMessage], owners: set[str]) -> bool:
    """True when every message of their turn opens by naming another recipient
    and none delivers: a hand-off to a colleague, not an answer to me."""
    return all(addressed_elsewhere(m, owners) for m in run) and not any(
        is_fulfilment(reply_text(m.body)) for m in run
    )


def _superseded(
    asked_at: datetime | None, later: datetime | None, now: datetime
) -> bool:
    # A contact after ``now`` (a replay of an earlier day) is not known yet.
    return bool(asked_at and later and asked_at + SUPERSEDE_GAP <= later <= now)


def _reported_since(asked_at: datetime | None, contact: Contact, now: datetime) -> bool:
    """True when, after ``asked_at`` and by ``now``, I reported contact with the
    person in any message ("I spoke to Dana, she will send it"): the ask was taken
    up in a conversation the mail does not hold."""
    later = contact.last_reported
    return bool(asked_at and later and asked_at < later <= now)


def superseded_by_contact(
    loop_type: str,
    asked_at: datetime | None,
    contact: Contact,
    now: datetime,
    *,
    own: Collection[datetime | None] = (),
) -> str:
    """Why a reply loop asked at ``asked_at`` waits no longer because of contact
    with its counterparty since (SPEC §5.1a; ``contact`` pools every address of
    the person, ``loops.selectors.sender_contacts``), or '' when it still waits.
    My ask (``unanswered_outbound``): they wrote to me ``SUPERSEDE_GAP`` or more
    later (``superseded``), I reported contact with them (``reported_contact``),
    or I wrote to them again that much later elsewhere without repeating the ask
    (``superseded_by_me``; ``own``: the dates of my messages in the ask's own
    thread, which do not count). Their ask (``unanswered_inbound``): I wrote to
    them that much later (``superseded``) or reported contact with them. Contact
    after ``now`` (a replay) is not known yet."""
    if loop_type == LoopType.UNANSWERED_OUTBOUND:
        if _superseded(asked_at, contact.last_from, now):
            return "superseded"
        if _reported_since(asked_at, contact, now):
            return "reported_contact"
        if _superseded(asked_at, contact.last_to, now) and contact.last_to not in own:
            return "superseded_by_me"
        return ""
    if _superseded(asked_at, contact.last_to, now):
        return "superseded"
    if _reported_since(asked_at, contact, now):
        return "reported_contact"
    return ""


@dataclass(frozen=True)
class _Thread:
    """One thread as the open rules read it (SPEC §5.2): my addresses
    (lower-cased), sender kinds (address → ``person``/``automated``), contacts
    (address → ``Contact``), mutes, the reference time, thread id, subject, its
    first message, the bounces, ``list_asks`` and the senders' zones (see
    ``detect_thread``)."""

    owners: set[str]
    kinds: Mapping[str, str]
    contacts: Mapping[str, Contact]
    mutes: Mutes
    now: datetime
    thread_id: str
    subject: str
    opener: MailMessage
    undeliverable: Mapping[str, Sequence[datetime]]
    list_asks: bool
    timezones: Mapping[str, tzinfo] | None = None


def _retract(verdict: Verdict, loop_type: str, reason: str) -> Verdict:
    """``verdict`` with ``reason``, the open ``loop_type`` no longer expected."""
    verdict.reason = reason
    verdict.retract[loop_type] = reason
    return verdict


def _outbound(
    run: list[MailMessage],
    t: _Thread,
    *,
    replied_to: MailMessage | None,
    answered: Collection[str],
) -> Verdict:
    """Last turn is mine: inbound loops close; a waiting loop opens when my text
    asks something of a person (SPEC §5.2 rule 5, §5.1a "my asks"). ``replied_to``
    is the message my turn answers (None when it opens the thread: ``_ask_moot``).
    Who it waits on: ``_outbound_people``, less ``answered`` (who answered my ask
    to each of them: ``_still_to_answer``); a later message of my turn showing
    their answer closes it (``_answer_shown``, ``reply_detected``)."""
    verdict = Verdict(close=[LoopType.UNANSWERED_INBOUND])
    now = t.now
    asking = [
        m
        for m in run
        if live_asks(ask_text(m), sent_at=m.date, now=now, call_answers=True)
    ]
    if not asking:
        verdict.reason = "no_question"
        return verdict
    ask = asking[-1]
    people, sends, why = _outbound_people(
        run, ask, t, replied_to=replied_to, answered=answered
    )
    if why:
        verdict.reason = why
        if why != "no_recipients":  # nobody was asked: nothing to retract
            verdict.retract[LoopType.UNANSWERED_OUTBOUND] = why
        return verdict
    shown = _answer_shown(run, ask, people)
    if shown is not None:
        verdict.close.append(LoopType.UNANSWERED_OUTBOUND)
        verdict.closed_by[LoopType.UNANSWERED_OUTBOUND] = (
            CLOSED_BY_REPLY,
            _evidence(shown[1]),
        )
        verdict.reason = shown[0]
        return verdict
    broadcast = len(people) > BROADCAST_RECIPIENTS
    if broadcast and not any(
        a.kind == QUESTION for a in live_asks(ask_text(ask), sent_at=ask.date, now=now)
    ):
        # "Please push on with the review" to a team: no question owed me.
        return _retract(verdict, LoopType.UNANSWERED_OUTBOUND, "broadcast_instruction")
    to_people = [
        a
        for a in dict.fromkeys(x.lower() for m in sends for x in m.to if x)
        if a in people
    ]
    counterparty = "" if broadcast else (to_people or people)[0]
    if t.mutes.thread_muted(t.thread_id) or (
        counterparty and t.mutes.sender_muted(counterparty)
    ):
        verdict.reason = "muted"
        return verdict
    why = _ask_moot(asking, run, replied_to, counterparty, t)
    if why:
        return _retract(verdict, LoopType.UNANSWERED_OUTBOUND, why)
    started = asking[0].sent_at
    if now - started < OUTBOUND_GRACE:
        verdict.recheck_at = started + OUTBOUND_GRACE
        verdict.reason = "grace"
        return verdict
    verdict.open.append(
        _outbound_spec(run, ask, started, t, counterparty=counterparty, people=people)
    )
    return verdict


def _answer_shown(
    run: list[MailMessage], ask: MailMessage, people: list[str]
) -> tuple[str, MailMessage] | None:
    """(reason, my message) when their answer is not in the source but a later
    message of mine shows it: a forward quoting their reply (``answer_quoted``),
    or my "Thanks" to them with no reply of theirs in the thread
    (``thanked_after_ask``: they answered where this source cannot see)."""
    for reason, shown_by in (
        ("answer_quoted", _answer_quoted),
        ("thanked_after_ask", _thanked_since),
    ):
        mine = shown_by(run, ask, people)
        if mine is not None:
            return reason, mine
    return None


def _ask_moot(
    asking: list[MailMessage],
    run: list[MailMessage],
    replied_to: MailMessage | None,
    counterparty: str,
    t: _Thread,
) -> str:
    """Why my ask no longer waits, or "": later contact with them, or I wrote to
    them again elsewhere, long after, without repeating the ask here
    (``superseded_by_contact``); or a single ask in reply to their announcement to
    a crowd past ``REPLY_TO_CROWD_LIFETIME`` (``reply_to_crowd_expired``)."""
    contact = t.contacts.get(counterparty, Contact()) if counterparty else Contact()
    why = superseded_by_contact(
        LoopType.UNANSWERED_OUTBOUND,
        asking[-1].date,
        contact,
        t.now,
        own={m.date for m in run},
    )
    if not why and _expired_reply_to_crowd(asking, replied_to, counterparty, t.now):
        why = "reply_to_crowd_expired"
    return why


def _outbound_people(
    run: list[MailMessage],
    ask: MailMessage,
    t: _Thread,
    *,
    replied_to: MailMessage | None,
    answered: Collection[str],
) -> tuple[list[str], list[MailMessage], str]:
    """(people my ask waits on, the ask and its re-sent copies, "") or ([], sends,
    reason it waits on nobody). My mailing to subscribers (opt-out footer wording,
    ``loops.senders.has_opt_out_wording``) waits on nobody (``mass_mailing``).
    The recipients include those of its re-sent copies (``_resent_copies``) and
    exclude addresses it bounced for (``t.undeliverable``, see ``detect_thread``;
    bounced for all: ``undeliverable``). An ask posted to a mailing list (a list
    address among its recipients, or the message came back through a list
    server: ``MailMessage.list_unsubscribe`` or ``mailing_list``) waits on
    nobody (``mailing_list``) unless ``t.list_asks`` is on and it is my own help
    request to the list (``_list_asked``): then it waits on the list (a later
    post of mine to the list on its topic, in another thread, settles it:
    ``loops.pipeline.settled_elsewhere``). Automated recipients are nobody
    (``automated_recipient``; ``no_recipients`` when there were none)."""
    if not through_list(ask) and has_opt_out_wording(ask.body):
        # My mailing to subscribers (an "unsubscribe" / "to stop receiving"
        # footer) asks no person: its readers owe me nothing.
        return [], [], "mass_mailing"
    sends = [ask, *_resent_copies(run, ask, t.owners, t.now)]
    recipients = [
        a
        for a in dict.fromkeys(x.lower() for m in sends for x in (*m.to, *m.cc) if x)
        if a not in t.owners and a not in answered
    ]
    bounced = [a for a in recipients if _bounced(a, ask.date, t.undeliverable, t.now)]
    if bounced:
        recipients = [a for a in recipients if a not in bounced]
        if not recipients:
            return [], sends, "undeliverable"
    if (
        ask.list_unsubscribe
        or ask.mailing_list
        or any(is_list_address(a) for a in recipients)
    ):
        # Posted to a mailing list (a list address, or my own message came back
        # through a list server: its List-Unsubscribe or, from lists that send
        # none, its other list headers): its readers, not a person, may answer.
        # Only my own help request to the list waits, on the list.
        group = (
            _list_asked(run, replied_to, t.owners, t.now, opener=t.opener)
            if t.list_asks
            else ""
        )
        return ([group], sends, "") if group else ([], sends, "mailing_list")
    people = [a for a in recipients if t.kinds.get(a) != AUTOMATED]
    if not people:
        return [], sends, "automated_recipient" if recipients else "no_recipients"
    return people, sends, ""


def _outbound_spec(
    run: list[MailMessage],
    ask: MailMessage,
    started: datetime,
    t: _Thread,
    *,
    counterparty: str,
    people: list[str],
) -> LoopSpec:
    """The waiting loop of my ask (SPEC §5.2 rule 7): on ``counterparty``, or on
    every one of ``people`` when ``counterparty`` is empty (a broadcast); evidence
    is the ask and the last message of my turn when it is a later one."""
    last = run[-1]
    summary = (
        f'Waiting on {counterparty}: "{t.subject}"'
        if counterparty
        else f'Waiting on {len(people)} recipients: "{t.subject}"'
    )
    asks = live_asks(ask_text(ask), sent_at=ask.date, now=t.now, call_answers=True)
    return LoopSpec(
        loop_type=LoopType.UNANSWERED_OUTBOUND,
        thread_id=t.thread_id,
        counterparty_email=counterparty,
        counterparty_name="",
        summary=summary,
        opened_at=started,
        last_activity_at=last.sent_at,
        due=_deadline([ask], t.timezones),
        evidence=[_evidence(ask, asks)]
        + ([_evidence(last)] if last is not ask else []),
    )


def posted_list(message: MailMessage, owners: Collection[str]) -> str:
    """The mailing list ``message`` (mine) is posted to, from its To: the first
    list-like address (``is_list_address``), else, when a list server delivered
    it (``mailing_list``, ``list_unsubscribe``) and no list is in Cc, its only
    To address other than mine. '' when the list is only copied (my message is
    to a person) or unknown."""
    to = [a.lower() for a in message.to if a and a.lower() not in owners]
    listed = next((a for a in to if is_list_address(a)), "")
    if listed:
        return listed
    if (
        (message.mailing_list or message.list_unsubscribe)
        and len(to) == 1
        and not any(is_list_address(a) for a in message.cc)
    ):
        return to[0]
    return ""


def _list_asked(
    run: Sequence[MailMessage],
    replied_to: MailMessage | None,
    owners: set[str],
    now: datetime,
    *,
    opener: MailMessage | None = None,
) -> str:
    """The counterparty of my broadcast ask to a mailing list, or '' when my list
    post waits on nobody (SPEC §5.1a "my asks"; LOOPS_LABELLING: a list is a valid
    counterparty only for my broadcast asks).

    My post waits when it is my own help request: my turn opens the thread
    (nobody else wrote in it, ``replied_to`` is None) with a new message (no
    In-Reply-To or References, no "Re:"), or it is a later post of mine in a
    thread I opened that way (``opener``, the thread's first message, is mine:
    "P.S., can I get a pointer to a Tcl debugger?" after the answer to my
    first question), the newest message of my turn is
    addressed to the list (``posted_list``: the list in To, not a person with
    the list copied) and its newest text asks the readers something I still need
    (``loops.asks.readers_asks``: not a poll, a rhetorical question, a patch or
    a commit notice). The counterparty is the list, or the one recipient the
    post opens by naming ("Hi Dana," to the list and Dana). Any other person's
    reply in the thread answers it (the turn passes to them)."""
    if not run:
        return ""
    first, newest = run[0], run[-1]
    if replied_to is not None:
        if opener is None or not is_mine(opener, owners):
            return ""
        first = opener
    if first.in_reply_to or first.references or REPLY_PREFIX_RE.match(first.subject):
        return ""
    group = posted_list(newest, owners)
    text = ask_text(newest)
    if not group:
        return ""
    name = vocative(text)
    named = [
        a
        for a in (*newest.to, *newest.cc)
        if name
        and a.lower() not in owners
        and not is_list_address(a)
        and a.lower() != group
        and name in _name_tokens(a)
    ]
    # A question to a recipient I name asks that person; to the readers it must
    # seek help (``readers_asks(named=False)``).
    if not readers_asks(text, sent_at=newest.date, now=now, named=bool(named)):
        return ""
    return named[0].lower() if named else group


def _thanked_since(
    run: Sequence[MailMessage], ask: MailMessage, people: Sequence[str]
) -> MailMessage | None:
    """A later message of my turn, to one of ``people``, that only thanks
    (``is_acknowledgement_only``: "Thanks", "Got it, thank you"): I thanked them
    for an answer the thread does not hold. None when no such message."""
    if ask.date is None:
        return None
    wanted = set(people)
    for m in run:
        if (
            m.date is not None
            and m.date > ask.date
            and wanted & {a.lower() for a in m.to if a}
            and is_acknowledgement_only(m.body)
        ):
            return m
    return None


def _quotes_person(sender: str, address: str) -> bool:
    """True when a quoted header's sender line (``From: Heizenrader, Tim``, ``On …
    Dana Okafor <dana@example.com> wrote:``) names ``address``: the address itself,
    or every name token of its local part (two at least: tim.heizenrader@ →
    "Heizenrader, Tim")."""
    line = (sender or "").lower()
    if address in line:
        return True
    tokens = _name_tokens(address)
    words = set(re.split(r"[^a-z']+", line))
    return len(tokens) >= 2 and tokens <= words


def _answer_quoted(
    run: Sequence[MailMessage], ask: MailMessage, people: Sequence[str]
) -> MailMessage | None:
    """A later message of my turn that quotes (``quoted_messages``) a message of
    one of ``people`` which itself quotes my ask (the first ``QUOTED_ASK_CHARS``
    characters of its own text) below it: their reply to the ask, which the
    source does not hold (a sent folder, a deleted message), shows in my forward
    of it. So does a later message of mine that replies to a message of theirs
    dated after the ask (``replied_to_author``: its quoted header names one of
    ``people``). None when no such message."""
    if ask.date is None:
        return None
    for m in run:
        if m.date is None or m.date <= ask.date:
            continue
        author = replied_to_author(m)
        if (
            author is not None
            and author.date is not None
            and ask.date < author.date <= m.date + CLOCK_SLACK
            and any(
                _quotes_person(f"{author.name} <{author.address}>", a) for a in people
            )
        ):
            return m
    needle = collapse(reply_text(ask.body)).lower()[:QUOTED_ASK_CHARS]
    if len(needle) < QUOTED_ASK_CHARS // 3:
        return None
    for m in run:
        if m.date is None or m.date <= ask.date:
            continue
        quoted = quoted_messages(m.body)
        for n, (sender, _text) in enumerate(quoted):
            if not any(_quotes_person(sender, a) for a in people):
                continue
            below = collapse(" ".join(text for _, text in quoted[n + 1 :])).lower()
            if needle in below:
                return m
    return None


def _resent_copies(
    run: Sequence[MailMessage], ask: MailMessage, owners: set[str], now: datetime
) -> list[MailMessage]:
    """Later messages of my turn that re-send ``ask`` (a forward of my own
    message with no new text of theirs, or the same text again): the same ask,
    to their recipients."""
    text = collapse(reply_text(ask.body)).lower()[:RESENT_MATCH_CHARS]
    if len(text) < RESENT_MATCH_CHARS // 2:
        return []
    later = [m for m in run if m.date and ask.date and m.date > ask.date]
    return [
        m
        for m in later
        if is_mine(m, owners)
        and not live_asks(ask_text(m), sent_at=m.date, now=now)
        and text in collapse(m.body).lower()
    ]


def _bounced(
    address: str,
    sent_at: datetime | None,
    undeliverable: Mapping[str, Sequence[datetime]],
    now: datetime,
) -> bool:
    """True when a delivery-failure notice for ``address`` arrived within
    ``BOUNCE_WINDOW`` after ``sent_at`` (and by ``now``)."""
    return bool(sent_at) and any(
        sent_at <= when <= min(now, sent_at + BOUNCE_WINDOW)  # type: ignore[operator]
        for when in undeliverable.get(address, ())
    )


def _inbound(
    subs: list[MailMessage], run: list[MailMessage], last: MailMessage, t: _Thread
) -> Verdict:
    """Last turn is theirs: my waiting loop closes (as fulfilled when they
    delivered); a reply-owed loop opens only when a person asked me something,
    and not when my message just before their turn declined their offer
    (``loops.asks.declines``). One loop per turn: their chases of the ask are its
    evidence (oldest first, the newest message last)."""
    verdict = Verdict(close=[LoopType.UNANSWERED_OUTBOUND])
    delivered = next((m for m in run if is_fulfilment(reply_text(m.body))), None)
    if delivered is not None:
        verdict.closed_by[LoopType.UNANSWERED_OUTBOUND] = (
            CLOSED_BY_FULFILLED,
            _evidence(delivered),
        )
    sender = (last.from_addr or "").lower()
    owners = t.owners
    if last.list_unsubscribe:
        verdict.reason = "list_mail"
    elif not owners & {a.lower() for a in last.to}:
        verdict.reason = "cc_only"
    elif t.mutes.thread_muted(t.thread_id) or t.mutes.sender_muted(sender):
        verdict.reason = "muted"
    elif in_bulk_category(subs) and not any(is_mine(m, owners) for m in subs):
        verdict.reason = "bulk_category"
    if verdict.reason:
        return verdict
    asking, why = _asks_owed(subs, run, sender, t)
    if why:
        return _retract(verdict, LoopType.UNANSWERED_INBOUND, why)
    started = asking[0].sent_at
    if t.now - started < INBOUND_GRACE:
        verdict.recheck_at = started + INBOUND_GRACE
        verdict.reason = "grace"
        return verdict
    verdict.open.append(
        LoopSpec(
            loop_type=LoopType.UNANSWERED_INBOUND,
            thread_id=t.thread_id,
            counterparty_email=sender,
            counterparty_name=last.from_name or "",
            summary=f'Reply owed to {sender}: "{t.subject}"',
            opened_at=started,
            last_activity_at=last.sent_at,
            due=_deadline(asking, t.timezones),
            # The ask and each chase of it ("Follow up: …"), newest last.
            evidence=[
                _evidence(m, asks_of_me(m, now=t.now, owners=owners)) for m in asking
            ]
            + ([_evidence(last)] if last is not asking[-1] else []),
        )
    )
    return verdict


def _asks_owed(
    subs: list[MailMessage], run: list[MailMessage], sender: str, t: _Thread
) -> tuple[list[MailMessage], str]:
    """(their messages of the turn that ask something of me, "") or ([], why no
    reply is owed). An ask counts when a person's newest unquoted text, addressed
    to me and not to a crowd (a reply naming me alone in To after my message in
    the thread is addressed to me whatever its Cc: ``crowd_ask``), asks something
    of me (``loops.asks``). No reply is owed to an automated sender, after my
    decline, without such an ask (``crowd``, ``jest_on_list``, ``no_ask``), when
    later contact supersedes it
    (``superseded_by_contact``), or a long-past "silence means yes"
    (``settled_by_silence``). SPEC §5.1a reply expectation."""
    owners, now = t.owners, t.now
    before = subs[: next((i for i, m in enumerate(subs) if m is run[0]), 0)]
    if t.kinds.get(sender) == AUTOMATED:
        return [], "automated_sender"
    if before and is_mine(before[-1], owners) and declines(reply_text(before[-1].body)):
        # I declined ("Thank you anyway"); their rebuttal or next offer in the
        # thread is a pitch, not an ask I owe an answer to.
        return [], "after_my_decline"
    asking = [
        m
        for m in run
        if owners & {a.lower() for a in m.to}
        and t.kinds.get((m.from_addr or "").lower()) != AUTOMATED
        and not crowd_ask(m, owners, before)
        and not addressed_elsewhere(m, owners)
        and asks_of_me(m, now=now, owners=owners)
    ]
    if not asking:
        if any(addressed_to_crowd(m) for m in run):
            return [], "crowd"
        if any(
            through_list(m) and live_asks(ask_text(m), sent_at=m.date, now=now)
            for m in run
        ):
            return [], "jest_on_list"
        return [], "no_ask"
    if why := superseded_by_contact(
        LoopType.UNANSWERED_INBOUND,
        asking[-1].date,
        t.contacts.get(sender, Contact()),
        now,
    ):
        return asking, why
    if any(
        settles_by_silence(reply_text(m.body), sent_at=m.date, now=now)
        for m in run
        if m.sent_at >= asking[-1].sent_at
    ):
        # "If I do not hear from you by COB tomorrow I take your silence as
        # acceptance", long past: they went ahead without my answer.
        return asking, "settled_by_silence"
    return asking, ""


_SPACE_BEFORE_PUNCT = re.compile(r"\s+(?=[,.;:?!])")
_DOUBLED_COMMA = re.compile(r",(?:\s*,)+")


def _deadline(
    asking: Sequence[MailMessage], timezones: Mapping[str, tzinfo] | None = None
) -> date | None:
    """The nearest day by which one of the ``asking`` messages wants its answer
    (``ask_deadline`` over each one's ``ask_text``, read from its own sent date in
    its sender's zone, ``timezones[message_id]``, when known); None when none
    names a deadline."""
    days = []
    for m in asking:
        text = ask_text(m)
        day = ask_deadline(text, m.date)
        if day is not None and timezones is not None:
            # Only a message naming a deadline needs its sender's zone (a read).
            day = ask_deadline(text, m.date, timezones.get(m.message_id))
        days.append(day)
    return min((d for d in days if d is not None), default=None)


def _evidence(message: MailMessage, asks: Sequence[Ask] = ()) -> dict[str, Any]:
    """Evidence item: message id, raw record id and the first 200 collapsed chars
    (SPEC §5.2 rule 7); with ``asks`` (the message's live asks), ``ask``: the
    first sentence that asks (≤ 200 chars), which is what
    ``waiting`` shows a reader deciding whether the loop is real."""
    item: dict[str, Any] = {
        "message_id": message.message_id,
        "quote": quote_of(message.body),
    }
    if asks:
        first = asks[0]
        # The sentence as the rules read it, softeners dropped ("give me your
        # number if you do not mind" -> "give me your number ."): tidied for a
        # reader.
        text = _SPACE_BEFORE_PUNCT.sub("", collapse(first.sentence))
        item["ask"] = _DOUBLED_COMMA.sub(",", text)[:200]
    if message.raw_record_id is not None:
        item["raw_record_id"] = message.raw_record_id
    if message.link:
        item["link"] = message.link
    return item
