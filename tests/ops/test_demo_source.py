"""``bin/demo PATH`` (``manage.py demo``) on a folder whose name derives the id of a
source that is not a mailbox (issue 47)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from brain.models import RawRecord

pytestmark = pytest.mark.django_db

MAIL = """From: Dana Reyes <dana@example.org>
To: me@example.org
Subject: Budget
Date: Mon, 30 Nov 2026 09:00:00 +0000
Message-ID: <budget@example.org>

Could you send the budget?
"""


def test_demo_on_a_folder_named_default_refuses_with_the_source_to_pass(
    tmp_path: Path, default_source
) -> None:
    """The folder ``default`` derived the harness-notes source's id and the import
    crashed with a traceback; the demo refuses and names the ``--source``."""
    folder = tmp_path / "default"
    folder.mkdir()
    (folder / "budget.eml").write_text(MAIL)
    with pytest.raises(CommandError) as refused:
        call_command("demo", str(folder), owner=["me@example.org"], no_serve=True)
    message = str(refused.value)
    assert "the folder name 'default' gives the source id 'default'" in message
    assert "Pass --source default-mail " in message
    assert not RawRecord.objects.filter(source_id="default").exists()
