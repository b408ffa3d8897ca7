"""``python -m rcteach``: see :mod:`rcteach.tools.cli`."""

from .tools.cli import main

raise SystemExit(main())
