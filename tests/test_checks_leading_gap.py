"""The checks of rcteach/checks/leading_term.py and gap.py pass in quick mode, fast, on the CPU."""

import pytest

from rcteach.checks import all_checks, run_check

NAMES = ["logit-mean-cancels", "leading-term-residual", "entry-sd", "frobenius-norm", "centred-frobenius-norm",
         "frobenius-next-order", "top-singular-value", "bulk-median-modulus", "sv-median", "sv-edge-light-tails",
         "qk-logit-variance", "qk-bulk-radius", "qk-frobenius-norm"]


def test_registered_with_notes():
    reg = all_checks()
    for name in NAMES:
        assert name in reg and reg[name].tolerance_note and reg[name].claim


@pytest.mark.parametrize("name", NAMES)
def test_quick_check_passes(name):
    result = run_check(name, device="cpu")
    assert result.passed, repr(result)


def test_top_singular_value_rejects_zero_variance():
    with pytest.raises(ValueError, match="s2"):
        run_check("top-singular-value", s2=0.0, T=8, seeds=2, device="cpu")
