"""netprobe.report.text_table prints the report and budget tables as rich's Table printed them: the same text,
character for character, and the same style on every visible character; wider than the console,
every line is kept whole."""

from __future__ import annotations

import dataclasses
import io
import random
from collections.abc import Callable

import pytest
from rich.console import Console
from rich.style import Style
from rich.text import Text

from netprobe.budget.compute import BudgetParams
from netprobe.budget.table import print_budget
from netprobe.report.peak import PeakReport
from netprobe.report.render_table import print_table, table
from netprobe.report.text_table import TextTable
from tests.support.tables import (
    budget,
    fleet,
    report,
    rich_print_budget,
    rich_print_table,
    row,
)

Printer = Callable[[Console], None]


def _plain(printer: Printer, width: int) -> str:
    out = io.StringIO()
    printer(Console(file=out, width=width))          # a file: no colour, as piped or --out
    return out.getvalue()


def _reports() -> dict[str, PeakReport]:
    rng = random.Random(7)
    one = [row(rng, f"sh-ct-{i}", "cn-east", f"hk-{i}") for i in range(5)]
    regions = [row(rng, f"{region}-1", region, target, line=line, detected=detected)
               for region in ("cn-east", "cn-north", None, "eu-de")
               for target, line, detected in (("hk-cn2", "cn2-gia", "cn2-gia"), ("hk-bgp", "bgp", "cn2-gt"),
                                              ("us-163", "163", None), ("tyo", None, "cn2-gia"))]
    unicode = [
        row(rng, "上海电信-1", "华东", "東京-cn2", line="cn2–gia", detected="cn2-gt", datacenter="tōkyō"),
        row(rng, "café-é-1", "華南", "hk×2 ≤ 3", line="bgp", detected="bgp", datacenter="香港"),
        row(rng, "ba\u0301r-🚀", "华东", "—", line=None, detected=None, datacenter=None, measured=False)]
    long = [row(rng, "ag-07-cn-east-chinatelecom", "cn-east", "ap-southeast-1-cn2-gia-premium-0001",
                line="cn2-gia-premium", detected="cn2-gt-standard")]
    return {
        "empty": report([], note="time compressed: one hour is 10 s"),
        "one region": report(one),
        "regions with sections": report(regions, warnings=["agent x: no zone, taken as UTC"]),
        "unicode": report(unicode, note="note ≠ —"),
        "long values": report(long + one[:2]),
        "title wider than the table": report(one[:1], agent="agent-with-a-very-long-name-" * 2, region="x"),
        "fleet": fleet(agents=3, targets=40),
    }


REPORTS = _reports()


def _width(t: TextTable) -> int:
    """The table's width, from its widest line."""
    return max(len(ln) for ln in _plain(t.print, 1000).splitlines()[1:])


@pytest.mark.parametrize("name", REPORTS)
def test_report_is_printed_as_rich_printed_it(name: str) -> None:
    rep = REPORTS[name]
    widths = [240, 260]
    if rep.rows:
        fit = _width(table(rep))
        widths = [w for w in widths if w >= fit] + [fit]     # and exactly as wide as the console
    for width in widths:
        assert _plain(lambda c: print_table(rep, c), width) == \
            _plain(lambda c: rich_print_table(rep, c), width)


BUDGET_PARAMS = [BudgetParams(ttft_ms=1000), BudgetParams(ttft_ms=600, tpot_ms=40, keepalive=True, calls=3),
                 BudgetParams(ttft_ms=1500, tpot_ms=25, tls="1.2")]


@pytest.mark.parametrize("name", ["empty", "regions with sections", "unicode", "long values", "fleet"])
@pytest.mark.parametrize("params", BUDGET_PARAMS, ids=["default", "keepalive-tpot", "tls12"])
def test_budget_is_printed_as_rich_printed_it(name: str, params: BudgetParams) -> None:
    rows = budget(REPORTS[name], params)
    assert bool(rows) == (name != "empty")
    for width in (240, 250):
        assert _plain(lambda c: print_budget(rows, params, c), width) == \
            _plain(lambda c: rich_print_budget(rows, params, c), width)


RED, GREEN, YELLOW = 1, 2, 3      # ANSI colour numbers


