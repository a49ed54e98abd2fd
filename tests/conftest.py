"""Suite-wide rules. In CI (NETPROBE_REQUIRE_ALL=1, set by .ci/run) a skipped test is a failure:
lab and database tests must run, not quietly skip."""

from __future__ import annotations

import os
import socket
from collections.abc import Generator, Iterator

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


@pytest.fixture
def listener() -> Iterator[int]:
    """Port of a TCP listener on 127.0.0.1 (the kernel completes handshakes; nobody accepts)."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(128)
    yield srv.getsockname()[1]
    srv.close()


@pytest.fixture
def listener6() -> Iterator[int]:
    srv = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    srv.bind(("::1", 0))
    srv.listen(128)
    yield srv.getsockname()[1]
    srv.close()


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (connects are refused)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port: int = s.getsockname()[1]
    s.close()
    return port
