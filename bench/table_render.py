"""CPU time of printing the report and budget tables of a fleet (default 10 agents × 100 targets =
1,000 rows): netprobe.textout against the rich Table code it replaced (tests/support/tables.py, rich
being a dev dependency only). Rows are made up directly, no store; output 240 columns wide to a file (as
piped or --out) and with colour (as on a terminal). The plain text of both is checked to be the same.

    python3 bench/table_render.py [--agents 10] [--targets 100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402

from netprobe.budget.compute import BudgetParams  # noqa: E402
from netprobe.budget.table import print_budget  # noqa: E402
from netprobe.report.render_table import print_table  # noqa: E402
from netprobe.textout import Out  # noqa: E402
from tests.support.tables import budget, fleet, rich_print_budget, rich_print_table  # noqa: E402


def _rich(out: io.StringIO, terminal: bool) -> Console:
    return Console(file=out, width=240, force_terminal=True, color_system="truecolor") if terminal \
        else Console(file=out, width=240)


def _ours(out: io.StringIO, terminal: bool) -> Out:
    return Out(file=out, width=240, color=terminal)


def _run(printer: Callable[[Any], None], make: Callable[[io.StringIO, bool], Any], terminal: bool,
         repeat: int) -> tuple[float, str]:
    """Median CPU seconds of one print, and the text printed."""
    times, text = [], ""
    for _ in range(repeat):
        out = io.StringIO()
        target = make(out, terminal)
        t0 = time.process_time()
        printer(target)
        times.append(time.process_time() - t0)
        text = out.getvalue()
    return statistics.median(times), text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--targets", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    report = fleet(args.agents, args.targets)
    params = BudgetParams(ttft_ms=1000)
    rows = budget(report, params)
    print(f"{len(report.rows)} report rows, {len(rows)} budget rows; median CPU s of {args.repeat}")
    print(f"{'table':8} {'console':9} {'rich Table':>10} {'textout':>10}  same text")
    cases: list[tuple[str, Callable[[Console], None], Callable[[Out], None]]] = [
        ("report", lambda c: rich_print_table(report, c), lambda c: print_table(report, c)),
        ("budget", lambda c: rich_print_budget(rows, params, c), lambda c: print_budget(rows, params, c)),
    ]
    for name, old, new in cases:
        for terminal in (False, True):
            t_old, s_old = _run(old, _rich, terminal, args.repeat)
            t_new, s_new = _run(new, _ours, terminal, args.repeat)
            same = "yes" if s_old == s_new else ("(colour codes differ)" if terminal else "NO")
            print(f"{name:8} {'terminal' if terminal else 'file':9} {t_old:10.3f} {t_new:10.3f}  {same}")


if __name__ == "__main__":
    main()