def _styles(printer: Printer) -> dict[tuple[int, int], Style]:
    """The style of each visible character printed on a terminal, by (line, column)."""
    out = io.StringIO()
    printer(Console(file=out, width=260, force_terminal=True, color_system="truecolor"))
    styles: dict[tuple[int, int], Style] = {}
    y = x = 0
    for seg in Text.from_ansi(out.getvalue()).render(Console()):
        for ch in seg.text:
            if ch == "\n":
                y, x = y + 1, 0
                continue
            if not ch.isspace():
                styles[y, x] = seg.style or Style.null()
            x += 1
    return styles


def test_styles_are_rich_ones() -> None:
    """Title italic, header bold, caption dim italic, a row whose line is not the declared one yellow,
    verdicts green or red: on every visible character, what rich's Table gave."""
    rep = REPORTS["regions with sections"]
    assert any(r.line_mismatch for r in rep.rows)
    ours = _styles(lambda c: print_table(rep, c))
    assert ours == _styles(lambda c: rich_print_table(rep, c))
    assert {bool(s.italic) for s in ours.values()} == {True, False}
    assert YELLOW in {s.color.number for s in ours.values() if s.color}
    params = BUDGET_PARAMS[1]
    rows = budget(rep, params)
    assert {r.feasible for r in rows} == {True, False}
    ours = _styles(lambda c: print_budget(rows, params, c))
    assert ours == _styles(lambda c: rich_print_budget(rows, params, c))
    assert {GREEN, RED} <= {s.color.number for s in ours.values() if s.color}


def test_colour_on_a_terminal_and_none_when_piped() -> None:
    rep = REPORTS["regions with sections"]
    term = io.StringIO()
    print_table(rep, Console(file=term, width=240, force_terminal=True, color_system="standard"))
    yellow = [ln for ln in term.getvalue().splitlines() if "\x1b[33m" in ln]
    assert len(yellow) == sum(r.line_mismatch for r in rep.rows)
    assert "\x1b" not in _plain(lambda c: print_table(rep, c), 240)
    out = io.StringIO()                               # --out: as the report command opens it
    print_table(rep, Console(file=out, width=240, no_color=True, highlight=False))
    assert "\x1b" not in out.getvalue()


@pytest.mark.parametrize("name", ["one region", "unicode", "long values"])
def test_wider_than_the_console_lines_are_kept_whole(name: str) -> None:
    """rich would shrink the columns and crop cells with "…"; here every line of the table is the one
    printed on a console wide enough, and only the title and caption wrap, at the console's width."""
    rep = REPORTS[name]
    wide = _plain(lambda c: print_table(rep, c), 1000).splitlines()
    width = min(_width(table(rep)) - 30, 120)
    narrow = _plain(lambda c: print_table(rep, c), width).splitlines()
    head = next(i for i, ln in enumerate(wide) if "worst hour (local)" in ln)
    n = len(rep.rows) + len({r.region for r in rep.rows}) + 1       # head rule, sections, bottom edge
    body = wide[head - 1:head + n + 1]
    start = narrow.index(body[1]) - 1
    assert narrow[start:start + len(body)] == body
    assert all(len(ln) > width for ln in body) and "…" not in "".join(narrow)
    title, caption = narrow[:start], narrow[start + len(body):]
    assert all(len(ln) <= width for ln in title + caption) and len(title) > 1
    assert " ".join(" ".join(title).split()) == " ".join(" ".join(wide[:head - 1]).split())
    assert " ".join(" ".join(caption).split()) == " ".join(" ".join(wide[head + n + 1:]).split())


def test_a_row_must_fill_every_column() -> None:
    t = TextTable()
    t.add_column("a")
    with pytest.raises(ValueError, match="2 cells for 1 columns"):
        t.add_row("x", "y")


def test_cells_are_plain_text() -> None:
    """A cell is laid out as plain text: no markup, whatever it holds."""
    rep = report([dataclasses.replace(REPORTS["one region"].rows[0], target="[bold]x[/] [fe80::1]")])
    assert "[bold]x[/] [fe80::1]" in _plain(lambda c: print_table(rep, c), 240)
