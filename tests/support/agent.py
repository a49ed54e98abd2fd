"""The agent daemon as a child process in a network namespace of its own, its config, and its
/metrics: shared by the agent and the alerts-wiring tests."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

# icmp and tcp rounds every second, a few requests each: short tests see several rounds
FAST_PROBES = """
[probes.icmp]
every = "1s"
count = 3
interval = "0.05s"
timeout = "0.5s"

[probes.tcp]
every = "1s"
count = 2
interval = "0.05s"
timeout = "0.5s"
"""

CONFIG = """
[agent]
id = "t-agent"
region = "test"
isp = "lo"
timezone = "Asia/Shanghai"

[storage]
url = "sqlite:///{db}"

[resolver]
refresh = "1s"

""" + FAST_PROBES + """
[[targets]]
id = "lo4"
host = "127.0.0.1"
probes = ["icmp", "tcp"]
tcp_port = {port}

[[targets]]
id = "lo6"
host = "::1"
probes = ["icmp"]

[[targets]]
id = "nowhere"
host = "no-such-host.invalid"
probes = ["icmp"]
{extra}
"""


def _write(path: Path, db: Path, port: int, extra: str = "") -> None:
    path.write_text(CONFIG.format(db=db, port=port, extra=extra))


# The agent runs in a network namespace of its own (`unshare --net`) with only loopback up, so the
# test's unresolvable name fails without a DNS query leaving this machine; a TCP listener for the
# tcp probe runs in the same process, hence in the same namespace.
LAUNCH = """
import socket, sys, threading
srv = socket.socket()
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen(128)
def accept():
    while True:
        srv.accept()[0].close()
threading.Thread(target=accept, daemon=True).start()
sys.argv = ["netprobe", "agent", "run", "--config", sys.argv[2]]
from netprobe.cli import main
main()
"""


PORT = 18443


class Daemon:
    """The agent as a child process; stderr collected by a thread so the pipe never fills."""

    def __init__(self, cfg: Path) -> None:
        self.proc = subprocess.Popen(
            ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
             sys.executable, "-c", LAUNCH, str(PORT), str(cfg)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._started = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        assert self._started.wait(30), "agent did not start:\n" + "".join(self.lines)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            if "agent started" in line:
                self._started.set()
        self._started.set()

    def stop(self) -> tuple[int, float, str]:
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=15)
        took = time.monotonic() - t0
        self._reader.join(5)
        return code, took, "".join(self.lines)


def _scrape(pid: int, port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """GET /metrics inside the agent's own network namespace; {(sample name, labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    url = f"http://127.0.0.1:{port}/metrics"
    get = f"import urllib.request as u; print(u.urlopen({url!r}, timeout=5).read().decode())"
    out = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", sys.executable, "-c", get],
                         capture_output=True, text=True, timeout=30, check=True)
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(out.stdout) for s in family.samples}
