"""Headless Chromium (Debian's, driven by Playwright) through the dashboard, as a process of its own so
it can run inside a lab namespace (`ip netns exec … python3 -m tests.support.browse ARGS.json`):
opens the overview, follows its first link to a target page, visits the agents page, and writes
screenshots plus every request the pages made (for the no-external-requests check) as JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"


def browse(url: str, user: str, secret: str, out: Path) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    requests: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            context = browser.new_context(http_credentials={"username": user, "password": secret},
                                          viewport={"width": 1400, "height": 900}, java_script_enabled=False)
            page = context.new_page()
            page.on("request", lambda r: requests.append(r.url))
            first = page.goto(url, wait_until="load")
            statuses = {"overview": first.status if first else 0}
            page.screenshot(path=str(out / "overview.png"), full_page=True)
            overview_bar = page.locator("td svg").first
            overview_bar.screenshot(path=str(out / "overview_bar.png"))
            link = page.locator('a[href*="/target/"]').first
            href = link.get_attribute("href")
            with page.expect_navigation(wait_until="load"):
                link.click()
            target_url = page.url
            page.screenshot(path=str(out / "target.png"), full_page=True)
            span = page.locator('nav.spans a:text("1 day")')     # the lab's rounds are minutes old
            with page.expect_navigation(wait_until="load"):
                span.click()
            span_url = page.url
            page.locator("main svg").first.screenshot(path=str(out / "target_chart.png"))
            agents = page.goto(url + "agents", wait_until="load")
            statuses["agents"] = agents.status if agents else 0
            agents_text = page.inner_text("main")
            page.screenshot(path=str(out / "agents.png"), full_page=True)
        finally:
            browser.close()
    return {"requests": requests, "statuses": statuses, "href": href, "target_url": target_url,
            "span_url": span_url, "agents_text": agents_text}


if __name__ == "__main__":
    args = json.loads(Path(sys.argv[1]).read_text())
    got = browse(args["url"], args["user"], args["secret"], Path(args["out"]))
    print(json.dumps(got))
