"""Incremental event-stream parser (WHATWG HTML, "Server-sent events": event stream interpretation).

The stream is scanned as bytes and each complete line decoded on its own. That is the same as decoding the
whole stream first and then splitting it: CR and LF are ASCII, never part of a multi-byte UTF-8 sequence,
so a decoder meeting one mid-sequence emits U+FFFD and resynchronises there either way. Working on bytes
means a character split across reads needs no decoder state, and sizes and caps are exact wire bytes.

Lines end at CR, LF or CRLF, found with `bytes.find` (never `splitlines()`, which also splits on U+2028,
U+0085, form feed… inside JSON). Memory is bounded by the caps whatever is fed: the unterminated tail of
a line, and the lines of the event being assembled, each stay within their cap or `SseTooLarge` is raised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from netprobe.errors import NetprobeError

_BOM = b"\xef\xbb\xbf"
_LF = 0x0A
_COLON = 0x3A
# Browsers keep the reconnection time in a 64-bit integer; longer digit strings are hostile, not a delay
# (and int() refuses more than 4300 digits anyway).
_MAX_RETRY_DIGITS = 18


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event.

    `id` is the last event ID in force at dispatch (None until an `id` field was seen), `retry` the
    reconnection time in force at dispatch (None until a valid `retry` field was seen). `t_ns` is the
    timestamp of the read holding the dispatching blank line, `first_t_ns` that of the read where the
    event's first field line began. `size` counts the wire bytes of the event's field lines with their line
    ends; comments, the BOM and the dispatching blank line are not counted.
    """

    data: str
    event: str = "message"
    id: str | None = None
    retry: int | None = None
    t_ns: int = 0
    first_t_ns: int = 0
    size: int = 0


@dataclass(frozen=True, slots=True)
class SseComment:
    """A comment line: `text` is everything after the colon, verbatim; timed, never content."""

    text: str
    t_ns: int


class SseTooLarge(NetprobeError):
    """An event or a single line passed its cap. `events` holds what the failing read dispatched before."""

    def __init__(self, message: str, events: Sequence[SseEvent | SseComment] = ()) -> None:
        super().__init__(message)
        self.events: list[SseEvent | SseComment] = list(events)


