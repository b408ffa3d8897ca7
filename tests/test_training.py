import math

import pytest
import torch

from rcteach.training import train_copy


def test_records_and_reproducible():
    a = train_copy("skip", T=6, d=8, vocab=5, depth=2, steps=4, batch=4, seed=3)
    b = train_copy("skip", T=6, d=8, vocab=5, depth=2, steps=4, batch=4, seed=3)
    for field in ("loss", "grad_norm", "grad_norm_qk", "stable_rank"):
        assert getattr(a, field).shape == (5,)
        assert torch.equal(torch.nan_to_num(getattr(a, field)), torch.nan_to_num(getattr(b, field)))
    assert math.isnan(a.grad_norm[-1]) and (a.grad_norm_qk[:-1] <= a.grad_norm[:-1]).all()


def test_collapsed_start_for_A():
    run = train_copy("A", T=16, d=32, vocab=16, depth=4, steps=1, seed=0)
    assert run.loss[0] == pytest.approx(math.log(16), rel=0.01)  # collapsed output: chance level
    assert run.stable_rank[0] < 1.05


@pytest.mark.parametrize("kwargs, name", [(dict(init="B"), "init"), (dict(T=1), "T"), (dict(lr=0.0), "lr"),
                                          (dict(steps=0), "steps")])
def test_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        train_copy(**kwargs)
