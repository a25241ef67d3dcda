"""Google sync: contacts → calendar → gmail (SPEC §6.1).

Each service is a ``Connector``: ``fetch_changes`` talks to Google (outside any
transaction) and yields batches; ``apply`` writes them through the page services
and the ledger. Cursors live in ``Source.cursor["google"][service]`` and are saved after
every applied batch, so a killed sync resumes where it stopped.

- Contacts: every connection → a person page ``people/<slug>`` (aliases: all
  emails and the display name). A page this connector did not write (a human's, or
  one already holding the address) is never overwritten.
- Calendar: events of the window 90 days back → 60 ahead (``singleEvents``) →
  ``meeting`` pages ``calendar/YYYY/MM/…``; attendees that resolve to person pages
  get ``attended`` relations; cancelled events soft-delete their page; a moved
  event keeps its page (found through the ledger).
- Gmail: the first sync backfills ``newer_than:90d`` newest first, resumable by
  page token, anchored on the profile ``historyId`` taken before listing; later
  syncs read ``history.list`` from the stored ``historyId``; an expired one (404)
  re-anchors and re-lists the window (bounded). A batch of threads is one
  transaction: one ``pages_write`` for the thread pages
  (``connectors.mail.store.threads_store``), one for new person pages
  (``people_store``) and loop detection.
  A message that cannot be parsed is held (``HeldItem``) and the rest imports.

One module per service (``contacts``, ``calendar``, ``gmail``) plus ``base`` and
``run`` (the entry point ``google_sync``); this package re-exports their public names.
"""

from connectors.google.sync.base import (
    ACTOR,
    CALENDAR_FUTURE_DAYS,
    CALENDAR_PAST_DAYS,
    GMAIL_WINDOW_DAYS,
    RELIST_PAGES_PER_RUN,
    THREAD_BATCH,
)
from connectors.google.sync.calendar import CalendarConnector, meeting_attendee_link
from connectors.google.sync.contacts import ContactsConnector
from connectors.google.sync.gmail import GmailConnector
from connectors.google.sync.run import SERVICES, google_sync

__all__ = [
    "ACTOR",
    "CALENDAR_FUTURE_DAYS",
    "CALENDAR_PAST_DAYS",
    "CalendarConnector",
    "ContactsConnector",
    "GMAIL_WINDOW_DAYS",
    "GmailConnector",
    "RELIST_PAGES_PER_RUN",
    "SERVICES",
    "THREAD_BATCH",
    "google_sync",
    "meeting_attendee_link",
]
