"""Theory checks: closed-form predictions against simulation (``python -m rcteach check``).

Importing this package registers every check; :func:`run_check` runs one by name.
"""

from . import (  # noqa: F401  (registration side effects)
    centring,
    counterexample,
    depth,
    equilibria,
    figures,
    gap,
    layernorm,
    leading_term,
    maps,
    mask_collapse,
    mask_dynamics,
    masks,
    models,
    residual,
    spectra,
    training,
    width,
)
from .registry import (
    Check,
    CheckFailed,
    CheckResult,
    Comparison,
    all_checks,
    check,
    register,
    mutants_table,
    off_by,
    off_exponent,
    results_html,
    results_table,
    run_check,
    run_checks,
)

__all__ = ["Check", "CheckFailed", "CheckResult", "Comparison", "all_checks", "check", "mutants_table", "off_by",
           "off_exponent", "register", "results_html", "results_table", "run_check", "run_checks"]
