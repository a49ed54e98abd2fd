"""The integration tests share one running stack (tests/support/stack.py), started once per session."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.support.alertmanager import binary
from tests.support.stack import Stack, stack

MISSING = [b for b in ("prometheus", "promtool", "victoria-metrics") if shutil.which(b) is None]
if binary() is None:
    MISSING.append("prometheus-alertmanager")


@pytest.fixture(autouse=True)
def _needs() -> None:
    """What every test here needs; missing, the test fails and says what (they must run, not skip)."""
    if MISSING:
        pytest.fail(f"not installed (.ci/run installs them): {', '.join(MISSING)}")
    if os.geteuid() != 0:
        pytest.fail("the agent's icmp and mtr probes need root")


@pytest.fixture(scope="session")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with stack(tmp_path_factory.mktemp("stack")) as s:
        yield s
