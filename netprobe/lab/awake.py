"""Keep a VM's vCPUs from halting while the lab measures timing.

On a VM a halted vCPU can take milliseconds to be run again once work arrives (hypervisor steal),
which delays whatever the relay or a server holds at that moment. One lowest-priority (SCHED_IDLE)
spinner per CPU keeps every vCPU busy without taking time from anything else, and the stalls go.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

_SPIN = "import os; os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\nwhile True: pass"


@contextlib.contextmanager
def keep_awake(cpus: list[int] | None = None) -> Iterator[None]:
    """A SCHED_IDLE busy loop pinned to each CPU (default: all this process may use) while inside."""
    chosen = sorted(os.sched_getaffinity(0)) if cpus is None else cpus
    procs = [subprocess.Popen(["taskset", "-c", str(c), sys.executable, "-c", _SPIN]) for c in chosen]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()
