"""Import commands on a database failure (issue 46): one line saying what failed
and to run the same command again, not a traceback. The failure is real: the
server ends the command's database session, as a restart or failover does. The
tests are transactional (a session ended inside the test's transaction could not be
rolled back), so the rows data migrations installed are put back after each."""

from __future__ import annotations

from io import StringIO
from typing import TYPE_CHECKING

import pytest
from django.core.management import CommandError, call_command
from django.db import OperationalError, connection

from tests.factories import one_message_mbox

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("command", ["import_mail", "import_markdown"])
def test_an_import_command_ends_with_one_line_and_how_to_resume_on_a_database_failure(
    restore_migrated_rows: None,
    transactional_db: None,
    command: str,
    tmp_path: Path,
) -> None:
    """The server ends the command's database session (as a restart or failover
    does): the command ends with one line saying what failed and to run it again,
    not a traceback (issue 46)."""
    if command == "import_mail":
        args = [str(one_message_mbox(tmp_path)), "--source", "archive"]
    else:
        (tmp_path / "note.md").write_text("---\ntitle: Note\n---\nBody.\n")
        args = [str(tmp_path), "--source", "notes", "--no-embed"]
    with pytest.raises(OperationalError), connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    try:
        with pytest.raises(CommandError) as caught:
            call_command(command, *args, stdout=StringIO(), stderr=StringIO())
    finally:
        connection.close()  # the next query opens a new session
    message = str(caught.value)
    assert "\n" not in message
    assert "the database failed (OperationalError" in message
    assert message.endswith("run the same command again to resume.")
