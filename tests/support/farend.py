"""`netprobe target` as a reflector, run as operators run it (a real process), for the tests of the
reflector itself and of the probes that use it."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
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


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_target(*args: str) -> tuple[subprocess.Popen[bytes], str]:
    """`netprobe target --listen 127.0.0.1:<free port> ARGS…` as a process, once it accepts: (it, its URL)."""
    port = free_tcp_port()
    proc = subprocess.Popen(target_cli("--listen", f"127.0.0.1:{port}", *args), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(200):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"http://127.0.0.1:{port}"
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("netprobe target did not come up")


@contextmanager
def target_served(*args: str) -> Iterator[str]:
    """serve_target for a `with`: its URL, and the process stopped after."""
    proc, url = serve_target(*args)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
