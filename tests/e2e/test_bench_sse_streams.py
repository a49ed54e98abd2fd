"""bench/sse_streams.py runs against the current sse client (it once kept importing a function the
client had dropped, and nothing noticed): a tiny run reads every event of every stream."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_bench_reads_every_event() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "sse_streams.py"), "--streams", "4",
                           "--interval-ms", "20", "--seconds", "1"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert "events 200 of 200; failed streams 0" in done.stdout, done.stdout + done.stderr[-2000:]
    assert "gap_error_ms p50=" in done.stdout and "µs per event" in done.stdout
