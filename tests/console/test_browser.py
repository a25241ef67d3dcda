"""The console in a real browser (issue 19): headless Chromium drives the pages a
staff user uses, starting from the login form and following links and buttons only
(no URL typed after the login page), and asserts what the user sees.

Screenshots of the waiting view and a person card are written to
``var/test-artifacts/``; with ``BRAIN_UPDATE_SCREENSHOTS=1`` they also replace the
ones the README shows (``docs/screenshots/``).
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import (
    StaleElementReferenceException,
    TimeoutException,
    WebDriverException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from accounts.models import User
from accounts.services import apikey_create
from brain.access import local_caller
from brain.models import Page, PageType, RawRecord, Source
from brain.services.facts import fact_remember
from brain.services.pages import page_write
from loops.models import CLOSED_BY_STALENESS, LoopStatus, LoopType, OpenLoop
from loops.services import loop_open
from tests.console.conftest import ARTIFACTS

pytestmark = pytest.mark.slow

CALLER = local_caller(actor="test")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
PASSWORD = "a long browser password"


def _keep_screenshot(driver: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    driver.save_screenshot(str(path))
    if os.environ.get("BRAIN_UPDATE_SCREENSHOTS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS / name)


def _person(source: Source, title: str, email: str, body: str = "") -> Page:
    return page_write(
        source=source,
        mode="create",
        actor=CALLER,
        title=title,
        type_name="person",
        body=body or f"{title} works with us.",
        frontmatter={"aliases": [email]},
        embed=False,
    ).page


def _loop(source: Source, email: str, summary: str, loop_type: str) -> OpenLoop:
    return loop_open(
        source=source,
        loop_type=loop_type,
        summary=summary,
        actor="test",
        counterparty_email=email,
        evidence=[{"quote": f"{summary}, as written in the mail."}],
    )


@pytest.fixture
def demo(transactional_db: None) -> dict[str, Any]:
    User.objects.create_superuser("curator", "curator@example.org", PASSWORD)
    mail = Source.objects.create(id="work-mail", name="Work mail", kind="mailbox")
    dana = _person(mail, "Dana Reyes", "dana@example.org", "Dana runs finance.")
    _person(mail, "Dana R.", "dana.r@example.org")
    _person(mail, "Omar Haddad", "omar@example.org")
    loops = {
        "numbers": _loop(
            mail,
            "dana@example.org",
            "Send Dana the Q3 numbers",
            LoopType.UNANSWERED_INBOUND,
        ),
        "contract": _loop(
            mail,
            "dana@example.org",
            "Review the vendor contract",
            LoopType.COMMITMENT_OWED_BY_ME,
        ),
        "draft": _loop(
            mail,
            "omar@example.org",
            "Omar owes the draft",
            LoopType.UNANSWERED_OUTBOUND,
        ),
        "news": _loop(
            mail, "news@example.org", "Weekly newsletter", LoopType.UNANSWERED_INBOUND
        ),
        "news2": _loop(
            mail, "news@example.org", "Another newsletter", LoopType.UNANSWERED_INBOUND
        ),
    }
    return {"mail": mail, "dana": dana, "loops": loops}


def _go(driver: Any, element: Any, keys: str | None = None) -> None:
    """Click ``element`` (or type ``keys`` into it) and wait until the page that
    loads has replaced this one and finished loading, so the next lookup cannot
    find an element of the old page (the console's pages share ids). The old page
    is marked with a window property a new document does not have (more robust
    than polling an old element, which chromedriver may answer with an inspector
    error instead of "stale")."""
    driver.execute_script("window.__brainOldPage = true;")
    if keys is None:
        element.click()
    else:
        element.send_keys(keys)

    def loaded(d: Any) -> bool:
        return bool(
            d.execute_script(
                "return window.__brainOldPage === undefined"
                " && document.readyState === 'complete';"
            )
        )

    WebDriverWait(driver, 30, ignored_exceptions=(WebDriverException,)).until(loaded)


def _login(driver: Any, live_server: Any) -> None:
    driver.get(f"{live_server.url}/admin/login/")
    driver.find_element(By.NAME, "username").send_keys("curator")
    driver.find_element(By.NAME, "password").send_keys(PASSWORD)
    _go(driver, driver.find_element(By.CSS_SELECTOR, "input[type=submit]"))
    assert "Brain console" in driver.find_element(By.ID, "site-name").text


def _message(driver: Any, expected: str) -> str:
    """The messages shown once the page the last click loaded says ``expected``
    (the click's navigation may still be under way when this starts)."""

    def shown(d: Any) -> str | bool:
        found = d.find_elements(By.CSS_SELECTOR, "ul.messagelist")
        text = found[0].text if found else ""
        return text if expected in text else False

    try:
        return WebDriverWait(
            driver, 30, ignored_exceptions=(StaleElementReferenceException,)
        ).until(shown)
    except TimeoutException:
        pytest.fail(f"the page never said {expected!r}")


def _triage(driver: Any) -> str:
    """The waiting view's text above the paste-ready digest."""
    return driver.find_element(By.ID, "content-main").text.split("Paste-ready")[0]


def _row(driver: Any, summary: str) -> Any:
    return driver.find_element(
        By.XPATH, f"//tr[contains(@class,'waiting-loop')][.//a[text()='{summary}']]"
    )


def test_waiting_triage_in_the_browser(
    browser: Any, live_server: Any, demo: dict[str, Any]
) -> None:
    """Log in, open waiting from the home, close a loop, change a due date, mute a
    sender and close their loops; each step says what changed."""
    _login(browser, live_server)
    home = browser.find_element(By.ID, "dash-waiting").text
    assert "5 open loop(s)" in home
    _go(browser, browser.find_element(By.ID, "nav-waiting"))
    assert "Reply owed by me" in _row(browser, "Send Dana the Q3 numbers").text
    _keep_screenshot(browser, "waiting-triage.png")

    _go(
        browser,
        _row(browser, "Send Dana the Q3 numbers").find_element(
            By.CSS_SELECTOR, "button.loop-done"
        ),
    )
    _message(browser, "“Send Dana the Q3 numbers” closed as done.")
    assert "Send Dana the Q3 numbers" not in _triage(browser)

    row = _row(browser, "Review the vendor contract")
    due = row.find_element(By.CSS_SELECTOR, "input.loop-due-input")
    browser.execute_script("arguments[0].value = '2031-05-04'", due)
    _go(browser, row.find_element(By.CSS_SELECTOR, "button.loop-due"))
    _message(browser, "due date changed from no due date to 2031-05-04")
    assert "2031-05-04" in _row(browser, "Review the vendor contract").text

    _go(
        browser,
        _row(browser, "Weekly newsletter").find_element(
            By.CSS_SELECTOR, "button.loop-mute"
        ),
    )
    message = _message(browser, "Muted news@example.org")
    assert "Closed 2 open loop(s) with them" in message
    assert "Weekly newsletter" not in _triage(browser)
    statuses = dict(OpenLoop.objects.values_list("summary", "status"))
    assert statuses["Send Dana the Q3 numbers"] == LoopStatus.DONE
    assert statuses["Another newsletter"] == LoopStatus.DROPPED
    assert statuses["Omar owes the draft"] == LoopStatus.OPEN


def test_person_card_and_merge_in_the_browser(
    browser: Any, live_server: Any, demo: dict[str, Any]
) -> None:
    """Open a person card from People, see their loops, find the duplicate with
    "Merge with…", preview both side by side and merge them."""
    _login(browser, live_server)
    _go(browser, browser.find_element(By.ID, "nav-people"))
    _go(browser, browser.find_element(By.LINK_TEXT, "Dana Reyes"))
    card = browser.find_element(By.ID, "person-loops").text
    assert "Send Dana the Q3 numbers" in card
    assert "I promised" in card
    assert "dana@example.org" in browser.find_element(By.ID, "content-main").text
    _keep_screenshot(browser, "person-card.png")

    browser.find_element(By.ID, "merge-q").send_keys("dana.r@")
    _go(
        browser,
        browser.find_element(By.CSS_SELECTOR, "#person-merge input[type=submit]"),
    )
    _go(browser, browser.find_element(By.CSS_SELECTOR, "a.merge-preview"))
    assert "Merged away: Dana R." in browser.find_element(By.ID, "merge-side").text
    assert "Kept: Dana Reyes" in browser.find_element(By.ID, "keep-side").text
    _go(browser, browser.find_element(By.ID, "merge-confirm"))
    _message(browser, "Merged Dana R. into Dana Reyes")
    assert "dana.r@example.org" in browser.find_element(By.ID, "content-main").text
    assert Page.objects.get(title="Dana R.").deleted_at is not None


def test_a_bidi_override_in_a_title_stays_inside_its_link_in_the_browser(
    browser: Any, live_server: Any, demo: dict[str, Any]
) -> None:
    """Regression (newcomer): a page titled with U+202E RIGHT-TO-LEFT OVERRIDE that
    links to a person showed on the card as "… snoitnem → LTR": the override ran on
    into the console's own words. Every link and list item of the content is a
    bidi isolate, so the override ends with the title."""
    page_write(
        source=demo["mail"],
        mode="create",
        actor=CALLER,
        title="Cafe notes \u202e RTL",
        body="Met [[Dana Reyes]] for coffee.",
        embed=False,
    )
    _login(browser, live_server)
    _go(browser, browser.find_element(By.ID, "nav-people"))
    _go(browser, browser.find_element(By.LINK_TEXT, "Dana Reyes"))
    link = browser.find_element(By.PARTIAL_LINK_TEXT, "Cafe notes")
    item = link.find_element(By.XPATH, "./ancestor::li[1]")
    isolation = "return getComputedStyle(arguments[0]).unicodeBidi"
    assert browser.execute_script(isolation, link) == "isolate"
    assert browser.execute_script(isolation, item) == "isolate"
    assert "mentions" in item.text


def test_edit_search_revert_and_api_docs_in_the_browser(
    browser: Any, live_server: Any, demo: dict[str, Any]
) -> None:
    """Edit a page, find the new words with the search box, revert the edit from the
    revisions, then read the API docs (served offline from the package)."""
    _login(browser, live_server)
    _go(browser, browser.find_element(By.ID, "nav-people"))
    _go(browser, browser.find_element(By.LINK_TEXT, "Dana Reyes"))
    _go(browser, browser.find_element(By.LINK_TEXT, "Page"))
    assert "Dana runs finance." in browser.find_element(By.ID, "page-body").text
    _go(browser, browser.find_element(By.ID, "page-edit"))
    body = browser.find_element(By.ID, "id_body")
    body.clear()
    body.send_keys("Dana now leads the Zanzibar offsite.")
    _go(browser, browser.find_element(By.ID, "page-save"))
    _message(browser, "Page saved; a revision was recorded")
    assert "Zanzibar offsite" in browser.find_element(By.ID, "page-body").text

    _go(browser, browser.find_element(By.ID, "console-search"), "Zanzibar\n")
    _go(browser, browser.find_element(By.CSS_SELECTOR, "#search-results a"))
    assert "Zanzibar offsite" in browser.find_element(By.ID, "page-body").text

    _go(browser, browser.find_element(By.ID, "page-revisions"))
    assert (
        "+Dana now leads the Zanzibar offsite."
        in browser.find_element(By.CSS_SELECTOR, ".revision .diff").text
    )
    _go(browser, browser.find_element(By.CSS_SELECTOR, ".revision button.revert"))
    _message(browser, "Reverted to the text before")
    _go(browser, browser.find_element(By.LINK_TEXT, "Dana Reyes"))
    assert "Dana runs finance." in browser.find_element(By.ID, "page-body").text

    _go(browser, browser.find_element(By.LINK_TEXT, "API docs"))
    title = browser.find_element(By.CSS_SELECTOR, ".swagger-ui .info .title")
    assert "Brain API" in title.text
    assert browser.find_elements(By.CSS_SELECTOR, ".opblock")


def test_loop_page_done_and_reopen_in_the_browser(
    browser: Any, live_server: Any, demo: dict[str, Any]
) -> None:
    """The loop's own page: Done closes it and Reopen opens it again (was: the
    buttons sat inside the admin change form, so Done answered "Please correct the
    error below." and Reopen did nothing); a loop without a due date shows an
    empty date field, not "None"."""
    _login(browser, live_server)
    _go(browser, browser.find_element(By.ID, "nav-waiting"))
    row = _row(browser, "Omar owes the draft")
    assert row.find_element(By.CSS_SELECTOR, "input.loop-due-input").get_attribute(
        "value"
    ) in ("", None)
    _go(browser, row.find_element(By.LINK_TEXT, "Omar owes the draft"))
    _go(browser, browser.find_element(By.CSS_SELECTOR, "#loop-triage button.loop-done"))
    message = _message(browser, "“Omar owes the draft” closed as done.")
    assert "Please correct the error" not in message
    _go(
        browser,
        browser.find_element(By.CSS_SELECTOR, "#loop-triage button.loop-reopen"),
    )
    _message(browser, "“Omar owes the draft” is open again.")
    loop = demo["loops"]["draft"]
    loop.refresh_from_db()
    assert loop.status == LoopStatus.OPEN


def test_snooze_shows_as_snoozed_and_wakes_in_the_browser(
    browser: Any, live_server: Any, demo: dict[str, Any]
) -> None:
    """Issue 47: snoozing a loop from Waiting leaves a "1 snoozed (until …)" line
    that lists it with Wake now; the person card marks it; Wake now brings it back
    to the ranked list."""
    _login(browser, live_server)
    _go(browser, browser.find_element(By.ID, "nav-waiting"))
    row = _row(browser, "Review the vendor contract")
    until = row.find_element(By.CSS_SELECTOR, "input.loop-snooze-input")
    browser.execute_script("arguments[0].value = '2099-01-05'", until)
    _go(browser, row.find_element(By.CSS_SELECTOR, "button.loop-snooze"))
    _message(browser, "snoozed until 2099-01-05")
    line = browser.find_element(By.CSS_SELECTOR, "#waiting-snoozed summary")
    assert "1 snoozed (until 2099-01-05)" in line.text
    assert not browser.find_elements(
        By.XPATH,
        "//tr[contains(@class,'waiting-loop')][.//a[text()='Review the "
        "vendor contract']]",
    )
    line.click()
    parked = browser.find_element(By.CSS_SELECTOR, "tr.waiting-snoozed-loop")
    assert "Review the vendor contract" in parked.text and "2099-01-05" in parked.text

    _go(browser, browser.find_element(By.ID, "nav-people"))
    _go(browser, browser.find_element(By.LINK_TEXT, "Dana Reyes"))
    card = browser.find_element(By.ID, "person-loops")
    assert "1 snoozed" in card.find_element(By.TAG_NAME, "h2").text
    badge = card.find_element(By.CSS_SELECTOR, "tr.person-loop-snoozed")
    assert "snoozed until 2099-01-05" in badge.text
    assert "Review the vendor contract" in badge.text

    _go(browser, browser.find_element(By.ID, "nav-waiting"))
    browser.find_element(By.CSS_SELECTOR, "#waiting-snoozed summary").click()
    _go(browser, browser.find_element(By.CSS_SELECTOR, "#waiting-snoozed .loop-wake"))
    _message(browser, "is awake: back in waiting now")
    assert not browser.find_elements(By.ID, "waiting-snoozed")
    assert _row(browser, "Review the vendor contract")
    loop = demo["loops"]["contract"]
    loop.refresh_from_db()
    assert loop.snoozed_until is None and loop.status == LoopStatus.OPEN


def test_search_one_row_per_page_with_filters_in_the_browser(
    browser: Any, live_server: Any, demo: dict[str, Any], settings: Any
) -> None:
    """Issue 47: the search box lists each page once, narrows by page type, and
    says when search is keyword-only."""
    settings.BRAIN_EMBEDDING_PROVIDER = "none"
    for title in ("Dana Reyes", "Omar Haddad"):
        page = Page.objects.get(title=title)
        page_write(
            source=demo["mail"],
            mode="replace",
            actor=CALLER,
            slug=page.slug,
            title=title,
            body=f"# {title} and Zanzibar\n\nZanzibar offsite.\n\n## More\n\nZanzibar.",
            embed=False,
        )
    page_write(
        source=demo["mail"],
        mode="create",
        actor=CALLER,
        title="Zanzibar venue notes",
        body="# Venue\n\nZanzibar hotel.\n\n## Food\n\nZanzibar dinner.",
        embed=False,
    )
    _login(browser, live_server)
    _go(browser, browser.find_element(By.ID, "console-search"), "Zanzibar\n")
    rows = browser.find_elements(By.CSS_SELECTOR, "#search-results li")
    titles = [r.find_element(By.TAG_NAME, "a").text for r in rows]
    assert sorted(titles) == ["Dana Reyes", "Omar Haddad", "Zanzibar venue notes"]
    notice = browser.find_element(By.ID, "search-degraded").text
    assert "keyword-only" in notice
    browser.find_element(By.CSS_SELECTOR, "#search-type option[value='person']").click()
    _go(browser, browser.find_element(By.CSS_SELECTOR, "#search-form [type=submit]"))
    rows = browser.find_elements(By.CSS_SELECTOR, "#search-results li")
    assert sorted(r.find_element(By.TAG_NAME, "a").text for r in rows) == [
        "Dana Reyes",
        "Omar Haddad",
    ]
    assert "(person, work-mail" in rows[0].text


def test_reverting_a_first_revision_needs_the_box_ticked_in_the_browser(
    browser: Any, live_server: Any, demo: dict[str, Any]
) -> None:
    """Issue 47: the Revert of the revision that wrote a page's whole text does not
    submit until "Empty the page" is ticked; the revert is then labelled revert."""
    _login(browser, live_server)
    _go(browser, browser.find_element(By.ID, "nav-people"))
    _go(browser, browser.find_element(By.LINK_TEXT, "Omar Haddad"))
    _go(browser, browser.find_element(By.LINK_TEXT, "Revisions"))
    button = browser.find_element(By.CSS_SELECTOR, ".revision button.revert")
    assert "empties the page" in button.text
    button.click()  # the required box stops the form: nothing is posted
    assert "Omar Haddad works with us." == Page.objects.get(title="Omar Haddad").body
    browser.find_element(By.CSS_SELECTOR, ".revert-confirm input").click()
    _go(browser, browser.find_element(By.CSS_SELECTOR, ".revision button.revert"))
    _message(browser, "Reverted to the text before the create")
    labels = browser.find_elements(By.CSS_SELECTOR, ".revision-label")
    assert [lb.text for lb in labels] == ["revert", "create"]


def _api_append(live_server: Any, source: Source, slug: str, text: str) -> int:
    """An agent's append through the HTTP API of the live server (no base
    revision); returns the status."""
    key = apikey_create(
        name="agent", scopes=("read", "write"), write_source=source, trusted=True
    ).plaintext
    request = urllib.request.Request(
        f"{live_server.url}/api/pages/{slug}",
        data=json.dumps({"body": text}).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
        return int(response.status)


def test_spec4_conflict_console_editor_shows_both_versions_in_the_browser(
    browser: Any, live_server: Any, demo: dict[str, Any]
) -> None:
    """Issue 46: the curator opens the editor, an agent appends through the API,
    the curator saves: nothing is overwritten; the editor shows the conflict with
    the current version (the agent's line) and the curator's text still in the box;
    saving again then puts the curator's text over it deliberately."""
    _login(browser, live_server)
    _go(browser, browser.find_element(By.ID, "nav-people"))
    _go(browser, browser.find_element(By.LINK_TEXT, "Dana Reyes"))
    _go(browser, browser.find_element(By.LINK_TEXT, "Page"))
    _go(browser, browser.find_element(By.ID, "page-edit"))
    body = browser.find_element(By.ID, "id_body")
    body.clear()
    body.send_keys("Dana moved to the Lisbon office.")
    dana = demo["dana"]
    assert (
        _api_append(live_server, demo["mail"], dana.slug, "Agent: Dana asked for Q3.")
        == 200
    )

    _go(browser, browser.find_element(By.ID, "page-save"))
    conflict = browser.find_element(By.ID, "page-conflict").text
    assert "Not saved: the page changed since you opened the editor" in conflict
    current = browser.find_element(By.ID, "conflict-current").text
    assert "Dana runs finance." in current and "Agent: Dana asked for Q3." in current
    assert (
        "+Agent: Dana asked for Q3."
        in browser.find_element(By.ID, "conflict-diff").text
    )
    mine = browser.find_element(By.ID, "id_body").get_attribute("value")
    assert mine == "Dana moved to the Lisbon office."
    assert "Agent: Dana asked for Q3." in Page.objects.get(pk=dana.pk).body

    _go(browser, browser.find_element(By.ID, "page-save"))
    _message(browser, "Page saved; a revision was recorded")
    assert Page.objects.get(pk=dana.pk).body == "Dana moved to the Lisbon office."


def test_waiting_coverage_lines_per_mailbox_in_the_browser(
    browser: Any, live_server: Any, demo: dict[str, Any]
) -> None:
    """Issue 47: with two mailboxes, Waiting shows one collapsible coverage line per
    source at its own date (not a grey note with command-line advice, not a
    heading dated by another source), and the line of an archive whose asks aged
    past the 90-day window says how many and links to them."""
    old = Source.objects.create(
        id="old-box",
        name="Old archive",
        kind="mailbox",
        owner_addresses=["me@example.org"],
    )
    newest = datetime(2001, 10, 1, 12, tzinfo=UTC)
    for n in range(3):
        RawRecord.objects.create(
            source=old,
            external_id=f"<old{n}@x>",
            kind=RawRecord.Kind.RFC822,
            content="x",
            content_hash=f"old{n}".ljust(64, "0"),
            metadata={
                "date": (newest - timedelta(days=n)).isoformat(),
                "from_addr": "list@example.org",
            },
        )
    aged = _loop(
        old, "ann@example.org", "Ann asked for the budget", LoopType.UNANSWERED_INBOUND
    )
    OpenLoop.objects.filter(pk=aged.pk).update(
        status=LoopStatus.STALE,
        closed_by=CLOSED_BY_STALENESS,
        closed_at=newest,
        last_activity_at=newest - timedelta(days=200),
    )
    _login(browser, live_server)
    _go(browser, browser.find_element(By.ID, "nav-waiting"))
    heading = browser.find_element(By.ID, "waiting-heading").text
    assert not heading.startswith("As of") and "each at its own date" in heading
    lines = browser.find_elements(By.CSS_SELECTOR, "details.waiting-coverage")
    assert len(lines) == 2
    line = browser.find_element(
        By.CSS_SELECTOR, "details.waiting-coverage[data-source='old-box']"
    )
    assert line.text == (
        "mailbox Old archive: 3 messages to 2001-10-01; none of the owner's own "
        "mail in the window; 1 unanswered ask(s) aged past the 90-day window"
    )
    assert not any(
        "old-box" in w.text for w in browser.find_elements(By.CSS_SELECTOR, ".warning")
    )
    assert "--as-of" not in _triage(browser)
    line.find_element(By.TAG_NAME, "summary").click()
    assert "As of 2001-10-01 12:00 UTC" in line.text
    _go(browser, line.find_element(By.CSS_SELECTOR, "a.waiting-aged-out"))
    assert "Ann asked for the budget" in browser.find_element(By.ID, "result_list").text


def test_correct_and_forget_a_fact_on_the_card_in_the_browser(
    browser: Any, live_server: Any, demo: dict[str, Any]
) -> None:
    """Issue 47: a card's fact has Correct (a new fact supersedes it, naming the
    curator; the old one is kept, not overwritten) and Forget (with a reason)."""
    old = fact_remember(
        caller=CALLER,
        text="Dana's desk phone is 555-0100",
        provenance="test",
        entity=demo["dana"],
        source=demo["mail"],
        use_llm=False,
    ).fact
    _login(browser, live_server)
    _go(browser, browser.find_element(By.ID, "nav-people"))
    _go(browser, browser.find_element(By.LINK_TEXT, "Dana Reyes"))
    fact = browser.find_element(By.CSS_SELECTOR, f".person-fact[data-fact='{old.pk}']")
    fact.find_element(By.TAG_NAME, "summary").click()
    box = fact.find_element(By.CSS_SELECTOR, "input.fact-correct-text")
    box.clear()
    box.send_keys("Dana's desk phone is 555-0199")
    _go(browser, fact.find_element(By.CSS_SELECTOR, "button.fact-correct-button"))
    _message(browser, "Corrected: “Dana's desk phone is 555-0100” is superseded")
    facts = browser.find_element(By.ID, "person-facts").text
    live, _, history = facts.partition("Superseded or forgotten")
    assert "555-0199" in live and "555-0100" not in live
    assert "555-0100" in history and "corrected by staff:curator" in history
    old.refresh_from_db()
    new = old.superseded_by
    assert new is not None and new.text == "Dana's desk phone is 555-0199"
    assert old.text == "Dana's desk phone is 555-0100" and old.expired_at is not None
    assert new.created_by == "staff:curator"

    fact = browser.find_element(By.CSS_SELECTOR, f".person-fact[data-fact='{new.pk}']")
    fact.find_element(By.TAG_NAME, "summary").click()
    fact.find_element(By.CSS_SELECTOR, "input.fact-forget-reason").send_keys(
        "she left the desk"
    )
    _go(browser, fact.find_element(By.CSS_SELECTOR, "button.fact-forget-button"))
    _message(browser, "Forgotten: “Dana's desk phone is 555-0199” (she left the desk)")
    new.refresh_from_db()
    assert new.expired_reason == "forgotten: she left the desk"
    assert "No live facts." in browser.find_element(By.ID, "person-facts").text


def test_loop_page_fits_the_window_with_its_evidence_once_in_the_browser(
    browser: Any, live_server: Any, demo: dict[str, Any]
) -> None:
    """Issue 47: the loop page was 1,689 px wide in a 1,400 px window and showed its
    evidence three times plus internals; it fits, quotes the evidence once, and
    keeps the dedup key and raw JSON behind a closed <details>."""
    long_id = "CAH" + "x7Yq" * 40 + "@mail.gmail.com"
    quote = "Could you send the signed vendor contract by Friday? " + "x" * 300
    loop = demo["loops"]["contract"]
    OpenLoop.objects.filter(pk=loop.pk).update(
        dedup_key="commitment_owed_by_me:" + "thread-" + "0123456789abcdef" * 12,
        thread_id="<" + long_id + ">",
        evidence=[
            {
                "quote": quote,
                "message_id": f"<{long_id}>",
                "link": "https://mail.google.com/mail/u/0/#all/" + "f" * 120,
                "from": "dana@example.org",
                "date": "2026-11-30T09:12:00+00:00",
            }
        ],
    )
    browser.set_window_size(1400, 900)
    _login(browser, live_server)
    _go(browser, browser.find_element(By.ID, "nav-waiting"))
    _go(browser, browser.find_element(By.LINK_TEXT, "Review the vendor contract"))
    sizes = browser.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth];"
    )
    assert sizes[0] <= sizes[1], sizes
    body = browser.find_element(By.TAG_NAME, "body").text
    assert body.count("Could you send the signed vendor contract") == 1
    internals = browser.find_element(By.ID, "loop-internals")
    assert internals.tag_name == "details"
    assert internals.get_attribute("open") is None
    assert "0123456789abcdef" not in body and long_id not in body
    internals.find_element(By.TAG_NAME, "summary").click()
    assert "0123456789abcdef" in internals.text


def test_people_pages_reach_everyone_in_the_browser(
    browser: Any, live_server: Any, demo: dict[str, Any]
) -> None:
    """Issue 47: People showed 100 of 124 with no way on; Next reaches the rest,
    people still titled by their address among them."""
    person = PageType.objects.get(name="person")
    for n in range(118):
        Page.objects.create(
            source=demo["mail"],
            slug=f"people/person-{n:03d}",
            title=f"Person {n:03d}",
            type=person,
        )
    _person(demo["mail"], "zoe@example.org", "zoe@example.org")
    _login(browser, live_server)
    _go(browser, browser.find_element(By.ID, "nav-people"))
    assert "People 1–100 of 122" in browser.find_element(By.ID, "people-pages").text
    _go(browser, browser.find_element(By.ID, "people-next"))
    names = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#people td a")]
    assert len(names) == 22 and "zoe@example.org" in names
    _go(browser, browser.find_element(By.LINK_TEXT, "zoe@example.org"))
    assert "zoe@example.org" in browser.find_element(By.ID, "content-main").text
