"""Suite-wide rules. In CI (NETPROBE_REQUIRE_ALL=1, set by .ci/run) a skipped test is a failure:
lab and database tests must run, not quietly skip."""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

STRICT = os.environ.get("NETPROBE_REQUIRE_ALL") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, None, None]:
    outcome = yield
    report = outcome.get_result()
    if STRICT and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.longrepr = f"skipped in CI (NETPROBE_REQUIRE_ALL=1), which counts as a failure: {reason}"
