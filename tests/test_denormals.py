"""Flush-to-zero (rcteach.denormals): scoped, nested, restored on errors; only subnormal values change."""

import contextlib

import pytest
import torch

from rcteach import denormals, grid

TINY = torch.finfo(torch.float32).tiny  # 2^-126, the smallest normal float32


def test_flush_denormals_is_scoped_nested_and_restored_on_errors():
    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush subnormals (no DAZ)")
    assert not denormals.flushing()
    with denormals.flush_denormals():
        assert denormals.flushing()
        assert (torch.tensor(TINY) * 0.5).item() == 0.0  # a subnormal result is flushed
        with denormals.flush_denormals(False):
            assert not denormals.flushing() and (torch.tensor(TINY) * 0.5).item() == TINY / 2
        assert denormals.flushing()  # the inner block restored what it found
        with pytest.raises(RuntimeError):
            with denormals.flush_denormals():
                raise RuntimeError("inside")
        assert denormals.flushing()
    assert not denormals.flushing()
    with pytest.raises(RuntimeError), denormals.flush_denormals():
        raise RuntimeError("outermost")
    assert not denormals.flushing()
    with denormals.for_float32(torch.float64, "cpu"):
        assert not denormals.flushing()  # float64 work is left alone
    with pytest.raises(TypeError, match="enabled"):
        with denormals.flush_denormals(1):
            pass


def test_the_grid_with_flush_to_zero_differs_only_below_the_normal_range(monkeypatch):
    """A(X) collapses into float32's subnormal range within 4 layers at T = 16: a relative_mu whose state
    entries are all subnormal (so relative_mu < sqrt(T (T + 1)) 2^-126 < 100 2^-126) becomes 0, and every other
    value (stable ranks, log norms, larger relative_mu) is bit-identical."""
    names = ["A(X)", "A + LN"]
    flushed = grid.simulate(16, 1.0, names, depth=5, seeds=4, seed=0)
    monkeypatch.setattr(grid.denormals, "for_float32", lambda *args: contextlib.nullcontext())
    plain = grid.simulate(16, 1.0, names, depth=5, seeds=4, seed=0)
    for name in names:
        for metric in ("stable_rank", "stable_rank_gram", "log_norm"):
            assert torch.equal(flushed[name][metric], plain[name][metric]), (name, metric)
        a, b = flushed[name]["relative_mu"], plain[name]["relative_mu"]
        changed = a != b
        assert (a[changed] == 0).all() and (b[changed] < 100 * TINY).all(), (a[changed], b[changed])
    assert (flushed["A(X)"]["relative_mu"] != plain["A(X)"]["relative_mu"]).any()  # the test bites
