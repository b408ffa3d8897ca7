"""Degenerate but valid inputs for every spectral function of rcteach, each with its exact answer.

Uniform and rank-one attention, exactly repeated spectra, identity and permutation maps, zero and
identical tokens, T from 2 to 260, d = 1, windows >= T, scales 1e+-150, and the layers, sweeps and
experiments built on them.  Each :class:`Case` computes one public function on one such input and
raises (``AssertionError`` for a wrong value) unless it gets the closed-form answer, or the clear
error the input deserves (a zero matrix has no stable rank).  The references are closed forms, never
the function under test.

``tests/test_degenerate.py`` runs them (also with torch's solvers forced to fail) and
``tests/test_degenerate_mkl.py`` under each MKL code path.  Run as a script to count the failures
(``--spectral``: only the cases that reach an eigen- or singular-value driver), e.g. on another checkout:
``PYTHONPATH=/path/to/checkout python tests/_degenerate.py``; exit status 1 if any fails.
"""

from __future__ import annotations

import cmath
import math
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

import rcteach
from rcteach import equilibria, grid, masks, matfree, metrics, theory, top_eigen, training, width
from rcteach.explorers.width import width_data

F64 = torch.float64
ALL_T = tuple(range(2, 261))  # every T for the cheap functions
# a sample for the costlier ones: small T, sizes where MKL's geev fails on some CPUs, and the large end
SAMPLED_T = (2, 3, 4, 5, 7, 8, 16, 31, 48, 49, 57, 58, 64, 71, 72, 73, 75, 96, 113, 128, 129, 130, 200, 256, 260)
SCALES = (1e150, 1e-150)


@dataclass(frozen=True)
class Case:
    """One public function on one degenerate input: ``run()`` raises unless it gets the exact answer.

    ``spectral``: the function reaches a dense eigen- or singular-value decomposition (so it is also run
    with torch's solvers forced to fail)."""

    name: str
    run: Callable[[], None]
    spectral: bool = True


def close(got, want, *, atol=0.0, rtol=0.0, what="value"):
    """Assert |got - want| <= atol + rtol |want| elementwise (finite), with a message naming ``what``."""
    got = (got if isinstance(got, torch.Tensor) else torch.tensor(got, dtype=F64)).detach().cpu()
    want = torch.as_tensor(want, dtype=got.dtype if got.is_complex() or got.is_floating_point() else F64).cpu()
    got, want = torch.broadcast_tensors(got, want)
    if not torch.isfinite(got).all():
        raise AssertionError(f"{what}: non-finite result {got}")
    err = (got - want).abs()
    bound = atol + rtol * want.abs()
    if not (err <= bound).all():
        worst = int((err - bound).argmax())
        raise AssertionError(f"{what}: got {got.reshape(-1)[worst].item()}, want {want.reshape(-1)[worst].item()} "
                             f"(tolerance atol={atol}, rtol={rtol})")


def raises(fn, error, match):
    """Assert that ``fn()`` raises ``error`` with ``match`` in its message."""
    try:
        fn()
    except error as e:
        if match not in str(e):
            raise AssertionError(f"{error.__name__} without {match!r}: {e}") from None
        return
    raise AssertionError(f"expected {error.__name__} ({match!r}), nothing raised")


# ---- the inputs ---------------------------------------------------------------------------------

def uniform(T):
    """11^T/T: the attention of zero logits; eigenvalues 1, 0 (T - 1 times), singular values 1, 0, ..."""
    return torch.full((T, T), 1.0 / T, dtype=F64)


def rank_one(T, seed=0):
    """1 p^T, p a probability vector: every token attends alike; idempotent, eigenvalues 1, 0, ..."""
    p = torch.rand(T, generator=torch.Generator().manual_seed(seed), dtype=F64) + 0.5
    return torch.ones(T, 1, dtype=F64) * (p / p.sum())[None, :]


def cycle(T):
    """The cyclic shift (permutation) e_i -> e_{i+1}: eigenvalues the T-th roots of unity."""
    return torch.roll(torch.eye(T, dtype=F64), 1, dims=0)


