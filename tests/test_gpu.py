"""CPU/CUDA agreement of every simulator, in float32 and float64 (all marked ``gpu``: skipped
without a CUDA device; run them with ``pytest -m gpu tests/test_gpu.py`` on a GPU machine).

Random draws differ between the CPU and CUDA generators, so agreement is tested two ways:
deterministic functions on the same tensors (moved from the CPU) must agree to round-off
(float64: rtol 1e-8; float32: rtol 1e-3, the accumulated rounding of a T = 128 decomposition),
and random simulators must agree in distribution (means over seeds within 5 standard errors).
"""

import math

import pytest
import torch

import rcteach
from rcteach import matfree
from rcteach.tools import bench
from rcteach.depth import propagate, weight_gradients
from rcteach.wu_table import layernorm_runs
from rcteach.width import width_point, width_stable_ranks

pytestmark = pytest.mark.gpu

DTYPES = [torch.float32, torch.float64]
RTOL = {torch.float32: 1e-3, torch.float64: 1e-8}


def _close(a, b, dtype):
    torch.testing.assert_close(a.cpu().to(torch.float64), b.cpu().to(torch.float64), rtol=RTOL[dtype],
                               atol=RTOL[dtype] * 1e-3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_simulators_run_on_cuda(dtype):
    A = rcteach.random_attention(64, batch=3, seed=0, device="cuda", dtype=dtype)
    assert A.device.type == "cuda" and A.dtype == dtype
    torch.testing.assert_close(A.sum(-1), torch.ones(3, 64, device="cuda", dtype=dtype))
    D = rcteach.random_differential_attention(64, 0.5, batch=2, seed=0, device="cuda", dtype=dtype)
    assert D.device.type == "cuda" and D.dtype == dtype
    sr = width_stable_ranks(64, 0.5, seeds=4, seed=0, device="cuda", dtype=dtype)
    assert sr.device.type == "cuda" and sr.dtype == dtype and torch.isfinite(sr).all()
    X0 = rcteach.orthonormal_tokens(32, 64, batch=2, seed=0, device="cuda", dtype=dtype)
    tr = propagate(X0, 4, seed=1)
    assert tr.mu.device.type == "cuda" and tr.mu.dtype == dtype and tr.mu.shape == (5, 2)
    tr = propagate(X0, 3, attention="qk", norm="rms", skip=True, seed=1)
    assert torch.isfinite(tr.stable_rank).all()
    g = weight_gradients(X0, 2, attention="qk", seed=1)
    assert g.W_Q.device.type == "cuda" and torch.isfinite(g.W_V).all()
    runs = layernorm_runs(T=16, d=16, depth=4, seeds=2, device="cuda", dtype=dtype)
    assert runs
    runs = layernorm_runs(T=16, d=16, depth=4, seeds=2, dropout=0.1, rho=0.2, device="cuda", dtype=dtype)
    assert runs["causal"].mu.device.type == "cuda" and torch.isfinite(runs["causal"].mu).all()


def test_causal_dropout_front_on_cuda():
    """The zero front of the chapter "LayerNorm" on CUDA: the mean of mu over layers 32..128 (32 runs)
    within 10% of the closed form (the check ln-causal-dropout-front, run on the GPU)."""
    result = rcteach.run_check("ln-causal-dropout-front", device="cuda")
    assert result.passed, result


@pytest.mark.parametrize("dtype", DTYPES)
def test_deterministic_agreement(dtype):
    A = rcteach.random_attention(128, batch=2, seed=0, dtype=dtype)  # drawn on the CPU
    Ac = A.cuda()
    _close(rcteach.stable_rank(Ac), rcteach.stable_rank(A), dtype)
    _close(rcteach.stable_rank(Ac, gram=True), rcteach.stable_rank(A, gram=True), dtype)
    _close(matfree.stable_rank(Ac), rcteach.stable_rank(A), dtype)
    _close(matfree.spectral_norm(Ac, method="power"), torch.linalg.matrix_norm(A, ord=2), dtype)
    _close(matfree.frobenius_bulk_radius(Ac), matfree.frobenius_bulk_radius(A), dtype)
    _close(rcteach.mu(Ac), rcteach.mu(A), dtype)
    tol = 1e-8 if dtype == torch.float64 else 1e-3
    assert rcteach.spectrum_distance(rcteach.spectrum(Ac[0]), rcteach.spectrum(A[0])) < tol
    _close(rcteach.spectral_gap(Ac).bulk_radius, rcteach.spectral_gap(A).bulk_radius, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_propagate_agreement_explicit_weights(dtype):
    g = torch.Generator().manual_seed(0)
    X0 = torch.randn(2, 16, 24, generator=g, dtype=dtype)
    W_Q, W_K = (torch.randn(24, 8, generator=g, dtype=dtype) / 24 ** 0.5 for _ in range(2))
    W_V = torch.randn(24, 24, generator=g, dtype=dtype) / 24 ** 0.5
    kw = dict(attention="qk", W_Q=W_Q, W_K=W_K, W_V=W_V, norm="rms", skip=True)
    cpu = propagate(X0, 3, **kw)
    gpu = propagate(X0, 3, device="cuda", **kw)
    assert gpu.mu.device.type == "cuda"
    for field in ("mu", "stable_rank", "stable_rank_gram", "norm"):
        _close(getattr(gpu, field), getattr(cpu, field), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_width_agreement_in_distribution(dtype):
    n = 64
    cpu = width_stable_ranks(128, 0.5, seeds=n, seed=0, dtype=dtype).double()
    gpu = width_stable_ranks(128, 0.5, seeds=n, seed=0, device="cuda", dtype=dtype).double().cpu()
    se = math.sqrt((cpu.var() + gpu.var()).item() / n)
    assert abs(cpu.mean() - gpu.mean()).item() <= 5 * se


@pytest.mark.parametrize("dtype", DTYPES)
def test_bench_cases_agree_on_cuda(dtype):
    dev = torch.device("cuda")
    for name, kit, bare in bench._cases(32, 2, dev, dtype, 2):
        k, b = kit(), bare()
        if name == "trajectory":
            for kk, bb in zip([k.mu, k.stable_rank, k.stable_rank_gram, k.norm], b):
                _close(kk, bb, dtype)
        elif name == "spectrum":
            _close(k.abs().sort(-1).values, b.abs().sort(-1).values, dtype)
        else:
            _close(k, b, dtype)
    rows = bench.run((32, 64), batch=2, repeats=1, device="cuda", dtype=dtype)
    assert all(r["peak_mb_rcteach"] >= 0 for r in rows)


def test_width_point_on_cuda():
    w = width_point(32, 0.5, seeds=3, seed=0, device="cuda")
    assert w["stable_rank"].device.type == "cuda" and w["stable_rank_gram"].shape == (3,)
