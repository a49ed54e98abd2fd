"""The report as a Markdown (GitHub) table."""

from __future__ import annotations

from .columns import columns, empty_message, title
from .peak import PeakReport


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def markdown(report: PeakReport) -> str:
    lines = [f"**{_cell(title(report))}**", ""]
    if report.note:
        lines += [f"> {_cell(report.note)}", ""]
    if not report.rows:
        return "\n".join([*lines, _cell(empty_message(report)), ""])
    shown = columns(report.rows)
    lines.append("| " + " | ".join(c.head for c in shown) + " |")
    lines.append("|" + "|".join("---:" if c.numeric else "---" for c in shown) + "|")
    lines += ["| " + " | ".join(_cell(c.cell(r)) for c in shown) + " |" for r in report.rows]
    lines += ["", *(f"> warning: {_cell(w)}" for w in report.warnings)]
    return "\n".join(lines).rstrip("\n") + "\n"
