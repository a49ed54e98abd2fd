"""netprobe.textout prints the report and budget tables as rich's Table printed them: the same text,
character for character, and the same style on every visible character; wider than the console,
every line is kept whole. rich (a dev dependency only) is the reference: tests/support/tables.py."""

from __future__ import annotations

import dataclasses
import io
import random
from collections.abc import Callable, Sequence

import pytest
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.style import Style
from rich.table import Table
from rich.text import Text

from netprobe.budget.compute import BudgetParams
from netprobe.budget.table import print_budget
from netprobe.report.peak import PeakReport
from netprobe.report.render_table import print_table, table
from netprobe.textout import HEAVY_HEAD, SIMPLE_HEAD, Box, Out, TextTable
from tests.support.tables import (
    budget,
    fleet,
    report,
    rich_print_budget,
    rich_print_table,
    row,
)

Ours = Callable[[Out], None]
Rich = Callable[[Console], None]


def _ours(printer: Ours, width: int, color: bool = False) -> str:
    out = io.StringIO()
    printer(Out(file=out, width=width, color=color))
    return out.getvalue()


def _rich(printer: Rich, width: int) -> str:
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
    return max(len(ln) for ln in _ours(lambda o: o.table(t), 1000).splitlines()[1:])


@pytest.mark.parametrize("name", REPORTS)
def test_report_is_printed_as_rich_printed_it(name: str) -> None:
    rep = REPORTS[name]
    widths = [240, 260]
    if rep.rows:
        fit = _width(table(rep))
        widths = [w for w in widths if w >= fit] + [fit]     # and exactly as wide as the console
    for width in widths:
        assert _ours(lambda o: print_table(rep, o), width) == _rich(lambda c: rich_print_table(rep, c), width)


BUDGET_PARAMS = [BudgetParams(ttft_ms=1000), BudgetParams(ttft_ms=600, tpot_ms=40, keepalive=True, calls=3),
                 BudgetParams(ttft_ms=1500, tpot_ms=25, tls="1.2")]


@pytest.mark.parametrize("name", ["empty", "regions with sections", "unicode", "long values", "fleet"])
@pytest.mark.parametrize("params", BUDGET_PARAMS, ids=["default", "keepalive-tpot", "tls12"])
def test_budget_is_printed_as_rich_printed_it(name: str, params: BudgetParams) -> None:
    rows = budget(REPORTS[name], params)
    assert bool(rows) == (name != "empty")
    for width in (240, 250):
        assert _ours(lambda o: print_budget(rows, params, o), width) == \
            _rich(lambda c: rich_print_budget(rows, params, c), width)


RED, GREEN, YELLOW = 1, 2, 3      # ANSI colour numbers


def _styles(ansi: str) -> dict[tuple[int, int], Style]:
    """The style of each visible character of text printed on a terminal, by (line, column)."""
    styles: dict[tuple[int, int], Style] = {}
    y = x = 0
    for seg in Text.from_ansi(ansi).render(Console()):
        for ch in seg.text:
            if ch == "\n":
                y, x = y + 1, 0
                continue
            if not ch.isspace():
                styles[y, x] = seg.style or Style.null()
            x += 1
    return styles


def _ours_styles(printer: Ours) -> dict[tuple[int, int], Style]:
    return _styles(_ours(printer, 260, color=True))


def _rich_styles(printer: Rich) -> dict[tuple[int, int], Style]:
    out = io.StringIO()
    printer(Console(file=out, width=260, force_terminal=True, color_system="truecolor"))
    return _styles(out.getvalue())


def test_styles_are_rich_ones() -> None:
    """Title italic, header bold, caption dim italic, a row whose line is not the declared one yellow,
    verdicts green or red: on every visible character, what rich's Table gave."""
    rep = REPORTS["regions with sections"]
    assert any(r.line_mismatch for r in rep.rows)
    ours = _ours_styles(lambda o: print_table(rep, o))
    assert ours == _rich_styles(lambda c: rich_print_table(rep, c))
    assert {bool(s.italic) for s in ours.values()} == {True, False}
    assert YELLOW in {s.color.number for s in ours.values() if s.color}
    params = BUDGET_PARAMS[1]
    rows = budget(rep, params)
    assert {r.feasible for r in rows} == {True, False}
    ours = _ours_styles(lambda o: print_budget(rows, params, o))
    assert ours == _rich_styles(lambda c: rich_print_budget(rows, params, c))
    assert {GREEN, RED} <= {s.color.number for s in ours.values() if s.color}


