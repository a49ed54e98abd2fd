"""An SseParser's state, read for the parser's tests (the probe reads only the events it returns)."""

from __future__ import annotations

from netprobe.probes.sse.parser import SseParser


def last_event_id(p: SseParser) -> str | None:
    """The last event ID string (what a reconnect would send as Last-Event-ID); None if never set."""
    return p._last_id


def retry_ms(p: SseParser) -> int | None:
    """The reconnection time the server asked for, in ms; None if it never sent a valid one."""
    return p._retry


def bytes_seen(p: SseParser) -> int:
    """Every byte fed so far, BOM and line ends included."""
    return p._bytes_seen


def buffered_bytes(p: SseParser) -> int:
    """Bytes held between reads (partial line, data of the pending event); stays within the caps."""
    return len(p._head) + len(p._tail) + p._data_bytes + len(p._event_type)