def roots_of_unity(T):
    return torch.tensor([cmath.exp(2j * math.pi * k / T) for k in range(T)], dtype=torch.complex128)


def blocks(T, k):
    """Block-diagonal uniform attention with k blocks (sizes differ by at most 1): eigenvalue 1 k times, 0 else."""
    A = torch.zeros(T, T, dtype=F64)
    for idx in torch.arange(T).tensor_split(k):
        A[idx[:, None], idx[None, :]] = 1.0 / len(idx)
    return A


def identical_tokens(T, d, seed=0):
    """T copies of one random token (rank one, mu = 0)."""
    x = torch.randn(1, d, generator=torch.Generator().manual_seed(seed), dtype=F64)
    return x.expand(T, d).clone()


def tokens(T, d, seed=0):
    return torch.randn(T, d, generator=torch.Generator().manual_seed(seed), dtype=F64)


def near_complete_mask(T):
    """The complete mask without the pair (0, T - 1): strongly connected, not symmetric (T >= 3).

    A = D^{-1} M = 11^T/T + e_0 r^T has rank 2, A1 = 1, so |lambda_2| = tr A - 1 = 1/(T (T - 1))."""
    M = torch.ones(T, T, dtype=torch.bool)
    M[0, T - 1] = False
    return M


# ---- the cases ----------------------------------------------------------------------------------

def _one_zeros(T):
    v = torch.zeros(T, dtype=F64)
    v[0] = 1.0
    return v


def _torch_route(m):
    """Whether a stable rank with an (m, m) Gram matrix reaches a torch solver (through rcteach.linalg): below
    top_eigen.SYEVR_MIN_SIZE; above, scipy's syevr (another LAPACK) or the certified Lanczos iteration."""
    return m < top_eigen.SYEVR_MIN_SIZE


def _every_T(T):
    """The cheap cases, run at every T: the spectrum and the stable rank of uniform attention."""
    yield Case(f"spectrum/uniform/T={T}", lambda: close(rcteach.spectrum(uniform(T)).abs(), _one_zeros(T), atol=1e-10,
                                                         what="|eigenvalues| of 11^T/T"))
    yield Case(f"stable_rank/uniform/T={T}", lambda: close(rcteach.stable_rank(uniform(T)), 1.0, rtol=1e-12,
                                                            what="stable rank of 11^T/T"), spectral=_torch_route(T))


def _stable_ranks(T):
    """Stable ranks of identical tokens (1) and the identity (T), all methods; zero tokens (an error); numerical
    rank."""
    X1 = identical_tokens(T, 7)
    yield Case(f"stable_rank/identical_tokens/T={T}", lambda: close(
        torch.stack([rcteach.stable_rank(X1), rcteach.stable_rank(X1, gram=True)]), 1.0, rtol=1e-12,
        what="stable ranks of identical tokens"))
    yield Case(f"stable_rank/identity/T={T}", lambda: close(
        torch.stack([rcteach.stable_rank(torch.eye(T, dtype=F64)),
                     rcteach.stable_rank(torch.eye(T, dtype=F64), gram=True)]),
        float(T), rtol=1e-12, what="stable ranks of I (a T-fold singular value)"), spectral=_torch_route(T))
    for method in ("lanczos", "power"):
        yield Case(f"stable_rank_{method}/identical_tokens/T={T}", lambda method=method: close(
            torch.stack([matfree.stable_rank(X1, method=method), matfree.stable_rank(X1, gram=True, method=method)]),
            1.0, rtol=1e-10, what=f"{method} stable ranks of identical tokens"), spectral=method == "lanczos")
        yield Case(f"stable_rank_{method}/identity/T={T}", lambda method=method: close(
            matfree.stable_rank(torch.eye(T, dtype=F64), method=method), float(T), rtol=1e-10,
            what=f"{method} stable rank of I"), spectral=method == "lanczos")  # power iteration: no decomposition
    yield Case(f"stable_rank/zero_tokens/T={T}", lambda: raises(
        # refused first
        lambda: rcteach.stable_rank(torch.zeros(T, 5, dtype=F64)), ValueError, "nonzero"), spectral=False)
    yield Case(f"numerical_rank/identical_tokens/T={T}", lambda: close(equilibria.numerical_rank(X1), 1, what="rank"))


