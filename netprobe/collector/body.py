"""Reading an ingest body under a size cap: raw bytes and, for gzip, inflated bytes both counted as they
arrive, so neither a chunked body nor a gzip bomb gets past the cap; then strict JSON."""

from __future__ import annotations

import json
import zlib
from collections.abc import AsyncIterable
from typing import Any

import orjson

from netprobe.errors import NetprobeError

CHUNK = 64 * 1024


class Rejected(NetprobeError):
    """An ingest request refused: HTTP `status`, a metrics `reason`, and a message for the client."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message


def too_large(cap: int) -> Rejected:
    return Rejected(413, "too_large", f"request body over the limit of {cap} bytes "
                    f"({cap >> 20} MiB, collector.max_body_mb; counted after decompression too)")


class _Inflater:
    """gzip (several members allowed) or zlib 'deflate', never producing more than `cap` bytes."""

    def __init__(self, encoding: str, cap: int) -> None:
        self._wbits = 16 + zlib.MAX_WBITS if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._d = zlib.decompressobj(self._wbits)
        self._cap = cap
        self._encoding = encoding
        self.size = 0

    def feed(self, data: bytes, out: list[bytes]) -> None:
        try:
            while data:
                if self._d.eof:     # next gzip member (or trailing garbage, which fails below)
                    self._d = zlib.decompressobj(self._wbits)
                # max_length: at most one byte past the cap per call, whatever the compression ratio
                piece = self._d.decompress(data, self._cap - self.size + 1)
                self.size += len(piece)
                if self.size > self._cap:
                    raise too_large(self._cap)
                out.append(piece)
                data = self._d.unconsumed_tail or (self._d.unused_data if self._d.eof else b"")
        except zlib.error as exc:
            raise Rejected(400, "bad_encoding", f"body is not valid {self._encoding} data: {exc}") from None

    def finish(self) -> None:
        if not self._d.eof:
            raise Rejected(400, "bad_encoding", f"body ends inside its {self._encoding} data (truncated)")


def content_encoding(header: str | None) -> str:
    encoding = (header or "identity").strip().lower()
    if encoding in ("", "identity"):
        return "identity"
    if encoding in ("gzip", "x-gzip", "deflate"):
        return encoding
    raise Rejected(415, "bad_encoding", f"Content-Encoding {header!r} is not supported; use gzip or none")


async def read_capped(chunks: AsyncIterable[bytes], content_length: int | None, encoding: str,
                      cap: int) -> bytes:
    """The decoded body, or Rejected (413 over `cap`, 400/415 for a bad encoding)."""
    if content_length is not None and content_length > cap:
        raise too_large(cap)
    inflater = _Inflater(encoding, cap) if encoding != "identity" else None
    out: list[bytes] = []
    raw = 0
    async for chunk in chunks:
        raw += len(chunk)
        if raw > cap:
            raise too_large(cap)
        if inflater is None:
            out.append(chunk)
        else:
            inflater.feed(chunk, out)
    if inflater is not None:
        inflater.finish()
    return b"".join(out)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# A run of 19 digits: orjson reads an integer outside [-2**63, 2**64) as a float, where json keeps it
# exact. Digits map to "0", anything else to " "; one C-speed pass, no regex backtracking.
_DIGITS = bytes(ord("0") if chr(c).isdigit() and c < 128 else ord(" ") for c in range(256))
_LONG_RUN = b"0" * 19


def orjson_reads_alike(data: bytes) -> bool:
    """False when `data` holds an integer orjson would read differently from the json module (or might:
    any run of 19 digits). Whatever orjson refuses the json module must still judge: it takes NaN and
    lone surrogates, and words its errors differently."""
    return _LONG_RUN not in data.translate(_DIGITS)


def parse_json(body: bytes) -> Any:
    """Strict JSON: no NaN/Infinity. orjson when it reads `body` exactly as the json module would (UTF-8
    without a BOM, no integer it would turn into a float); else the json module, which also words every
    error message. (A string with a NUL, which PostgreSQL's jsonb refuses, is the envelope validator's
    to refuse, naming the envelope and field: a 400, not a 503 retried for ever.)"""
    if orjson_reads_alike(body):
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(body, parse_constant=_no_constant)
    except ValueError as exc:      # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise Rejected(400, "bad_json", f"malformed JSON: {exc}") from None
    except RecursionError:
        raise Rejected(400, "bad_json", "malformed JSON: nested too deeply") from None
