"""What netprobe prints for people: tables laid out as rich's Table lays out the ones netprobe prints
(tests/unit/test_textout.py compares them with rich itself), and styled text, without rich and its
Pygments and markdown-it at run time (11 MB of a small agent's install).

A cell is one line of plain text, never markup. A table wider than the console is not shrunk, wrapped
or cropped: its lines keep their full width and only the title and caption wrap, at the console's width.
Styles become ANSI codes; click.echo drops them when the output is not a terminal (a pipe, --out).
Help lists a group's commands in the order they are written, the order they are used in.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, Literal

import click

# rich's box drawings, row by row: top, head, head rule, mid, row rule, foot rule, foot, bottom; each
# row is (left, horizontal or space, divider, right).
Box = tuple[str, str, str, str, str, str, str, str]
HEAVY_HEAD: Box = ("┏━┳┓", "┃ ┃┃", "┡━╇┩", "│ ││", "├─┼┤", "├─┼┤", "│ ││", "└─┴┘")
SIMPLE_HEAD: Box = ("    ", "    ", " ── ", "    ", "    ", "    ", "    ", "    ")
COLORS = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")


def style(text: str, spec: str | None) -> str:
    """`text` in a style written as rich writes one: words among bold, dim, italic and colour names."""
    if not spec:
        return text
    kw: dict[str, Any] = {}
    for word in spec.split():
        if word in COLORS:
            kw["fg"] = word
        elif word in ("bold", "dim", "italic", "underline"):
            kw[word] = True
        else:
            raise ValueError(f"unknown style word {word!r}")
    return click.style(text, **kw)


def width_of(text: str) -> int:
    """Terminal cells of `text`: wide East Asian characters take two, combining marks none."""
    if text.isascii() and text.isprintable():
        return len(text)
    return sum(0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
               for ch in text)


def console_width(stream: IO[str] | None = None) -> int:
    """A terminal's own width; 240 for a pipe or a file, where only titles and captions wrap."""
    stream = stream or sys.stdout
    return shutil.get_terminal_size().columns if stream.isatty() else 240


class Group(click.Group):
    """A click group that lists its commands as defined (click would sort them)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@dataclass
class Out:
    """Where text goes: a stream (stdout unless told), its width (the terminal's unless told), and
    whether to colour (on a terminal unless told)."""

    file: IO[str] | None = None
    width: int | None = None
    color: bool | None = None
    err: bool = False

    def print(self, text: str = "", spec: str | None = None) -> None:
        click.echo(style(text, spec), file=self.file, color=self.color, err=self.err)

    def table(self, table: TextTable) -> None:
        stream = self.file or (sys.stderr if self.err else sys.stdout)
        click.echo("\n".join(table.lines(self.width or console_width(stream))), file=self.file,
                   color=self.color, err=self.err)

    @property
    def terminal(self) -> bool:
        stream = self.file or (sys.stderr if self.err else sys.stdout)
        return self.color if self.color is not None else stream.isatty()


class TextTable:
    """Columns, rows of plain-text cells, sections, a title and a caption. `box=None`: no edges or
    rules, columns two spaces apart (rich's box=None, pad_edge=False)."""

    def __init__(self, *, title: str | None = None, caption: str | None = None,
                 box: Box | None = HEAVY_HEAD, collapse_padding: bool = False) -> None:
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

    def lines(self, console: int) -> Iterator[str]:
        """The table's lines, styled, for a console `console` cells wide."""
        box = self.box or _BARE
        lens = [[width_of(c) for c in row] for row in self._rows]
        layout = _Layout(self._heads, lens, self._right, self.collapse_padding, edges=self.box is not None)
        widths = layout.widths
        annotation = min(sum(widths) + (len(widths) + 1 if self.box else 0), console)
        if self.title:
            yield from _annotation(self.title, "italic", annotation)
        if self.box:
            yield _rule(box[0], widths)
        cells = layout.cells(self._heads, [width_of(h) for h in self._heads])
        left, divider, right = _edges(box[1])
        yield left + divider.join(style(c, "bold") for c in cells) + right
        if self.box:
            yield _rule(box[2], widths)
        last = len(self._rows) - 1
        for index, (row, row_lens) in enumerate(zip(self._rows, lens, strict=True)):
            left, divider, right = _edges(box[6] if index == last else box[3])
            texts = layout.cells(row, row_lens)
            row_style, cell_styles = self._styles.get(index), self._cell_styles.get(index)
            if row_style or cell_styles:    # each cell styled apart: rich leaves the dividers plain
                texts = [_styled_cell(t, layout.text_start(i, n), len(row[i]), row_style,
                                      cell_styles[i] if cell_styles else None)
                         for i, (t, n) in enumerate(zip(texts, row_lens, strict=True))]
            yield left + divider.join(texts) + right
            if self.box and index in self._sections and index != last:
                yield _rule(box[4], widths)
        if self.box:
            yield _rule(box[7], widths)
        if self.caption:
            yield from _annotation(self.caption, "dim italic", annotation)


# box=None: no edges, no rules; columns apart by their padding
_BARE: Box = ("", "", "", "", "", "", "", "")


def _edges(row: str) -> tuple[str, str, str]:
    return (row[0], row[2], row[3]) if row else ("", "", "")


def _rule(edge: str, widths: list[int]) -> str:
    return edge[0] + edge[2].join(edge[1] * w for w in widths) + edge[3]


def _styled_cell(cell: str, start: int, length: int, row: str | None, own: str | None) -> str:
    """A padded cell in its row's style, its text (not its padding) in its own style over that."""
    if own is None:
        return style(cell, row)
    text = style(cell[start:start + length], f"{row} {own}" if row else own)
    return style(cell[:start], row) + text + style(cell[start + length:], row)


class _Layout:
    """Column widths and cell padding as rich's Table with padding (0, 1) and no width limit."""

    def __init__(self, heads: Sequence[str], lens: list[list[int]], right: list[bool],
                 collapse_padding: bool, edges: bool) -> None:
        n = len(heads)
        # collapsed, a cell after the first has no left padding (its neighbour's right one is enough);
        # without edges (box=None), none at the outer sides either
        self.pad_left = [int(i > 0 or edges) if i == 0 or not collapse_padding else 0 for i in range(n)]
        self.pad_right = [int(i < n - 1 or edges) for i in range(n)]
        self.text_widths = [max([width_of(heads[i]), *(row[i] for row in lens)]) for i in range(n)]
        self.widths = [w + left + right for w, left, right
                       in zip(self.text_widths, self.pad_left, self.pad_right, strict=True)]
        self.right = right

    def cells(self, row: Sequence[str], row_lens: list[int]) -> list[str]:
        """Each cell padded and justified to its column's width."""
        return [" " * left + (" " * (w - n) + c if right else c + " " * (w - n)) + " " * pad
                for c, n, w, left, pad, right in zip(row, row_lens, self.text_widths, self.pad_left,
                                                     self.pad_right, self.right, strict=True)]

    def text_start(self, column: int, text_len: int) -> int:
        """Where a cell's text starts in its padded cell (characters; padding is spaces)."""
        pad = self.text_widths[column] - text_len if self.right[column] else 0
        return self.pad_left[column] + pad


def _annotation(text: str, spec: str, width: int) -> Iterator[str]:
    """Title or caption: wrapped at the table's width and padded to it, as rich renders them."""
    for line in textwrap.wrap(text, width, break_on_hyphens=False) or [""]:
        yield style(line + " " * (width - width_of(line)), spec)
