"""Shared by test_explorers.py and test_widgets.py: small settings, and equality of two results."""

import numpy as np

SMALL = dict(
    spectrum=dict(T=32),
    width=dict(T_range=(8, 32), points=3, seeds=2),
    depth=dict(depth=4, T=8, d=16, seeds=2),
    mask=dict(T=6, depth=4, d=8, seeds=2),
)


def same(a, b):
    """Two compute results hold the same numbers."""
    assert type(a) is type(b)
    assert a.params == b.params
    for name, x in vars(a).items():
        y = getattr(b, name)
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
        elif name != "params":
            assert x == y or (x is None and y is None), name