def _gap(A):
    gap = rcteach.spectral_gap(A)
    return torch.stack([gap.outlier.real, gap.bulk_radius])


def _spectra(T):
    """spectral_gap, spectral_radius, spectrum on uniform, rank-one, identity, cycle and block inputs."""
    one_zeros = _one_zeros(T)
    tol = 1e-10
    yield Case(f"spectral_gap/uniform/T={T}", lambda: close(_gap(uniform(T)), torch.tensor([1.0, 0.0], dtype=F64),
                                                             atol=tol, what="(outlier, bulk radius) of 11^T/T"))
    yield Case(f"spectral_radius/uniform/T={T}", lambda: close(equilibria.spectral_radius(uniform(T)), 1.0, atol=tol,
                                                                what="spectral radius of 11^T/T"))
    yield Case(f"spectrum/rank_one/T={T}", lambda: close(rcteach.spectrum(rank_one(T)).abs(), one_zeros, atol=1e-8,
                                                          what="|eigenvalues| of 1 p^T"))
    yield Case(f"spectral_gap/identity/T={T}", lambda: close(_gap(torch.eye(T, dtype=F64)), 1.0, atol=tol,
                                                              what="(outlier, bulk radius) of I"))
    yield Case(f"spectrum/cycle/T={T}", lambda: close(
        metrics.spectrum_distance(rcteach.spectrum(cycle(T)), roots_of_unity(T)), 0.0, atol=1e-10,
        what="distance to the T-th roots of unity"))
    if T >= 4:
        k = 2 + T % 3
        want = torch.zeros(T, dtype=F64)
        want[:k] = 1.0
        yield Case(f"spectrum/blocks/T={T}", lambda: close(rcteach.spectrum(blocks(T, k)).abs(), want, atol=tol,
                                                            what=f"|eigenvalues| of {k} uniform blocks"))


def _batched(T):
    """A batch mixing a degenerate element with random ones: every element right, the others as alone."""
    def run():
        A = rcteach.random_attention(T, 1.0, batch=3, seed=T)
        A[1] = uniform(T)
        ev = rcteach.spectrum(A)
        close(ev[1].abs()[0], 1.0, atol=1e-10, what="outlier of the uniform element")
        close(ev[1].abs()[1:], 0.0, atol=1e-10, what="bulk of the uniform element")
        for i in (0, 2):
            close(metrics.spectrum_distance(ev[i], rcteach.spectrum(A[i])), 0.0, atol=1e-10,
                  what="a random element, batched vs alone")
    yield Case(f"spectrum/batch/T={T}", run)


def _d_one(T):
    """Width d = 1: every stable rank is 1."""
    X = tokens(T, 1)
    yield Case(f"stable_rank/d=1/T={T}", lambda: close(
        torch.stack([rcteach.stable_rank(X), rcteach.stable_rank(X, gram=True),
                     matfree.stable_rank(X, method="lanczos")]), 1.0, rtol=1e-12, what="stable ranks at d = 1"))


