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
