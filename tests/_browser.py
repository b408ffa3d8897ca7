"""Shared helpers of the browser tests: Debian's chromium driven by PyPI playwright.

Playwright's own browser download does not work here, so the tests use /usr/bin/chromium
(`.ci/run` installs it with apt) and skip, saying why, where it or playwright is missing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def skip_reason() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "PyPI playwright is not installed (pip install -r requirements.txt)"
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        return f"Debian's chromium is not installed at {CHROMIUM} (apt-get install -y chromium; .ci/run does)"
    return None


needs_browser = pytest.mark.skipif(skip_reason() is not None, reason=skip_reason() or "")


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
