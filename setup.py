"""The wheel's one build step beyond pyproject.toml: the chapters and the assignments as package data.

The repository keeps one copy of the book's chapters (``book/*.md``) and of the assignments' masters
(``assignments/<name>/<name>.ipynb`` and ``key.py``).  Building a wheel (``pip wheel .``,
``python -m build``, also from the sdist) copies them into ``rcteach/_data/`` of the build tree, never
into the source tree, so that an installed rcteach can write the chapters as notebooks (``rcteach
notebooks DIR``) and build the assignments (``rcteach assign``).  An editable install reads the
checkout's folders instead (:mod:`rcteach._files`).
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
#: folder of the repository -> the files of it that are shipped (globs)
SHIPPED = {"book": ("*.md",), "assignments": ("*/*.ipynb", "*/key.py")}


class BuildPyWithData(build_py):
    """``build_py``, then the shipped files copied to ``<build_lib>/rcteach/_data/<folder>/``."""

    def run(self):
        super().run()
        if self.editable_mode:  # the package is the checkout: rcteach._files reads book/ and assignments/
            return
        target = Path(self.build_lib, "rcteach", "_data")
        shutil.rmtree(target, ignore_errors=True)  # no file of an earlier build survives in build/
        for folder, patterns in SHIPPED.items():
            files = sorted(f for pattern in patterns for f in (ROOT / folder).glob(pattern) if f.is_file())
            if not files:
                raise FileNotFoundError(f"nothing to ship in {ROOT / folder} ({', '.join(patterns)})")
            for src in files:
                dst = target / src.relative_to(ROOT)
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)


setup(cmdclass={"build_py": BuildPyWithData})
