"""Fixtures of the browser suite: a headless Chromium (Debian's ``chromium`` and
``chromium-driver``, installed by ``.ci/run``) driven by Selenium, and a screenshot
of the page a failed test was on (``var/test-artifacts/``)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(autouse=True)
def _live_server_helper(request: pytest.FixtureRequest) -> Iterator[None]:
    """pytest-django's helper of the same name, overridden for this folder so that
    ``restore_migrated_rows`` is set up before ``transactional_db``: the flush that
    ends a live-server test would otherwise remove the Schema and the ``default``
    source that data migrations installed in the reused test database."""
    if "live_server" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("restore_migrated_rows")
    request.getfixturevalue("transactional_db")
    live_server = request.getfixturevalue("live_server")
    live_server._live_server_modified_settings.enable()
    yield
    live_server._live_server_modified_settings.disable()


@pytest.fixture
def browser(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A headless Chromium WebDriver. A missing system browser fails the test with
    the install command (``.ci/run`` installs it; a skip would hide a broken
    install), as the Dovecot fixture does for the IMAP suite."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.fail(
            "chromium and chromium-driver are not installed: apt-get install -y "
            "chromium chromium-driver (.ci/run does)."
        )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-extensions",
        "--window-size=1200,900",
        "--lang=en-US",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(
        options=options, service=webdriver.ChromeService(executable_path=driver_path)
    )
    # Pages answer in well under a second, but a loaded 2-core CI box is slower.
    driver.implicitly_wait(20)
    try:
        yield driver
    finally:
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(ARTIFACTS / f"{request.node.name}.png"))
        driver.quit()
