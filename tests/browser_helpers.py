"""Headless Chromium for the web UI tests (tests/e2e/test_webui*.py): Debian's chromium + chromedriver.

Only what more than one browser test uses: the browser itself, waits that treat a missing element
as "not yet", and a screenshot left in the test's tmp folder when a check fails.
"""

from __future__ import annotations

import contextlib
import shutil
import urllib.request
from pathlib import Path

import process_helpers as ph
import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
CHROME_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,1000",
]
PAGE_TIMEOUT_S = 20.0

needs_browser = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
    reason="chromium/chromedriver missing: run `make browser`",
)


@contextlib.contextmanager
def chromium(profile: Path, window_size: str = "1400,1000"):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROME_FLAGS:
        options.add_argument(flag if not flag.startswith("--window-size") else f"--window-size={window_size}")
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(PAGE_TIMEOUT_S)
    driver.set_script_timeout(PAGE_TIMEOUT_S)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@contextlib.contextmanager
def screenshot_on_failure(driver, path: Path):
    try:
        yield
    except (AssertionError, WebDriverException) as exc:
        with contextlib.suppress(WebDriverException):
            driver.switch_to.default_content()
            driver.save_screenshot(str(path))
        raise AssertionError(f"{exc}\n(screenshot: {path})") from exc


def wait_for(driver, find, timeout_s: float, what: str):
    """`find(driver)` until it returns something truthy; element lookups that fail count as 'not yet'."""

    def attempt():
        try:
            return find(driver)
        except WebDriverException:
            return None

    return ph.wait_until(attempt, timeout_s, what)


def button(driver, text: str):
    matches = [b for b in driver.find_elements(By.TAG_NAME, "button") if b.text.strip().upper() == text]
    return matches[0] if matches and matches[0].is_displayed() else None


def open_custom_parameters(driver, field: str, timeout_s: float = 10):
    """Expand the start form's "Custom parameters" and return `field`'s input once it shows.

    Clicked only once the page is whole (Locust's form and Loadline's group headings), so nothing moves
    under the click; a failure says whether the click did not open the section or the field stayed hidden."""
    wait_for(driver, lambda d: d.find_elements(By.CLASS_NAME, "loadline-group"), timeout_s, "the option groups")
    summary = wait_for(driver, lambda d: button(d, "CUSTOM PARAMETERS"), timeout_s, "the Custom parameters button")
    summary.click()
    try:
        return wait_for(
            driver,
            lambda d: d.find_element(By.NAME, field).is_displayed() and d.find_element(By.NAME, field),
            timeout_s,
            f"the custom parameter {field}",
        )
    except AssertionError as exc:
        expanded = summary.get_attribute("aria-expanded")
        raise AssertionError(f"{exc} (the section's aria-expanded: {expanded})") from None


def tab(driver, title: str):
    found = [t for t in driver.find_elements(By.CSS_SELECTOR, "[role=tab]") if t.text.strip().upper() == title]
    return found[0] if found else None


def type_into(driver, name: str, value: str) -> None:
    box = driver.find_element(By.NAME, name)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(value)


def fetch(url: str, timeout_s: float = 10) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read()
