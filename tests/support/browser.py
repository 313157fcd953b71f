"""Real headless Chromium for browser tests (the `browser` fixture, loaded for the whole
suite by the root conftest.py as a plugin):
Debian's chromium + chromium-driver, installed by scripts/setup.sh. Test-only: selenium is
a dev dependency, and nothing at runtime imports this."""

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} missing: run scripts/setup.sh")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000", f"--user-data-dir={tmp_path / 'profile'}"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def log_in(driver: webdriver.Chrome, base_url: str, username: str, password: str) -> None:
    """Log in through the real login form, as a person would."""
    driver.get(f"{base_url}/accounts/login/")
    driver.find_element(By.ID, "id_username").send_keys(username)
    driver.find_element(By.ID, "id_password").send_keys(password)
    driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    WebDriverWait(driver, 30).until(
        lambda d: "/accounts/login/" not in d.current_url, "login did not redirect"
    )


def pick_autocomplete(driver: webdriver.Chrome, within, typed: str, choice: str) -> None:
    """In the admin's autocomplete (select2) inside `within`: type `typed`, click `choice`."""
    within.find_element(By.CSS_SELECTOR, ".select2-selection").click()
    driver.find_element(By.CSS_SELECTOR, ".select2-search__field").send_keys(typed)
    WebDriverWait(driver, 30).until(
        lambda d: [
            o
            for o in d.find_elements(By.CSS_SELECTOR, ".select2-results__option")
            if o.text == choice
        ],
        f"the autocomplete did not offer {choice}",
    )[0].click()
