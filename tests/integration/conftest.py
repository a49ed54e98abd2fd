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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            if MISSING:
                item.add_marker(pytest.mark.skip(reason=f"not installed (.ci/run installs them): {MISSING}"))
            if os.geteuid() != 0:
                item.add_marker(pytest.mark.skip(reason="the agent's icmp and mtr probes need root"))


@pytest.fixture(scope="session")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with stack(tmp_path_factory.mktemp("stack")) as s:
        yield s
