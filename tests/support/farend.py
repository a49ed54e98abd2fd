"""`netprobe target` as a reflector, run as operators run it (a real process), for the tests of the
reflector itself and of the probes that use it."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


def target_cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "netprobe.cli", "target", *args]


def issue(tokens: Path, agent: str) -> str:
    """`netprobe target add-agent`: the token it printed on its last line."""
    out = subprocess.run(target_cli("add-agent", agent, "--tokens", str(tokens)), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Reflector:
    proc: subprocess.Popen[str]
    udp: int          # its owd port
    token: str        # the agent's token
    http: int         # its HTTP port (trace endpoint, emitter)


@contextmanager
def running_reflector(tokens: Path, agent: str = "sh-ct-1") -> Iterator[Reflector]:
    """`netprobe target --listen 127.0.0.1:0 --udp 127.0.0.1:PORT --tokens FILE` with a token issued
    to `agent`; killed on exit unless the test stopped it."""
    token = issue(tokens, agent)
    port = free_udp_port()
    args = target_cli("--listen", "127.0.0.1:0", "--udp", f"127.0.0.1:{port}", "--tokens", str(tokens))
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        lines = [proc.stderr.readline(), proc.stderr.readline()]
        assert any("reflector listening" in line and f"udp=127.0.0.1:{port}" in line for line in lines), lines
        http = re.search(r"url=http://127\.0\.0\.1:(\d+)", lines[0])
        assert http, lines
        yield Reflector(proc, port, token, int(http.group(1)))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
