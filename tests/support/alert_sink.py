"""A stand-in for the alert Dispatcher that keeps what the engine submits (engine and quorum tests)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from netprobe.alerts.formats import Notification


class Recorder:
    """Stands in for the Dispatcher: keeps what the engine submits."""

    def __init__(self) -> None:
        self.sent: list[tuple[Notification, tuple[str, ...]]] = []

    def submit(self, n: Notification, names: Sequence[str]) -> None:
        self.sent.append((n, tuple(names)))

    def transitions(self) -> list[tuple[str, str, datetime]]:
        return [(n.state, n.target, n.window_end) for n, _ in self.sent if not n.repeat]
