"""Pages rendered by a real browser: headless Chromium (Debian package `chromium`, installed by .ci/run)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
from PIL import Image


def screenshot(page: Path, work: Path, width: int, height: int) -> np.ndarray:
    """The page as Chromium draws it at width × height, as an RGB pixel array."""
    browser = shutil.which("chromium")
    assert browser is not None, "chromium is not installed (Debian package chromium; .ci/run installs it)"
    shot = work / "shot.png"
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         f"--user-data-dir={work / 'profile'}", "--force-device-scale-factor=1",
         f"--screenshot={shot}", f"--window-size={width},{height}", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    return np.asarray(Image.open(shot).convert("RGB"))


def load_png(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"))


def coloured_pixels(pixels: np.ndarray, rgb: tuple[int, int, int], tolerance: int = 24) -> int:
    """How many pixels are within `tolerance` of `rgb` on every channel."""
    diff = np.abs(pixels.astype(np.int16) - np.asarray(rgb, np.int16))
    return int((diff.max(axis=2) <= tolerance).sum())


def ink(pixels: np.ndarray) -> int:
    """Pixels of a saturated colour (a chart's marks; text, grids and backgrounds are grey or white)."""
    p = pixels.astype(np.int16)
    return int((p.max(axis=2) - p.min(axis=2) > 60).sum())
