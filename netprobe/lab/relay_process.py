"""Starting, signalling and stopping the relay daemon (detached; identified by pid + start time)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from netprobe.errors import LabError
from netprobe.lab.relay_config import RELAY_APPLIED, RELAY_LOG
from netprobe.lab.state import process_start_ticks

READY_TIMEOUT_S = 15.0


def _log_tail(state_dir: Path, lines: int = 5) -> str:
    try:
        text = (state_dir / RELAY_LOG).read_text(errors="replace")
    except OSError:
        return ""
    return " | ".join(text.strip().splitlines()[-lines:])


def start(state_dir: Path) -> tuple[int, int]:
    """Launch the relay detached (setsid --fork: not our child) and wait for it to own its TUNs.

    Returns (pid, start ticks).
    """
    rfd, wfd = os.pipe()
    try:
        with open(state_dir / RELAY_LOG, "ab") as log:
            launcher = subprocess.run(
                ["setsid", "--fork", sys.executable, "-m", "netprobe.lab.relay", str(state_dir),
                 "--ready-fd", str(wfd)],
                pass_fds=(wfd,), stdin=subprocess.DEVNULL, stdout=log, stderr=log, timeout=10, check=False)
        os.close(wfd)
        wfd = -1
        if launcher.returncode != 0:
            raise LabError(f"could not launch the relay (setsid exit {launcher.returncode})")
        message = _read_line(rfd, READY_TIMEOUT_S)
    finally:
        os.close(rfd)
        if wfd >= 0:
            os.close(wfd)
    if not message.startswith("ok "):
        detail = message.removeprefix("error: ") or "exited before it was ready"
        raise LabError(f"relay failed: {detail}; log: {_log_tail(state_dir)}")
    pid = int(message.split()[1])
    ticks = process_start_ticks(pid)
    if ticks is None:
        raise LabError(f"relay (pid {pid}) died right after start; log: {_log_tail(state_dir)}")
    return pid, ticks


def _read_line(fd: int, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise LabError(f"relay not ready after {timeout:g}s")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    return data.decode(errors="replace").strip()


def reload(state_dir: Path, pid: int, ticks: int, generation: int, timeout: float = 5.0) -> None:
    """SIGHUP the relay and wait until it has applied `generation` (so callers can measure at once)."""
    if process_start_ticks(pid) != ticks:
        raise LabError(f"the relay (pid {pid}) is not running; run `netprobe lab up SPEC --replace`")
    os.kill(pid, signal.SIGHUP)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if int((state_dir / RELAY_APPLIED).read_text().strip() or 0) >= generation:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.005)
    raise LabError(f"the relay did not apply the new impairments within {timeout:g}s; "
                   f"log: {_log_tail(state_dir)}")


def stop(pid: int, ticks: int, timeout: float = 5.0) -> None:
    """SIGTERM (then SIGKILL) the relay, only if that pid is still the relay we started."""
    if process_start_ticks(pid) != ticks:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process_start_ticks(pid) != ticks:
                return
            time.sleep(0.01)
    raise LabError(f"the relay (pid {pid}) did not exit after SIGKILL")