class SseParser:
    """Feed it reads as they arrive; it returns what each read completed.

    `max_event_bytes` caps the field lines of one event (see `SseEvent.size`); `max_line_bytes` caps any
    single line, comments included (default: `max_event_bytes`). After `SseTooLarge` the parser is
    spent: buffers are dropped and every later `feed` raises again.
    """

    def __init__(self, max_event_bytes: int = 1 << 20, max_line_bytes: int | None = None) -> None:
        if max_event_bytes <= 0:
            raise ValueError("max_event_bytes must be positive")
        if max_line_bytes is not None and max_line_bytes <= 0:
            raise ValueError("max_line_bytes must be positive")
        self._max_event = max_event_bytes
        self._max_line = max_event_bytes if max_line_bytes is None else max_line_bytes
        self._at_start = True            # a BOM may still come
        self._head = b""                 # first bytes held while they could be a split BOM
        self._head_t = 0
        self._tail = bytearray()         # unterminated line carried to the next read
        self._tail_t = 0                 # timestamp of the read where the tail began
        self._skip_lf = False            # the last read ended in CR: an LF first in the next closes a CRLF
        self._skip_lf_counts = False     # …and that CR ended a field line, so the LF belongs to the event
        self._data: list[bytes] = []
        self._data_bytes = 0
        self._event_type = b""
        self._in_event = False
        self._event_size = 0
        self._first_t = 0
        self._last_id: str | None = None
        self._retry: int | None = None
        self._bytes_seen = 0
        self._failed: SseTooLarge | None = None
        self._closed = False

    def feed(self, chunk: bytes, t_ns: int) -> list[SseEvent | SseComment]:
        """Parse one network read received at `t_ns`; return the events and comments it completed."""
        if self._failed is not None:
            raise SseTooLarge(str(self._failed))
        if self._closed:
            raise RuntimeError("feed() after close()")
        out: list[SseEvent | SseComment] = []
        if not chunk:
            return out
        self._bytes_seen += len(chunk)
        chunk = bytes(chunk)
        if self._at_start:
            joined = self._head + chunk
            if len(joined) < len(_BOM) and _BOM.startswith(joined):
                if not self._head:
                    self._head_t = t_ns
                self._head = joined
                return out
            self._at_start = False
            if joined.startswith(_BOM):
                chunk = joined[len(_BOM):]
            elif self._head:
                # The held bytes were no BOM but the start of the first line, begun in an earlier read.
                self._tail += self._head
                self._tail_t = self._head_t
            self._head = b""
            if not chunk:
                return out
        try:
            self._scan(chunk, t_ns, out)
        except SseTooLarge as exc:
            self._fail(exc, out)
        return out

    def close(self) -> bool:
        """End of stream: drop what is pending; True if an event was cut short (the caller's `truncated`).

        An event is cut short when data lines are buffered without their blank line, or when the stream
        stops inside a `data` line (the usual way a cut connection looks).
        """
        if self._closed:
            return False
        self._closed = True
        if self._failed is not None:
            return False
        truncated = bool(self._data)
        if not truncated and self._tail:
            colon = self._tail.find(b":")
            name = self._tail if colon < 0 else self._tail[:colon]
            truncated = name == b"data"
        self._tail = bytearray()
        self._head = b""
        self._reset_event()
        return truncated

    # --- internals -------------------------------------------------------------------------------------

    def _scan(self, chunk: bytes, t_ns: int, out: list[SseEvent | SseComment]) -> None:
        n = len(chunk)
        pos = 0
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == _LF:
                pos = 1
                if self._skip_lf_counts:
                    self._event_size += 1
        # Next CR / LF positions are cached so each byte is searched once: O(n) per read, not O(lines × n).
        lf = chunk.find(b"\n", pos)
        cr = chunk.find(b"\r", pos)
        tail = self._tail
        while lf >= 0 or cr >= 0:
            if cr < 0 or 0 <= lf < cr:
                end, nxt = lf, lf + 1
            elif cr + 1 < n:
                end = cr
                nxt = cr + 2 if chunk[cr + 1] == _LF else cr + 1
            else:
                end, nxt = cr, cr + 1
                self._skip_lf = True
            if tail:
                if len(tail) + end - pos > self._max_line:
                    raise SseTooLarge(f"an SSE line passed {self._max_line} bytes")
                line = bytes(tail) + chunk[pos:end]
                start_t = self._tail_t
                tail.clear()
            else:
                line = chunk[pos:end]
                start_t = t_ns
            counted = self._line(line, nxt - end, start_t, t_ns, out)
            if self._skip_lf:
                self._skip_lf_counts = counted
            pos = nxt
            if 0 <= lf < pos:
                lf = chunk.find(b"\n", pos)
            if 0 <= cr < pos:
                cr = chunk.find(b"\r", pos)
        if pos < n:
            if len(tail) + n - pos > self._max_line:
                raise SseTooLarge(f"an SSE line passed {self._max_line} bytes")
            if not tail:
                self._tail_t = t_ns
            tail += chunk[pos:]

    def _line(self, line: bytes, eol: int, start_t: int, t_ns: int,
              out: list[SseEvent | SseComment]) -> bool:
        """Interpret one complete line; True when it was a field line (counted in the event's size)."""
        if len(line) > self._max_line:
            raise SseTooLarge(f"an SSE line passed {self._max_line} bytes")
        if not line:
            self._dispatch(t_ns, out)
            return False
        if line[0] == _COLON:
            out.append(SseComment(line[1:].decode("utf-8", "replace"), t_ns))
            return False
        if not self._in_event:
            self._in_event = True
            self._first_t = start_t
        self._event_size += len(line) + eol
        if self._event_size > self._max_event:
            raise SseTooLarge(f"an SSE event passed {self._max_event} bytes")
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name = line[:colon]
            value = line[colon + 2:] if line[colon + 1:colon + 2] == b" " else line[colon + 1:]
        if name == b"data":
            self._data.append(value)
            self._data_bytes += len(value) + 1
        elif name == b"event":
            self._event_type = value
        elif name == b"id":
            if b"\x00" not in value:
                self._last_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            # bytes.isdigit() is ASCII-only, exactly the spec's "only ASCII digits" (and False when empty).
            if value.isdigit() and len(value) <= _MAX_RETRY_DIGITS:
                self._retry = int(value)
        return True

    def _dispatch(self, t_ns: int, out: list[SseEvent | SseComment]) -> None:
        if self._data:
            out.append(SseEvent(
                data=b"\n".join(self._data).decode("utf-8", "replace"),
                event=self._event_type.decode("utf-8", "replace") or "message",
                id=self._last_id,
                retry=self._retry,
                t_ns=t_ns,
                first_t_ns=self._first_t,
                size=self._event_size,
            ))
        self._reset_event()

    def _reset_event(self) -> None:
        self._data = []
        self._data_bytes = 0
        self._event_type = b""
        self._in_event = False
        self._event_size = 0

    def _fail(self, exc: SseTooLarge, out: list[SseEvent | SseComment]) -> None:
        exc.events = list(out)
        self._failed = exc
        self._tail = bytearray()
        self._head = b""
        self._reset_event()
        raise exc