def test_colour_on_a_terminal_and_none_when_piped() -> None:
    rep = REPORTS["regions with sections"]
    term = _ours(lambda o: print_table(rep, o), 240, color=True)
    yellow = [ln for ln in term.splitlines() if "\x1b[33m" in ln]
    assert len(yellow) == sum(r.line_mismatch for r in rep.rows)
    piped = io.StringIO()                             # no colour asked either way: not a terminal
    print_table(rep, Out(file=piped, width=240))
    assert "\x1b" not in piped.getvalue()
    assert "\x1b" not in _ours(lambda o: print_table(rep, o), 240)    # --out: as the report command opens it


@pytest.mark.parametrize("name", ["one region", "unicode", "long values"])
def test_wider_than_the_console_lines_are_kept_whole(name: str) -> None:
    """rich would shrink the columns and crop cells with "…"; here every line of the table is the one
    printed on a console wide enough, and only the title and caption wrap, at the console's width."""
    rep = REPORTS[name]
    wide = _ours(lambda o: print_table(rep, o), 1000).splitlines()
    width = min(_width(table(rep)) - 30, 120)
    narrow = _ours(lambda o: print_table(rep, o), width).splitlines()
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
    assert "[bold]x[/] [fe80::1]" in _ours(lambda o: print_table(rep, o), 240)


# -- tables made up here, each built both ways ------------------------------------------------------
HEADS = (("name", "left"), ("count", "right"), ("where", "left"), ("ms", "right"))
Cells = tuple[str, str, str, str]
ROWS: list[tuple[Cells, str | None, tuple[str | None, ...] | None]] = [     # cells, row style, cell styles
    (("hk-cn2", "12", "香港", "35.20"), None, None),
    (("ba\u0301r", "7", "tōkyō", "—"), "yellow", None),
    (("café", "1,024", "[x]", "180.00"), None, (None, None, "green", None)),
    (("us-163", "3", "us-west", "2.50"), "yellow", (None, "red", None, None)),      # a cell inside a row
    (("tyo", "", "东京 cn2", "1.00"), "bold", ("green", None, None, "red")),
]
RICH_BOXES = {id(HEAVY_HEAD): box.HEAVY_HEAD, id(SIMPLE_HEAD): box.SIMPLE_HEAD}


def _both(rows: Sequence[tuple[Cells, str | None, tuple[str | None, ...] | None]], box_: Box | None, *,
          title: str | None = None, collapse: bool = False, section: bool = False) -> tuple[TextTable, Table]:
    ours = TextTable(title=title, caption=title and "a caption", box=box_, collapse_padding=collapse)
    if box_ is None:
        ref = Table(box=None, pad_edge=False)
    else:
        ref = Table(title=title, title_justify="left", caption=title and "a caption", caption_justify="left",
                    box=RICH_BOXES[id(box_)], collapse_padding=collapse)
    for head, justify in HEADS:
        ours.add_column(head, justify="right" if justify == "right" else "left")
        ref.add_column(head, justify="right" if justify == "right" else "left", no_wrap=True)
    for i, (cells, style, cell_styles) in enumerate(rows):
        if section and i == 2:
            ours.add_section()
            ref.add_section()
        ours.add_row(*cells, style=style, cell_styles=cell_styles)
        marked = [f"[{s}]{escape(c)}[/]" if s and c else escape(c)
                  for c, s in zip(cells, cell_styles or (None,) * len(cells), strict=True)]
        ref.add_row(*marked, style=style)
    return ours, ref


def test_bare_table_is_rich_box_none() -> None:
    """box=None: rich's Table(box=None, pad_edge=False), columns two spaces apart, bold heads, row styles."""
    rows = [(cells, style, None) for cells, style, _ in ROWS]
    ours, ref = _both(rows, None)
    for width in (40, 80):
        assert _ours(lambda o: o.table(ours), width) == _rich(lambda c: c.print(ref), width)
    assert _ours_styles(lambda o: o.table(ours)) == _rich_styles(lambda c: c.print(ref))


@pytest.mark.parametrize(("box_", "collapse"),
                         [(HEAVY_HEAD, False), (SIMPLE_HEAD, True), (SIMPLE_HEAD, False)],
                         ids=["heavy", "simple-collapsed", "simple"])
def test_a_cell_style_inside_a_row_style(box_: Box, collapse: bool) -> None:
    """A cell's own style over its row's, on the cell's text alone; the row's style around it."""
    ours, ref = _both(ROWS, box_, title="routes, and a title that wraps at the table's width",
                      collapse=collapse, section=True)
    for width in (80, 200):
        assert _ours(lambda o: o.table(ours), width) == _rich(lambda c: c.print(ref), width)
    got = _ours_styles(lambda o: o.table(ours))
    assert got == _rich_styles(lambda c: c.print(ref))
    assert {RED, GREEN, YELLOW} <= {s.color.number for s in got.values() if s.color}