def _masks(T):
    """consensus_rate and consensus_transient_layer: complete, near-complete, identity, cycle, windows >= T."""
    yield Case(f"consensus_rate/complete/T={T}", lambda: close(
        masks.consensus_rate(masks.make_mask("complete", T)), 0.0, atol=1e-12, what="|lambda_2| of the complete mask"))
    yield Case(f"consensus_rate/sliding_window>=T/T={T}", lambda: close(
        masks.consensus_rate(masks.make_mask("sliding", T, window=T)), 0.0, atol=1e-12, what="window T: complete"))
    yield Case(f"consensus_rate/sliding_causal_window>=T/T={T}", lambda: close(
        masks.consensus_rate(masks.make_mask("sliding-causal", T, window=T + 3)), 0.5, atol=1e-12,
        what="window > T: causal"), spectral=False)  # single-token components only: no decomposition
    yield Case(f"consensus_rate/identity/T={T}", lambda: close(
        masks.consensus_rate(torch.eye(T, dtype=torch.bool)), 1.0, atol=1e-12, what="no mixing"), spectral=False)
    yield Case(f"consensus_rate/cycle/T={T}", lambda: close(
        masks.consensus_rate(cycle(T).bool()), 1.0, atol=1e-12, what="a periodic graph"))
    if T >= 3:
        yield Case(f"consensus_rate/near_complete/T={T}", lambda: close(
            masks.consensus_rate(near_complete_mask(T)), 1.0 / (T * (T - 1)), atol=1e-12,
            what="|lambda_2| = 1/(T(T-1))"))
    yield Case(f"consensus_transient_layer/complete/T={T}", lambda: close(
        masks.consensus_transient_layer(masks.make_mask("complete", T), 1e-6), 1, what="one layer to consensus"),
        spectral=False)
    yield Case(f"sliding_consensus_rate/window>=T-1/T={T}", lambda: close(
        [theory.sliding_consensus_rate(T, w) for w in (T - 1, T, 2 * T)], 0.0, what="complete mask: exactly 0"),
        spectral=False)


def _scales(T):
    """Scales 1e+-150: every function scale-free or homogeneous, as exact."""
    A = rcteach.random_attention(T, 1.0, seed=T)
    X = tokens(T, T + 3, seed=T)
    ev, sr, sr_gram = rcteach.spectrum(A), rcteach.stable_rank(X), rcteach.stable_rank(X, gram=True)
    for s in SCALES:
        yield Case(f"spectrum/scale={s:g}/T={T}", lambda s=s: close(rcteach.spectrum(s * A) / s, ev, atol=1e-12,
                                                                    what="spectrum(sA)/s"))
        yield Case(f"spectral_gap_ratio/scale={s:g}/T={T}", lambda s=s: close(
            rcteach.spectral_gap(s * A).ratio, rcteach.spectral_gap(A).ratio, rtol=1e-10, what="gap ratio"))
        yield Case(f"spectral_radius/scale={s:g}/T={T}", lambda s=s: close(
            equilibria.spectral_radius(s * torch.eye(T, dtype=F64)), s, rtol=1e-12, what="spectral radius of sI"))
        yield Case(f"stable_rank/scale={s:g}/T={T}", lambda s=s: close(
            torch.stack([rcteach.stable_rank(s * X), rcteach.stable_rank(s * X, gram=True)]),
            torch.stack([sr, sr_gram]),
            rtol=1e-12, what="stable ranks of sX"), spectral=_torch_route(T))
        yield Case(f"stable_rank_lanczos/scale={s:g}/T={T}", lambda s=s: close(
            matfree.stable_rank(s * X, method="lanczos"), sr, rtol=1e-8, what="Lanczos stable rank of sX"))
        yield Case(f"spectral_norm/scale={s:g}/T={T}", lambda s=s: close(
            matfree.spectral_norm(s * torch.eye(T, dtype=F64)) / s, 1.0, rtol=1e-12, what="||sI||_2 / s"))
        yield Case(f"numerical_rank/scale={s:g}/T={T}", lambda s=s: close(
            equilibria.numerical_rank(s * X), T, what="rank of sX"))
        yield Case(f"mu/scale={s:g}/T={T}", lambda s=s: close(rcteach.mu(s * X) / s, rcteach.mu(X), rtol=1e-12,
                                                              what="mu(sX)/s"), spectral=False)


# every point that had NaN (T = 8: test_grid)
GRID_POINTS = ((2, 1.0), (2, 0.5), (2, 0.2), (3, 1.0), (3, 0.5), (4, 1.0))


