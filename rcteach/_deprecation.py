"""Old names that keep working for one release, each with a ``DeprecationWarning`` naming the new one.

Four shapes of rename, one helper each:

* a renamed keyword argument: :func:`renamed_keywords`, a decorator;
* a renamed or moved module attribute (function, constant, module): :func:`moved_attributes`, which
  builds the module's ``__getattr__``;
* a renamed function that must stay callable under its old name: :func:`renamed_function`;
* a moved module (``import rcteach.grading`` for :mod:`rcteach.tools.grading`): :func:`moved_modules`.

rcteach itself never uses an old name (``pyproject.toml`` turns such warnings into errors).
"""

from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__all__ = ["warn", "renamed_keywords", "moved_attributes", "renamed_function", "moved_modules"]


def warn(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Emit ``DeprecationWarning("<old> is deprecated; use <new>")``, attributed to the caller's caller."""
    warnings.warn(f"{old} is deprecated; use {new} (the old name goes in the next release)", DeprecationWarning,
                  stacklevel=stacklevel)


def renamed_keywords(**renames: str):
    """Decorator: accept each old keyword (``old="new"``) as the new one, with a warning.

    Passing both the old and the new keyword is a ``TypeError``.
    """

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{fn.__name__}() got both {old}= (deprecated) and {new}=; pass {new}= only")
                    warn(f"{fn.__name__}({old}=...)", f"{fn.__name__}({new}=...)")
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return wrapper

    return decorate


def moved_attributes(module: str, moved: dict[str, str]):
    """A module-level ``__getattr__`` serving old names: ``moved`` maps old name -> ``"module:new_name"``
    (``"module:"`` for a whole module)."""

    def __getattr__(name):
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        target, _, attr = moved[name].partition(":")
        warn(f"{module}.{name}", f"{target}.{attr}" if attr else target)
        new = importlib.import_module(target)
        return getattr(new, attr) if attr else new

    return __getattr__


def renamed_function(fn, old: str, new: str):
    """``fn`` under its old name ``old``, warning at every call that ``new`` replaces it (dotted paths)."""

    @functools.wraps(fn)
    def alias(*args, **kwargs):
        warn(old, new)
        return fn(*args, **kwargs)

    return alias


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import hook serving each old module name (``moved``: old dotted name -> new) as the new module."""

    def __init__(self, moved: dict[str, str]):
        self.moved = moved

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in self.moved else None

    def create_module(self, spec):
        warn(spec.name, self.moved[spec.name], stacklevel=3)  # the importer (warnings skips importlib frames)
        return importlib.import_module(self.moved[spec.name])  # sys.modules[old] is the new module itself

    def exec_module(self, module):
        pass


def moved_modules(moved: dict[str, str]) -> None:
    """Keep ``import <old>`` working for each moved module (``moved``: old dotted name -> new), with a warning."""
    sys.meta_path.append(_MovedModules(moved))
