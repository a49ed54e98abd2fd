"""Structured logs: one line per event, logfmt or JSON, journald-aware, secrets never written."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import pytest

from netprobe.errors import UsageError
from netprobe.logs import log_event, redact_text, setup_logging

SECRETS = ("hunter2", "s3cr3t-tok", "pgpass", "abc.def.ghi", "influx-tok")


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def capture(fmt: str, level: str = "info") -> io.StringIO:
    buf = io.StringIO()
    setup_logging(level, fmt, stream=buf)
    return buf


@pytest.mark.usefixtures("restore_root")
def test_logfmt_line_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    buf = capture("logfmt")
    log = logging.getLogger("netprobe.agent")
    log_event(log, "info", "round done", target="hk-cn2", loss_pct=0.5, ok=True, note='say "hi"\nbye',
              none=None)
    line = buf.getvalue()
    assert line.count("\n") == 1
    assert re.match(r'^ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=info logger=netprobe\.agent '
                    r'msg="round done" target=hk-cn2 loss_pct=0\.5 ok=true note="say \\"hi\\"\\nbye" none=$',
                    line.rstrip("\n")), line


@pytest.mark.usefixtures("restore_root")
def test_json_line_shape_and_levels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    buf = capture("json", level="warning")
    log = logging.getLogger("netprobe.store")
    log_event(log, "info", "hidden")
    log_event(log, logging.WARNING, "slow write", ms=1234.5, msg="clash")
    try:
        raise RuntimeError("db down")
    except RuntimeError:
        log.exception("flush failed")
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["level"] == "warning" and first["msg"] == "slow write" and first["ms"] == 1234.5
    assert first["msg_"] == "clash"  # a field never overwrites the message
    assert first["ts"].endswith("Z")
    assert second["level"] == "error" and "RuntimeError: db down" in second["exc"]


@pytest.mark.usefixtures("restore_root")
@pytest.mark.parametrize("fmt", ["logfmt", "json"])
def test_secrets_never_written(fmt: str) -> None:
    buf = capture(fmt, level="debug")
    log = logging.getLogger("netprobe.uplink")
    log_event(log, "info", "connecting to postgresql+psycopg://netprobe:hunter2@db.example.net/netprobe",
              token="s3cr3t-tok", influx_password="pgpass", Authorization="Bearer abc.def.ghi",
              token_file="/etc/netprobe/uplink.token", url="http://u:hunter2@c.example.net:8471/",
              nested={"secret": "influx-tok", "host": "h"})
    log.warning("request headers: Authorization: Bearer abc.def.ghi, api_key=influx-tok")
    logging.getLogger("some.library").error("login with password=%s failed", "hunter2")
    try:
        raise ValueError("cannot open postgresql://netprobe:pgpass@db/x")
    except ValueError:
        log.exception("store error")
    out = buf.getvalue()
    for secret in SECRETS:
        assert secret not in out, (secret, out)
    assert "/etc/netprobe/uplink.token" in out  # where a secret lives is not the secret
    assert "postgresql+psycopg://netprobe:***@db.example.net/netprobe" in out
    assert len(out.splitlines()) == 4


def test_redact_text_cases() -> None:
    assert redact_text("postgresql://user:pw@host/db") == "postgresql://user:***@host/db"
    assert redact_text("http://host:8080/path") == "http://host:8080/path"  # a port is not a password
    assert redact_text("Authorization: Bearer xyz") == "Authorization: ***"
    assert redact_text('token="a b c" rest') == "token=*** rest"
    assert redact_text("token_file=/etc/t") == "token_file=/etc/t"
    assert redact_text("no secrets here: rtt=12ms") == "no secrets here: rtt=12ms"


@pytest.mark.usefixtures("restore_root")
def test_setup_is_idempotent_and_validates() -> None:
    buf = capture("logfmt")
    capture("json")  # a reload replaces our handler rather than adding a second one
    logging.getLogger("netprobe").info("once")
    assert buf.getvalue() == ""
    with pytest.raises(UsageError):
        setup_logging("loud")
    with pytest.raises(UsageError):
        setup_logging("info", "xml")
    assert logging.getLogger("apscheduler").level == logging.WARNING


def test_journald_stream_drops_timestamp_and_adds_priority() -> None:
    # JOURNAL_STREAM names the device:inode of the stream systemd connected; point it at a real file
    # used as stderr of a child so the check runs exactly as under systemd.
    code = ("import logging; from netprobe.logs import setup_logging, log_event;"
            "setup_logging('info', 'logfmt');"
            "log_event(logging.getLogger('netprobe'), 'error', 'boom', n=1);"
            "log_event(logging.getLogger('netprobe'), 'info', 'fine')")
    with tempfile.TemporaryFile(mode="w+") as err:
        st = os.fstat(err.fileno())
        env = {**os.environ, "JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}
        subprocess.run([sys.executable, "-c", code], stderr=err, env=env, check=True, timeout=60)
        err.seek(0)
        lines = err.read().splitlines()
    assert lines == ["<3>level=error logger=netprobe msg=boom n=1", "<6>level=info logger=netprobe msg=fine"]
    # Another stream (JOURNAL_STREAM inherited but stderr redirected elsewhere) keeps timestamps.
    env = {**os.environ, "JOURNAL_STREAM": "1:1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                         timeout=60)
    assert out.stderr.startswith("ts=")
