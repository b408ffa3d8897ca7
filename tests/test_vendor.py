"""`make vendor` without npm or with a failing npm, and the book build's check of the vendored files.

Each test runs the project's Makefile in a temporary directory, with a PATH that lacks npm or
holds a fake npm (no network, nothing installed on the machine).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENDORED = ("static/js/require.js", "static/js/embed-amd.js", "static/mathjax/tex-mml-chtml.js")

FAKE_NPM = """#!/bin/sh
# `npm install --prefix DIR ...` laid out as the three packages would be, or failing (FAIL set)
[ -n "$FAIL" ] && { echo "npm ERR! network unreachable" >&2; exit 1; }
while [ $# -gt 0 ]; do [ "$1" = --prefix ] && dir=$2; shift; done
m=$dir/node_modules
for sub in input output ui a11y adaptors sre; do mkdir -p $m/mathjax/es5/$sub; done
mkdir -p $m/requirejs $m/@jupyter-widgets/html-manager/dist
echo new > $m/requirejs/require.js
echo new > $m/mathjax/es5/tex-mml-chtml.js
for f in embed-amd.js a.woff a.ttf; do echo new > $m/@jupyter-widgets/html-manager/dist/$f; done
"""

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


@pytest.fixture
def project(tmp_path):
    """A directory with the Makefile and a PATH (without npm) of the tools it uses."""
    work = tmp_path / "project"
    work.mkdir()
    shutil.copy(ROOT / "Makefile", work)
    (work / "venv-config").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "make", "ls", "rm", "mkdir", "cp", "mv", "touch", "find", "cat", "echo", "env"):
        path = shutil.which(tool)
        if path:
            (bin_dir / tool).symlink_to(path)
    return SimpleNamespace(dir=work, bin=bin_dir)


def make_vendor(project, **env):
    return subprocess.run(["make", "vendor"], cwd=project.dir, capture_output=True, text=True, timeout=60,
                          env={"PATH": str(project.bin), "HOME": str(project.dir), **env})


def fill_vendor(directory, text="old"):
    for name in VENDORED:
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)


def with_fake_npm(project):
    npm = project.bin / "npm"
    npm.write_text(FAKE_NPM)
    npm.chmod(0o755)


def test_without_npm_says_what_is_missing_and_how_to_get_it(project):
    result = make_vendor(project)
    assert result.returncode != 0
    assert "npm is not installed" in result.stderr and "apt-get install npm" in result.stderr
    for name in VENDORED:
        assert f"missing: vendor/{name}" in result.stderr
    assert not (project.dir / "vendor").exists()


def test_without_npm_a_complete_vendor_is_kept(project):
    fill_vendor(project.dir / "vendor")
    result = make_vendor(project)
    assert result.returncode == 0, result.stderr
    assert "Keeping the existing, complete vendor/" in result.stderr
    assert all((project.dir / "vendor" / name).read_text() == "old" for name in VENDORED)


def test_a_failing_npm_leaves_the_working_vendor(project):
    fill_vendor(project.dir / "vendor")
    with_fake_npm(project)
    result = make_vendor(project, FAIL="1")
    assert result.returncode != 0 and "network unreachable" in result.stderr
    assert all((project.dir / "vendor" / name).read_text() == "old" for name in VENDORED)


def test_a_new_vendor_replaces_the_old_once_complete(project):
    fill_vendor(project.dir / "vendor")
    with_fake_npm(project)
    result = make_vendor(project)
    assert result.returncode == 0, result.stderr
    assert all((project.dir / "vendor" / name).read_text().strip() == "new" for name in VENDORED)
    assert not (project.dir / ".vendor.new").exists() and not (project.dir / ".vendor.old").exists()


# -- the book build's check (book/_ext/offline_html.py) --------------------------------------------

def offline_html():
    spec = importlib.util.spec_from_file_location("offline_html", ROOT / "book" / "_ext" / "offline_html.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_app(confdir, mathjax_path="mathjax/tex-mml-chtml.js"):
    config = SimpleNamespace(html_static_path=["vendor/static"], mathjax_path=mathjax_path,
                             nb_ipywidgets_js={"js/require.js": {}, "js/embed-amd.js": {}})
    return SimpleNamespace(config=config, confdir=str(confdir))


def test_book_build_checks_the_vendored_files(tmp_path):
    from sphinx.errors import ConfigError

    check = offline_html()._check_vendored
    with pytest.raises(ConfigError, match="make vendor"):
        check(fake_app(tmp_path))  # no vendor/ at all
    fill_vendor(tmp_path / "vendor")
    check(fake_app(tmp_path))  # complete: no error
    app = fake_app(tmp_path)
    app.config.html_static_path.append("/nonexistent/sphinx_comments/_static")  # another extension's entry
    check(app)  # still complete: only the vendored files matter
    os.remove(tmp_path / "vendor" / "static" / "js" / "embed-amd.js")
    with pytest.raises(ConfigError, match="js/embed-amd.js"):
        check(fake_app(tmp_path))
    fill_vendor(tmp_path / "vendor")
    with pytest.raises(ConfigError, match="is a URL"):
        check(fake_app(tmp_path, mathjax_path="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js"))
