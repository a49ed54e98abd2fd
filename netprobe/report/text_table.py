"""Tables laid out by hand, line for line as rich's Table lays out the ones netprobe prints (rich's
Table is too slow for a fleet's report). A cell is one line of plain text, its width
`rich.cells.cell_len`, each row one string; for what these tables use (box, header, padding 1,
justified columns, sections, title, caption, row and cell styles) the output is rich's own
(tests/unit/report/test_text_table.py compares them), and rich writes it.

A table wider than the console is not shrunk, wrapped or cropped (rich's Table would): its lines keep
their full width and only the title and caption wrap, at the console's width.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cache
from typing import Literal

from rich import box as boxes
from rich.box import Box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from rich.text import Text


def _width(text: str) -> int:
    """Terminal cells: printable ASCII takes one each (checked in C; cell_len is a Python call per cell)."""
    return len(text) if text.isascii() and text.isprintable() else cell_len(text)


class TextTable:
    """A subset of rich.table.Table's API: add_column, add_row, add_section; cells are plain text."""

    def __init__(self, *, title: str | None = None, caption: str | None = None,
                 box: Box = boxes.HEAVY_HEAD, collapse_padding: bool = False) -> None:
        self.title, self.caption, self.box = title, caption, box
        self.collapse_padding = collapse_padding
        self._heads: list[str] = []
        self._right: list[bool] = []
        self._rows: list[Sequence[str]] = []
        self._styles: dict[int, str] = {}                        # row index -> style of the whole row
        self._cell_styles: dict[int, Sequence[str | None]] = {}  # row index -> style per cell (the text)
        self._sections: set[int] = set()                         # rows followed by a rule

    def add_column(self, head: str, justify: Literal["left", "right"] = "left") -> None:
        self._heads.append(head)
        self._right.append(justify == "right")

    def add_row(self, *cells: str, style: str | None = None,
                cell_styles: Sequence[str | None] | None = None) -> None:
        if len(cells) != len(self._heads):
            raise ValueError(f"{len(cells)} cells for {len(self._heads)} columns")
        if style:
            self._styles[len(self._rows)] = style
        if cell_styles is not None and any(cell_styles):
            self._cell_styles[len(self._rows)] = cell_styles
        self._rows.append(cells)

    def add_section(self) -> None:
        """A rule under the last row added (none when no row follows), as rich's add_section."""
        if self._rows:
            self._sections.add(len(self._rows) - 1)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lens = [[_width(c) for c in row] for row in self._rows]
        layout = _Layout(self._heads, lens, self._right, self.collapse_padding)
        box = self.box.substitute(options, safe=console.safe_box)
        widths = layout.widths
        line = Segment.line()
        annotation_width = min(sum(widths) + len(widths) + 1, options.max_width)
        if self.title:
            yield from _annotation(console, self.title, "table.title", annotation_width)
        yield from (Segment(box.get_top(widths)), line)
        header = console.get_style("table.header")
        yield Segment(box.head_left)
        for i, cell in enumerate(layout.cells(self._heads, [_width(h) for h in self._heads])):
            if i:
                yield Segment(box.head_vertical)
            yield Segment(cell, header)
        yield from (Segment(box.head_right), line, Segment(box.get_row(widths, "head")), line)
        last = len(self._rows) - 1
        section = box.get_row(widths, "row")
        mid = (box.mid_left, box.mid_vertical, box.mid_right)
        foot = (box.foot_left, box.foot_vertical, box.foot_right)
        get_style = cache(lambda name: console.get_style(name or ""))     # parsed once per name

        for index, (row, row_lens) in enumerate(zip(self._rows, lens, strict=True)):
            left, divider, right = foot if index == last else mid
            texts = layout.cells(row, row_lens)
            row_style = self._styles.get(index)
            cell_styles = self._cell_styles.get(index)
            if row_style is None and cell_styles is None:
                yield Segment(left + divider.join(texts) + right)
            elif cell_styles is None:
                yield from (Segment(left), Segment(divider.join(texts), get_style(row_style)), Segment(right))
            else:
                base = get_style(row_style)
                runs: list[tuple[str, Style | None]] = [(left, None)]
                for i, (text, cell_style) in enumerate(zip(texts, cell_styles, strict=True)):
                    if i:
                        runs.append((divider, base))
                    if cell_style:      # the text, not its padding, as markup in a rich cell
                        start = layout.text_start(i, row_lens[i])
                        end = start + len(row[i])
                        runs += [(text[:start], base), (text[start:end], base + get_style(cell_style)),
                                 (text[end:], base)]
                    else:
                        runs.append((text, base))
                runs.append((right, None))
                yield from _segments(runs)
            yield line
            if index in self._sections and index != last:
                yield from (Segment(section), line)
        yield from (Segment(box.get_bottom(widths)), line)
        if self.caption:
            yield from _annotation(console, self.caption, "table.caption", annotation_width)

    def print(self, console: Console) -> None:
        """Print at full width: not cropped at the console's edge (see the module's doc)."""
        console.print(self, crop=False)


class _Layout:
    """Column widths and cell padding as rich's Table with padding (0, 1) and no width limit."""

    def __init__(self, heads: Sequence[str], lens: list[list[int]], right: list[bool],
                 collapse_padding: bool) -> None:
        n = len(heads)
        # collapsed, a cell after the first has no left padding (its neighbour's right one is enough)
        self.pad_left = [1 if i == 0 or not collapse_padding else 0 for i in range(n)]
        self.text_widths = [max([_width(heads[i]), *(row[i] for row in lens)]) for i in range(n)]
        self.widths = [w + left + 1 for w, left in zip(self.text_widths, self.pad_left, strict=True)]
        self.right = right

    def cells(self, row: Sequence[str], row_lens: list[int]) -> list[str]:
        """Each cell padded and justified to its column's width."""
        return [" " * left + (" " * (w - n) + c if right else c + " " * (w - n)) + " "
                for c, n, w, left, right in zip(row, row_lens, self.text_widths, self.pad_left, self.right,
                                                strict=True)]

    def text_start(self, column: int, text_len: int) -> int:
        """Where a cell's text starts in its padded cell (characters; padding is spaces)."""
        pad = self.text_widths[column] - text_len if self.right[column] else 0
        return self.pad_left[column] + pad


def _segments(runs: list[tuple[str, Style | None]]) -> Iterator[Segment]:
    """One segment per run of one style."""
    text, style = [runs[0][0]], runs[0][1]
    for t, s in runs[1:]:
        if s != style:
            yield Segment("".join(text), style)
            text, style = [], s
        text.append(t)
    yield Segment("".join(text), style)


def _annotation(console: Console, text: str, style: str, width: int) -> RenderResult:
    """Title or caption: wrapped at the table's width and padded to it, as rich renders them."""
    lines = Text(text, style=style).wrap(console, width, justify="left", overflow="fold")
    yield from Text("\n").join(lines).render(console)      # join: the lines' style as spans, for render
    yield Segment.line()
