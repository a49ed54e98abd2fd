"""Suite-wide rules. In CI (NETPROBE_REQUIRE_ALL=1, set by .ci/run) a skipped test is a failure:
lab and database tests must run, not quietly skip."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path

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


# The agent and the probe commands run on netprobe.runloop's loop (uvloop on Linux): the tests of what
# touches the loop directly (raw sockets and their readers, timers, transports) run on both loops.
BOTH_LOOPS = {"test_icmp_engine.py", "test_mtr.py", "test_tcp.py", "test_owd_probe.py", "test_owd_round.py",
              "test_http1.py", "test_sse_probe.py", "test_sse_idle.py", "test_uplink.py"}


LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def pytest_asyncio_loop_factories(config: pytest.Config,
                                  item: pytest.Item) -> Mapping[str, LoopFactory] | None:
    if Path(str(item.path)).name not in BOTH_LOOPS:
        return None
    from netprobe import runloop

    return {"asyncio": asyncio.new_event_loop, "runloop": runloop.new_event_loop}


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
