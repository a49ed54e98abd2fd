"""What the project ships speaks for itself: no tracked text file refers readers to the working design
notes kept outside the repository, by name or by section number, and every relative link in the docs
and READMEs points at a file that exists."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# spelled in pieces so this file does not match itself
NOTES = "DE" + "SIGN"
SECTION = "\u00a7"


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / p for p in out.decode().split("\0") if p]


def _text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except (IsADirectoryError, FileNotFoundError):
        return None
    if b"\0" in data[:8192]:
        return None                      # binary (images)
    return data.decode("utf-8", errors="replace")


def test_no_file_cites_the_design_notes() -> None:
    hits = []
    for path in _tracked():
        text = _text(path)
        if text is None:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if NOTES in line or SECTION in line:
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_relative_links_in_readmes_resolve() -> None:
    broken = []
    for path in _tracked():
        if path.suffix != ".md" or path.parts[len(ROOT.parts)] == "docs":
            continue                     # docs/ is checked by `mkdocs build --strict`
        for target in LINK.findall(path.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (path.parent / target).exists():
                broken.append(f"{path.relative_to(ROOT)} → {target}")
    assert not broken, "\n".join(broken)
