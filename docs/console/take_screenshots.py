"""Screenshots of the console for docs/console.md: a broker with data, each page in headless Chromium.

    PYTHONPATH=. python docs/console/take_screenshots.py [--out docs/console] [--url URL]

Without --url it starts a broker of its own on a fresh SQLite database, seeds it
(tests/support/console_data.py) and lets the checker discard one half message so the
check history and the recheck button have something to show. With --url it
photographs that broker as it is. Uses the system's Chromium (/usr/bin/chromium).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect, sync_playwright

from tests.support.broker_process import BrokerProcess
from tests.support.console_data import seed

HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"


def settle(page: Page) -> None:
    """Wait until every slot and figure the page's script fills has been filled (a first paint shows "…")."""
    page.wait_for_load_state("networkidle")
    expect(page.locator("[aria-busy=true]")).to_have_count(0)
    page.wait_for_function("() => [...document.querySelectorAll('[data-figure]')].every((n) => n.textContent.trim() !== '…')")


def discard_one(url: str) -> str:
    """A half message whose producer group has no listener: the checker gives up on it (DISCARDED)."""
    body = {"topic": "payments", "producer_group": "refunds", "key": "refund-7", "value": {"refund": 7}}
    message_id = str(httpx.post(f"{url}/v1/half-messages", json=body).json()["message_id"])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if httpx.get(f"{url}/v1/half-messages/{message_id}").json()["state"] == "DISCARDED":
            return message_id
        time.sleep(0.5)
    raise TimeoutError("the checker did not discard the half message")


def traffic(url: str) -> None:
    """Some messages in and out between the overview's two samples of /metrics, so it has rates to show."""
    with httpx.Client(base_url=url) as client:
        for batch in range(4):
            messages = [{"key": f"customer-{n % 7}", "value": {"order": 5000 + batch * 100 + n}} for n in range(100)]
            client.post("/v1/topics/orders/messages", json={"messages": messages}).raise_for_status()
            for partition in range(3):
                client.get(f"/v1/topics/orders/partitions/{partition}/messages", params={"offset": 0}).raise_for_status()
            time.sleep(0.5)


def photograph(
    url: str, out: Path, pages: list[str], prepared_id: str | None, discarded_id: str | None, hanging_txn: str | None
) -> None:
    shots = [
        ("overview", "/console"),
        ("topics", "/console/topics?topic=orders&partition=1&offset=26&count=12&isolation=read_uncommitted"),
        ("groups", "/console/groups?group=billing"),
        ("share-groups", "/console/share-groups?group=shipping"),
        ("half-messages", f"/console/half-messages?id={discarded_id or prepared_id or ''}"),
        ("transactions", f"/console/transactions?state=any&txn={hanging_txn or ''}"),
    ]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1440, "height": 900}, device_scale_factor=1)
        page.goto(f"{url}/console")  # a first sample of /metrics, so the overview shows rates
        settle(page)
        for name, path in shots:
            if pages and name not in pages:
                continue
            page.goto(f"{url}{path}")
            settle(page)
            if name == "overview":
                traffic(url)
                page.click("#refresh")  # the second sample: rates between the two
                settle(page)
            page.screenshot(path=str(out / f"{name}.png"), full_page=True)
            print(f"{out / f'{name}.png'}")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--url", help="photograph this broker instead of starting one")
    parser.add_argument("--pages", nargs="*", default=[], help="only these pages (overview, topics, groups, ...)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.url:
        photograph(args.url, args.out, args.pages, None, None, None)
        return
    with tempfile.TemporaryDirectory() as directory:
        broker = BrokerProcess(
            f"sqlite:///{directory}/console.db",
            transaction_timeout_seconds=1,
            check_interval_seconds=1,
            check_max=2,
        )
        with broker:
            data = seed(broker.url, prepared_immunity_seconds=3600)
            discarded = discard_one(broker.url)
            photograph(broker.url, args.out, args.pages, data.prepared_ids[0], discarded, data.hanging_txn_id)


if __name__ == "__main__":
    main()
