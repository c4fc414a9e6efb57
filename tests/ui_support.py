"""A headless chromium to look at the web app with."""
from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def browser() -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1360,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def follow(driver, element) -> None:
    """Clicks a link or submit button and waits until the page it leads to has replaced this one,
    so nothing is read from the page being left."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    leaving = driver.find_element(By.TAG_NAME, "html")

    def left(_driver) -> bool:
        try:
            leaving.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as exc:
            # Asked about a node just as its document goes, chromedriver can answer with this
            # inspector error instead of a stale reference: the page has been left all the same.
            if "does not belong to the document" in str(exc):
                return True
            raise
        return False

    element.click()
    WebDriverWait(driver, 30).until(left)