def _grid(points=GRID_POINTS):
    """grid.simulate: every configuration's every value finite, at the smallest T (all that failed before)."""
    for T, gamma in points:
        def run(T=T, gamma=gamma):
            res = grid.simulate(T, gamma)
            bad = [f"{name}:{k}" for name, m in res.items() for k, v in m.items() if not torch.isfinite(v).all()]
            if bad:
                raise AssertionError(f"non-finite values in {bad}")
            for name, m in res.items():  # stable ranks in [1, T]
                for k in ("stable_rank", "stable_rank_gram"):
                    if not ((m[k] >= 1 - 1e-4) & (m[k] <= T + 1e-4)).all():
                        raise AssertionError(f"{name}:{k} outside [1, T]: {m[k]}")
        yield Case(f"grid.simulate/T={T}/gamma={gamma}", run)

    def top_and_rest():
        low = top_eigen.SYEVR_MIN_SIZE  # both paths of top_and_rest: batched eigvalsh below it, syevr from it
        for m in (3, low - 1, low, low + 12):
            x = torch.randn(2, m, 1, generator=torch.Generator().manual_seed(m), dtype=F64)
            S = torch.cat([x @ x.mT, torch.eye(m, dtype=F64)[None]])  # rank one, and a repeated spectrum
            lam, rest = grid.top_and_rest(S)
            close(lam, torch.tensor([*x.square().sum((-2, -1)), 1.0], dtype=F64), rtol=1e-12, what=f"top, m={m}")
            close(rest, torch.tensor([0.0, 0.0, m - 1.0], dtype=F64), atol=1e-12, rtol=1e-12,
                  what=f"rest, m={m}")
    yield Case("grid.top_and_rest/rank_one_and_identity", top_and_rest)


def _layers_and_experiments():
    """propagate, width, training and the width explorer on degenerate settings."""
    def orthogonal_d1():
        tr = rcteach.propagate(tokens(6, 1, seed=1)[None].expand(2, 6, 1), 3, seed=0, values="orthogonal")
        close(tr.stable_rank, 1.0, rtol=1e-12, what="stable rank at d = 1")
        close(tr.mu, tr.mu.clamp_min(0.0), what="finite mu")
    yield Case("propagate/values=orthogonal/d=1", orthogonal_d1)

    def identical():
        X0 = identical_tokens(8, 16)[None]
        for attention in ("iid", "qk"):
            tr = rcteach.propagate(X0, 4, seed=0, attention=attention, norm="rms", skip=True)
            close(torch.stack([tr.stable_rank, tr.stable_rank_gram]), 1.0, rtol=1e-10, what=f"{attention} collapsed")
            close(tr.mu, 0.0, atol=1e-12, what=f"{attention}: mu stays 0")
    yield Case("propagate/identical_tokens", identical)

    def uniform_layers():
        tr = rcteach.propagate(rcteach.orthonormal_tokens(8, 16, batch=2, seed=0), 3, seed=0, s2=0.0)
        close(tr.stable_rank[1:], 1.0, rtol=1e-10, what="uniform attention: rank one after one layer")
    yield Case("propagate/s2=0", uniform_layers)

    def float32_near_rank_one():
        g = torch.Generator().manual_seed(5)
        x = torch.randn(16, 1, 64, generator=g)
        X = x + 1e-6 * torch.randn(16, 32, 64, generator=g)  # float32 tokens at 1e-6 of consensus
        close(rcteach.stable_rank(X), 1.0, rtol=1e-5, what="float32 stable rank near rank one")
        close(rcteach.stable_rank(X, gram=True), 1.0, rtol=1e-5, what="float32 Gram stable rank near rank one")
    yield Case("stable_rank/float32_near_rank_one", float32_near_rank_one)

    yield Case("width_stable_ranks/s2=0", lambda: close(
        torch.cat([width.width_stable_ranks(16, 0.5, 0.0, seeds=2, seed=0),
                   width.width_stable_ranks(16, 0.5, 0.0, seeds=2, seed=0, gram=True)]), 1.0, rtol=1e-12,
        what="uniform attention: rank one"))
    yield Case("width_stable_ranks/centred/s2=0", lambda: raises(
        lambda: width.width_stable_ranks(16, 0.5, 0.0, centred=True, seed=0), ValueError, "undefined"))
    yield Case("width_stable_ranks/d=1", lambda: close(width.width_stable_ranks(9, 9.0, seeds=2, seed=0), 1.0,
                                                       rtol=1e-12, what="d = 1"))
    yield Case("noniso_width_ranks/s2=0", lambda: raises(
        lambda: width.noniso_width_ranks(16, 8, 0.0, seeds=2), ValueError, "undefined"))
    yield Case("noniso_width_ranks/d=1", lambda: close(width.noniso_width_ranks(16, 1, seeds=2), 1.0, rtol=1e-12,
                                                       what="d = 1"))

    def explorer_s2_zero():
        data = width_data(s2=0.0, points=2, seeds=2)
        close(data.stable_rank, 1.0, rtol=1e-12, what="A X0 W_V at s2 = 0")
        if not torch.isnan(torch.as_tensor(data.stable_rank_centred)).all():
            raise AssertionError("A_perp = 0 at s2 = 0: its stable rank must be NaN (undefined), as documented")
    yield Case("width_data/s2=0", explorer_s2_zero)

    def copy_small_vocab():
        run = training.train_copy("A_perp", T=8, d=16, vocab=2, steps=1, depth=4)
        close(run.stable_rank, run.stable_rank.clamp(1.0, 8.0), what="stable ranks in [1, T]")
    yield Case("train_copy/A_perp/vocab=2", copy_small_vocab, spectral=False)  # its spectra: stable_rank's, above

    def sliding_rate_regime():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            theory.sliding_consensus_rate(32, 10)
        if not any(issubclass(w.category, UserWarning) for w in caught):
            raise AssertionError("w/T = 0.31: expected a UserWarning (the leading order is off by O(w/T))")
        raises(lambda: theory.sliding_consensus_rate(8, 6), ValueError, "negative")
    yield Case("sliding_consensus_rate/w_not_small", sliding_rate_regime, spectral=False)

    def equilibrium():
        W_V, B = equilibria.two_token_example()
        X = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=F64)
        e = equilibria.analyse(X, W_V, B, mask=masks.make_mask("causal", 2))
        close(torch.tensor([e.residual, e.spectral_radius, e.rank]), torch.tensor([0.0, 0.5, 2.0], dtype=F64),
              atol=1e-12, what="(residual, rho, rank) of the (e1, e2) fixed point")
    yield Case("equilibria.analyse/two_tokens", equilibrium)


