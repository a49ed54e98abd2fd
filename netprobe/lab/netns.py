"""Thin helpers over `ip` and setns(2); every failure becomes a LabError naming the command."""

from __future__ import annotations

import ctypes
import os
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from netprobe.errors import LabError

CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")

_libc = ctypes.CDLL(None, use_errno=True)


def setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextmanager
def entered(namespace: str) -> Iterator[None]:
    """Run the body with this thread inside `namespace`; sockets and fds opened there stay there."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(NETNS_DIR / namespace, os.O_RDONLY)
        try:
            setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            setns(home)
    finally:
        os.close(home)


def list_namespaces() -> list[str]:
    try:
        return sorted(p.name for p in NETNS_DIR.iterdir())
    except FileNotFoundError:
        return []


def run(args: Sequence[str], stdin: str | None = None, check: bool = True) -> str:
    try:
        proc = subprocess.run(list(args), input=stdin, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise LabError(f"{args[0]} not found; install iproute2") from None
    except subprocess.TimeoutExpired:
        raise LabError(f"`{' '.join(args)}` timed out") from None
    if check and proc.returncode != 0:
        raise LabError(f"`{' '.join(args)}` failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def ip_batch(namespace: str | None, commands: Sequence[str], ipv6: bool = False) -> None:
    """Run `ip` commands in one process (fast lab up); the first failing line is reported.

    A batch line cannot carry `-6`, so IPv6 rules and routes go in their own batch.
    """
    if not commands:
        return
    args = ["ip"] + (["-6"] if ipv6 else []) + (["-n", namespace] if namespace else []) + ["-batch", "-"]
    try:
        run(args, stdin="\n".join(commands) + "\n")
    except LabError as exc:
        raise LabError(f"in namespace {namespace or '(root)'}: {exc}") from None


def write_sysctls(namespace: str, values: dict[str, str]) -> None:
    """Set per-namespace sysctls; /proc/sys/net follows the netns of whoever opens the file."""
    with entered(namespace):
        for key, value in values.items():
            path = Path("/proc/sys") / key.replace(".", "/")
            try:
                path.write_text(value)
            except OSError as exc:
                raise LabError(f"sysctl {key}={value} in {namespace}: {exc.strerror}") from None
