"""The web console in headless Chromium against a real broker process with data.

Each page renders what the API holds without a script error; the half-message commit
button commits and the abort button ends a hanging transaction (both checked through the
API afterwards). The system's Chromium (Debian's ``chromium``) is driven by Playwright;
without it the test skips and says so. Routes this broker does not serve yet (the admin,
group and share-group APIs of other branches) must show as "not offered", never break a page.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.console_data import ConsoleData, seed

if TYPE_CHECKING:
    from playwright.sync_api import Page, Response

pytestmark = pytest.mark.e2e

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
NOT_OFFERED = ("NOT_FOUND", "METHOD_NOT_ALLOWED")


def browser_missing() -> str | None:
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    if not Path(CHROMIUM).exists():
        return "no Chromium at /usr/bin/chromium (apt-get install chromium; .ci/run does)"
    return None


@dataclass
class PageWatch:
    """What went wrong in the browser: script errors, and answers that were not a route the broker lacks."""

    errors: list[str] = field(default_factory=list)

    def on_console(self, message: object) -> None:
        kind, text = getattr(message, "type", ""), getattr(message, "text", "")
        # The browser logs every 4xx as "Failed to load resource"; those answers are judged in on_response.
        if kind == "error" and not text.startswith("Failed to load resource"):
            self.errors.append(f"console: {text}")

    def on_response(self, response: Response) -> None:
        if response.status < 400:
            return
        code = None
        with contextlib.suppress(ValueError):  # a body that is not JSON is reported below with code None
            code = response.json().get("error", {}).get("code")
        if "/v1/" not in response.url or code not in NOT_OFFERED:
            self.errors.append(f"{response.request.method} {response.url}: {response.status} {code}")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    directory = tmp_path_factory.mktemp("console")
    with BrokerProcess(f"sqlite:///{directory}/console.db") as running:
        yield running


@pytest.fixture(scope="module")
def data(broker: BrokerProcess) -> ConsoleData:
    return seed(broker.url)


@pytest.fixture(scope="module")
def browser_page(broker: BrokerProcess) -> Iterator[tuple[Page, PageWatch]]:
    missing = browser_missing()
    if missing:
        pytest.skip(f"no browser for the console test: {missing}")
    from playwright.sync_api import sync_playwright

    watch = PageWatch()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(10_000)
        page.on("console", watch.on_console)
        page.on("pageerror", lambda error: watch.errors.append(f"page error: {error}"))
        page.on("response", watch.on_response)
        yield page, watch
        browser.close()


def open_page(page: Page, url: str) -> None:
    """Load a console page and wait until its script has filled every slot."""
    from playwright.sync_api import expect

    page.goto(url)
    page.wait_for_load_state("networkidle")
    expect(page.locator("[aria-busy=true]")).to_have_count(0)


def api_offers(url: str, method: str, path: str) -> bool:
    answer = httpx.request(method, f"{url}{path}")
    return answer.status_code not in (404, 405) or answer.json()["error"]["code"] not in NOT_OFFERED


def test_every_page_renders_the_brokers_data(
    broker: BrokerProcess, data: ConsoleData, browser_page: tuple[Page, PageWatch]
) -> None:
    from playwright.sync_api import expect

    page, watch = browser_page
    url = broker.url

    open_page(page, f"{url}/console")
    topics = httpx.get(f"{url}/v1/topics").json()["topics"]  # orders, payments (and DLQ.shipping with share groups)
    expect(page.locator('[data-figure="topics"]')).to_have_text(str(len(topics)))
    expect(page.locator('[data-slot="half-states"]')).to_contain_text("PREPARED")
    expect(page.locator('[data-slot="topic-rates"]')).to_contain_text("orders")

    open_page(page, f"{url}/console/topics?topic=orders")
    detail = page.locator('[data-slot="topic-detail"]')
    expect(detail.locator("tbody tr")).to_have_count(3)  # orders has three partitions
    blocking = httpx.get(f"{url}/v1/topics/orders").json()["partitions"][1].get("blocking_txn_id")
    # The admin API names the transaction holding the LSO back; without it the page still says one does.
    expect(detail).to_contain_text(blocking or "held back by an open transaction")
    committed_rows = page.locator('[data-slot="messages"] tbody tr').count()
    assert committed_rows > 0
    page.select_option("#browse-partition", "1")  # the partition the hanging transaction wrote to
    page.wait_for_load_state("networkidle")
    page.select_option("#browse-isolation", "read_uncommitted")
    expect(page.locator('[data-slot="messages"]')).to_contain_text("unstable")  # its message, past the LSO

    open_page(page, f"{url}/console/groups?group=billing")
    expect(page.locator('[data-slot="group-offsets"] tbody tr')).to_have_count(3)
    expect(page.locator('[data-slot="group-offsets"]')).to_contain_text("Total lag")
    members = page.locator('[data-slot="group-members"]')
    if data.groups_offered:  # a live member, with its assignment
        expect(page.locator('[data-slot="group-list"]')).to_contain_text("billing")
        expect(members).to_contain_text("orders-0")
    else:
        expect(members).to_contain_text("Not offered by this broker")

    open_page(page, f"{url}/console/share-groups?group=shipping")
    share = page.locator('[data-slot="share-detail"]')
    expect(share).to_contain_text("orders" if data.share_groups_offered else "Not offered by this broker")

    open_page(page, f"{url}/console/half-messages")
    expect(page.locator('[data-slot="half-list"] tbody tr')).to_have_count(5)

    open_page(page, f"{url}/console/transactions")
    listing = page.locator('[data-slot="txn-list"]')
    if api_offers(url, "GET", "/v1/transactions"):  # the admin API: hanging ones first
        expect(listing.locator("tbody tr").first).to_have_attribute("data-txn", data.hanging_txn_id)
    else:
        expect(listing).to_contain_text("Not offered by this broker")

    assert watch.errors == []


def test_the_commit_button_commits_a_half_message(
    broker: BrokerProcess, data: ConsoleData, browser_page: tuple[Page, PageWatch]
) -> None:
    from playwright.sync_api import expect

    page, watch = browser_page
    message_id = data.prepared_ids[0]
    open_page(page, f"{broker.url}/console/half-messages?id={message_id}")
    detail = page.locator('[data-slot="half-detail"]')
    detail.get_by_role("button", name="Commit").click()
    page.locator("#confirm-dialog").get_by_role("button", name="Commit").click()
    expect(page.locator(".toast")).to_contain_text(f"Half message {message_id}: COMMITTED")
    expect(detail).to_contain_text("COMMITTED")

    answer = httpx.get(f"{broker.url}/v1/half-messages/{message_id}").json()
    assert answer["state"] == "COMMITTED"
    assert answer["resolved_by"] == "producer"  # the console is a client like any other
    assert httpx.get(f"{broker.url}/v1/half-messages/{data.prepared_ids[1]}").json()["state"] == "PREPARED"
    assert watch.errors == []


def test_the_abort_button_ends_a_hanging_transaction(
    broker: BrokerProcess, data: ConsoleData, browser_page: tuple[Page, PageWatch]
) -> None:
    from playwright.sync_api import expect

    page, watch = browser_page
    txn_id = data.hanging_txn_id
    before = httpx.get(f"{broker.url}/v1/topics/orders").json()["partitions"][1]
    assert before["last_stable_offset"] < before["high_watermark"]  # it holds orders-1 back

    open_page(page, f"{broker.url}/console/transactions?txn={txn_id}")
    page.locator(f'[data-slot="txn-detail"] button[data-abort="{txn_id}"]').click()
    page.locator("#confirm-dialog").get_by_role("button", name="Abort").click()
    expect(page.locator(".toast").last).to_contain_text(f"Transaction {txn_id}: ABORTED")
    expect(page.locator('[data-slot="txn-detail"]')).to_contain_text("ABORTED")

    assert httpx.get(f"{broker.url}/v1/transactions/{txn_id}").json()["state"] == "ABORTED"
    after = httpx.get(f"{broker.url}/v1/topics/orders").json()["partitions"][1]
    assert after["last_stable_offset"] == after["high_watermark"]  # read_committed consumers go on
    assert watch.errors == []