def cases(Ts=ALL_T, sampled=SAMPLED_T, grid_points=GRID_POINTS) -> list[Case]:
    """Every case: the cheap families at every T in ``Ts``, the costlier ones at ``sampled``, the grid at
    ``grid_points`` (T, gamma)."""
    out = [case for T in Ts for case in _every_T(T)]
    for family in (_spectra, _batched, _stable_ranks, _d_one, _masks, _scales):
        out += [case for T in sampled for case in family(T)]
    return out + [*_grid(grid_points), *_layers_and_experiments()]


def families(selected) -> dict[str, list[Case]]:
    """``selected`` grouped by family: the name without its ``/T=...`` part."""
    out = {}
    for case in selected:
        out.setdefault(case.name.rsplit("/T=", 1)[0], []).append(case)
    return out


def scan(selected) -> list[tuple[str, str]]:
    """Run ``selected`` cases; the (name, error) of each failure."""
    failures = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in selected:
            try:
                case.run()
            except Exception as e:  # noqa: BLE001 -- the scan counts every kind of failure
                failures.append((case.name, f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"))
    return failures


if __name__ == "__main__":
    import sys

    every = [c for c in cases() if c.spectral or "--spectral" not in sys.argv[1:]]
    failed = scan(every)
    print(f"{len(failed)} of {len(every)} degenerate cases fail")
    for family, group in families([c for c in every if c.name in dict(failed)]).items():
        print(f"  {len(group):4d}  {family}: {dict(failed)[group[0].name]}")
    sys.exit(1 if failed else 0)
