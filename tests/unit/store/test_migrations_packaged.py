"""The Alembic scripts ship inside the package as plain files: a wheel or an sdist carries them whether
or not the tool that builds it follows symlinks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import netprobe
from netprobe.store.migrate import migrations_dir

ROOT = Path(__file__).resolve().parents[3]


def test_migrations_are_a_real_directory_inside_the_package() -> None:
    found = migrations_dir()
    package = Path(netprobe.__file__).resolve().parent
    assert found.is_relative_to(package)
    assert not found.is_symlink() and not any(p.is_symlink() for p in found.rglob("*"))
    assert sorted(p.name for p in (found / "versions").glob("0*.py"))[0] == "0001_initial.py"


def test_no_tracked_symlinks_in_the_package() -> None:
    listed = subprocess.run(["git", "ls-files", "-s", "netprobe"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.splitlines()
    assert listed, "git ls-files listed nothing: not a checkout?"
    assert [line for line in listed if line.startswith("120000")] == []
