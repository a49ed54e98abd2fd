"""Targets as people type them: HOST, [V6ADDR]:PORT, HOST:PORT, and files of them (`-f FILE`).

Parsers raise ValueError with a message meant for the user; `read_targets` prefixes it with
FILE:LINE and turns the lot into one UsageError, so a bad file is reported in one go.
"""

from __future__ import annotations

import ipaddress
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from netprobe.errors import UsageError
from netprobe.net.resolve import parse_literal

T = TypeVar("T")

# letters, digits, hyphen (and underscore, which real zones contain); no hyphen at either end
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)$")
_BRACKETED = re.compile(r"^\[([^\]]*)\](?::(.*))?$")
_MAX_REPORTED = 20
# Targets one `probe icmp|tcp` command takes. At 1 Hz that is 10,000 requests/s, five times the
# default send cap, and a --json document of tens of MB: past this, an agent (or several) is the tool.
MAX_TARGETS = 10_000


def check_host(text: str) -> str:
    """`text` as a host: an IP literal ("[::1]" → "::1") or a syntactically valid DNS name."""
    host = text.strip()
    if not host:
        raise ValueError("empty host")
    m = _BRACKETED.match(host)
    if m and m.group(2) is None:
        try:
            return str(ipaddress.IPv6Address(m.group(1)))
        except ValueError:
            raise ValueError(f"{host!r} is not a valid IPv6 address") from None
    if parse_literal(host) is not None:
        return host
    if ":" in host:
        raise ValueError(f"{host!r} is not a valid host name or IP address")
    try:
        name = host.rstrip(".").encode("idna").decode("ascii")  # IDN → punycode; rejects empty labels
    except UnicodeError:
        raise ValueError(f"{host!r} is not a valid host name") from None
    labels = name.split(".")
    if len(name) > 253 or not all(_LABEL.match(label) for label in labels):
        raise ValueError(f"{host!r} is not a valid host name")
    if labels[-1].isdigit():  # "300.1.1.1", "10.1": meant as an IPv4 address, and not a valid one
        raise ValueError(f"{host!r} is not a valid IPv4 address")
    return host


def _port(text: str, whole: str) -> int:
    if not text:
        raise ValueError(f"missing port in {whole!r} (use HOST:PORT)")
    if not text.isdigit():
        raise ValueError(f"port {text!r} in {whole!r} is not a number")
    port = int(text)
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} in {whole!r} is out of range (1-65535)")
    return port


def check_host_port(text: str) -> tuple[str, int]:
    """HOST:PORT or [V6ADDR]:PORT → (host, port)."""
    whole = text.strip()
    m = _BRACKETED.match(whole)
    if m:
        if m.group(2) is None:
            raise ValueError(f"missing port in {whole!r} (use [ADDR]:PORT)")
        return check_host(f"[{m.group(1)}]"), _port(m.group(2), whole)
    if whole.count(":") > 1:
        if parse_literal(whole) is not None:
            raise ValueError(f"missing port in {whole!r} (write an IPv6 address as [ADDR]:PORT)")
        raise ValueError(f"{whole!r} is not HOST:PORT (write an IPv6 address as [ADDR]:PORT)")
    host, sep, port = whole.partition(":")
    if not sep:
        raise ValueError(f"missing port in {whole!r} (use HOST:PORT)")
    return check_host(host), _port(port, whole)


def check_listen(text: str) -> tuple[str, int]:
    """An address to serve on: check_host_port's HOST:PORT or [V6ADDR]:PORT, where port 0 also asks
    the kernel for any free port."""
    head, sep, port = text.strip().rpartition(":")
    if sep and port == "0" and (head.endswith("]") or ":" not in head):
        return check_host_port(f"{head}:1")[0], 0
    return check_host_port(text)


def listen_url(host: str, port: int) -> str:
    """http://HOST:PORT of an address served on, an IPv6 one in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _read(path: str) -> tuple[str, str]:
    """(name for messages, text); '-' is stdin."""
    if path == "-":
        return "stdin", sys.stdin.read()
    try:
        return path, Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_targets(path: str, parse: Callable[[str], T]) -> list[T]:
    """One entry per line; `#` starts a comment; blank lines are skipped; bad lines named FILE:LINE."""
    name, text = _read(path)
    out: list[T] = []
    problems: list[str] = []
    for lineno, raw in enumerate(text.split("\n"), start=1):
        entry = raw.split("#", 1)[0].strip()
        if not entry:
            continue
        try:
            if len(entry.split()) > 1:
                raise ValueError(f"one entry per line expected, got {entry!r}")
            out.append(parse(entry))
        except ValueError as exc:
            problems.append(f"{name}:{lineno}: {exc}")
    if problems:
        more = len(problems) - _MAX_REPORTED
        tail = [f"… and {more} more bad lines"] if more > 0 else []
        raise UsageError("\n".join(problems[:_MAX_REPORTED] + tail))
    return out
