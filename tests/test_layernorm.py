import pytest

from rcteach import layernorm as ln


def test_logit_s2():
    assert ln.logit_s2(768, "layernorm") == pytest.approx(1 / (9 * 768**2))
    assert ln.logit_s2(768, "rms") == pytest.approx(1 / 9)


def test_table_shape_and_reproducible():
    kw = dict(T=8, d=16, runs=2, layers=(0, 4), window=1)
    rows = ln.layernorm_table(**kw, seed=0)
    assert len(rows) == 8 and {r.mask for r in rows} == set(ln.MASK_KINDS)
    assert rows == ln.layernorm_table(**kw, seed=0)
    assert all(0 <= r.relative <= 1 + 1e-12 for r in rows)
    assert "complete" in ln.format_table(rows, published=ln.PUBLISHED_TABLE)


def test_errors():
    with pytest.raises(ValueError):
        ln.layernorm_runs(T=8, d=8, depth=2, norm="bad")
    with pytest.raises(ValueError):
        ln.layernorm_table(T=8, d=8, runs=1, layers=(0, 4), depth=2)
    with pytest.raises(ValueError):
        ln.layernorm_runs(T=8, d=8, depth=2, masks=("nope",))
