"""Names and handler paths of the test-only job kinds (no model imports, so settings
modules can import it)."""

TEST_KINDS = {
    # Writes raw records of params.source_id: keys may queue it on their own source.
    "test_items": {"handler": "tests.jobs.handlers.import_items", "reach": "source"},
    "test_flaky": "tests.jobs.handlers.flaky",
    "test_broken": "tests.jobs.handlers.broken",
    "test_import_mail_hold": "tests.jobs.handlers.import_mail_holding",
    "test_stages": "tests.jobs.handlers.two_stages",
}
