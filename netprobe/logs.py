"""Structured logs on stderr: one line per event, logfmt or JSON, secrets masked.

Under journald (JOURNAL_STREAM names our stderr) lines carry no timestamp, since journald adds
its own, and start with a `<N>` syslog priority so `journalctl -p err` works.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from netprobe.errors import UsageError

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
FIELDS_ATTR = "netprobe_fields"
MASK = "***"

_SECRET_KEY = re.compile(r"token|password|passwd|secret|authorization|api_?key", re.IGNORECASE)
# user:password@ in any URL-looking text (postgresql://u:pw@host → postgresql://u:***@host).
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)[^@\s]*(@)")
_BEARER = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
# key=value / key: value inside free text, where the key looks secret (token=abc, password: x).
_INLINE_SECRET = re.compile(
    r"\b([A-Za-z0-9_.-]*(?:token|password|passwd|secret|authorization|api_?key)[A-Za-z0-9_.-]*)"
    r"(\s*[=:]\s*)((?:Bearer\s+|Basic\s+)?(?:\"[^\"]*\"|'[^']*'|[^\s,;&]+))", re.IGNORECASE)
# Something every pattern above needs: text without it (most log text) is returned as it is, unscanned.
_MAYBE_SECRET = re.compile(r"://|bearer|basic|token|password|passwd|secret|authorization|api_?key",
                           re.IGNORECASE)
_SYSLOG_PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3,
                    logging.CRITICAL: 2}


@functools.lru_cache(maxsize=1024)  # the same few field names on every line
def is_secret_key(key: str) -> bool:
    # token_file = "/etc/netprobe/uplink.token" is where a secret lives, not the secret itself.
    return bool(_SECRET_KEY.search(key)) and not key.lower().endswith(("_file", "_path"))


def redact_text(text: str) -> str:
    """Mask URL passwords, bearer tokens and secret-looking key=value pairs in free text."""
    if not _MAYBE_SECRET.search(text):
        return text
    text = _URL_PASSWORD.sub(rf"\1{MASK}\2", text)
    text = _BEARER.sub(rf"\1 {MASK}", text)

    def inline(m: re.Match[str]) -> str:
        return m.group(0) if not is_secret_key(m.group(1)) else f"{m.group(1)}{m.group(2)}{MASK}"

    return _INLINE_SECRET.sub(inline, text)


def redact_value(key: str, value: Any) -> Any:
    if is_secret_key(key) and value is not None:
        return MASK
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {str(k): redact_value(str(k), v) for k, v in value.items()}
    return value


class RedactFilter(logging.Filter):
    """Masks secrets in the message and the structured fields before any formatter sees them."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_text(record.getMessage())
        record.args = None
        fields = getattr(record, FIELDS_ATTR, None)
        if isinstance(fields, Mapping):
            setattr(record, FIELDS_ATTR, {str(k): redact_value(str(k), v) for k, v in fields.items()})
        if record.exc_info and not record.exc_text:
            # Tracebacks can quote a URL or a header; format once here so the text can be masked.
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        record.exc_info = None
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True


class _Formatter(logging.Formatter):
    def __init__(self, journald: bool) -> None:
        super().__init__()
        self.journald = journald

    def base(self, record: logging.LogRecord) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if not self.journald:
            out["ts"] = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds") \
                .replace("+00:00", "Z")
        out["level"] = record.levelname.lower()
        out["logger"] = record.name
        out["msg"] = record.getMessage()
        fields = getattr(record, FIELDS_ATTR, None)
        if isinstance(fields, Mapping):
            for key, value in fields.items():
                out[key if key not in out else f"{key}_"] = value
        if record.exc_text:
            out["exc"] = record.exc_text
        return out

    def prefix(self, record: logging.LogRecord) -> str:
        return f"<{_SYSLOG_PRIORITY.get(record.levelno, 6)}>" if self.journald else ""


class LogfmtFormatter(_Formatter):
    """`ts=… level=info logger=netprobe.agent msg="round done" target=hk-cn2 loss_pct=0.0`"""

    def format(self, record: logging.LogRecord) -> str:
        pairs = (f"{key}={_logfmt_value(value)}" for key, value in self.base(record).items())
        return self.prefix(record) + " ".join(pairs)


class JsonFormatter(_Formatter):
    """One JSON object per line, the same keys as logfmt."""

    def format(self, record: logging.LogRecord) -> str:
        return self.prefix(record) + json.dumps(self.base(record), default=str, ensure_ascii=False)


def _logfmt_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = value if isinstance(value, str) else json.dumps(value, default=str) \
        if isinstance(value, dict | list | tuple) else str(value)
    if text and not any(c in text for c in ' ="\\') and text.isprintable():
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") \
        .replace("\t", "\\t")
    return f'"{escaped}"'


def under_journald(stream: TextIO) -> bool:
    """True when `stream` is the journal stream systemd connected (JOURNAL_STREAM=dev:inode)."""
    value = os.environ.get("JOURNAL_STREAM", "")
    try:
        dev, ino = (int(part) for part in value.split(":"))
        st = os.fstat(stream.fileno())
    except (ValueError, OSError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (dev, ino)


class _Handler(logging.StreamHandler[TextIO]):
    """Marks the handler setup_logging installed, so calling it again replaces it."""


def setup_logging(level: str = "info", fmt: str = "logfmt", stream: TextIO | None = None) -> None:
    """Route every logger (ours and libraries') to one stderr handler; safe to call again on reload."""
    if level.lower() not in LEVELS:
        raise UsageError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    if fmt not in ("logfmt", "json"):
        raise UsageError(f"log format {fmt!r} is not one of logfmt, json")
    out = stream if stream is not None else sys.stderr
    journald = under_journald(out)
    handler = _Handler(out)
    handler.setFormatter(JsonFormatter(journald) if fmt == "json" else LogfmtFormatter(journald))
    handler.addFilter(RedactFilter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _Handler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(LEVELS[level.lower()])
    # APScheduler logs every job run at INFO: with a thousand jobs that drowns everything else.
    for chatty in ("apscheduler", "alembic"):  # both log every job run / migration step at info
        logging.getLogger(chatty).setLevel(logging.DEBUG if level.lower() == "debug" else logging.WARNING)


def log_event(logger: logging.Logger, level: int | str, msg: str, /, **fields: Any) -> None:
    """`log_event(log, "info", "round done", target="hk-cn2", loss_pct=0.0)` → one structured line."""
    levelno = LEVELS[level.lower()] if isinstance(level, str) else level
    if logger.isEnabledFor(levelno):
        # The record built directly: Logger.log would walk the stack for a caller (file, line,
        # function) that no formatter here prints, at every round of an agent.
        logger.handle(logger.makeRecord(logger.name, levelno, "", 0, msg, (), None,
                                        extra={FIELDS_ATTR: fields}))
