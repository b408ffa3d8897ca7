"""``python -m rcteach``: see :mod:`rcteach.cli`."""

from .cli import main

raise SystemExit(main())
