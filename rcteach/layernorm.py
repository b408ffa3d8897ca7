"""Deprecated alias of :mod:`rcteach.wu_table` (the Wu et al. table experiment): every name warns."""

from . import _deprecation, wu_table

__getattr__ = _deprecation.moved_attributes(__name__, {name: f"rcteach.wu_table:{name}" for name in wu_table.__all__})
