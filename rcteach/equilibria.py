"""Equilibria of self-attention with LayerNorm (Wu et al., 2024): layer map, fixed points, stability.

Introduced in chapter "Equilibria of every rank" (book/11_equilibria.md).

N is the number of tokens (T elsewhere in rcteach): the examples here have exactly as many tokens
as dimensions, N = d, the notation of Wu et al.  One layer with fixed weights, tokens as rows::

    A  = softmax_mask(beta * X B X^T)          # (*batch, N, N), B = W_Q W_K^T (d, d)
    X' = normalise(A X W_V)                    # token by token: "rms" (unit norm), "layernorm", None

With ``norm="rms"`` the state space is the product of N unit spheres (S^{d-1})^N.  An
*equilibrium* is a fixed point X* = F(X*); it is (linearly) *stable* when the spectral radius of
the derivative of F restricted to the tangent space of (S^{d-1})^N at X* is below one.  F maps
into the product of spheres, so its Jacobian J (Nd x Nd) sends every direction to the tangent
space at F(X*) = X*; the restriction is U^T J U with U an orthonormal basis of that tangent space.

The rank of an equilibrium is the numerical rank of X* (N x d).  Rank one includes consensus
(all tokens equal, mu = 0) and antipodal configurations (tokens +-v, mu > 0).

:func:`triangular_example` generalises the two-token counterexample to N = d tokens (causal mask);
:func:`rank_k_equilibrium` builds its stable equilibrium of any rank k = 1..N.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import _validate, linalg
from .device import make_generator, resolve
from .layers import LayerConfig, LayerWeights, forward, on_tokens
from .masks import make_mask
from .norms import normalise
from .metrics import mu_unchecked

__all__ = [
    "Equilibrium",
    "layer_map",
    "embedded_example",
    "embedded_radius",
    "tangent_basis",
    "tangent_jacobian",
    "spectral_radius",
    "numerical_rank",
    "polish",
    "analyse",
    "iterate",
    "find_equilibria",
    "unique_equilibria",
    "random_unit_tokens",
    "two_token_example",
    "triangular_example",
    "rank_k_equilibrium",
]


def _weights(X, W_V, B):
    d = X.shape[-1]
    W_V = _validate.matrix("W_V", W_V, square=True)
    if W_V.shape[-1] != d:
        raise ValueError(f"W_V must be ({d}, {d}) to match X's width, got shape {tuple(W_V.shape)}")
    if B is None:
        B = torch.zeros(d, d, dtype=X.dtype, device=X.device)
    B = _validate.matrix("B", B, square=True)
    if B.shape[-1] != d:
        raise ValueError(f"B must be ({d}, {d}) to match X's width, got shape {tuple(B.shape)}")
    for name, W in (("W_V", W_V), ("B", B)):
        _validate.broadcast(name, W.shape[:-2], "X", X.shape[:-2])
        if W.dtype != X.dtype or W.device != X.device:
            raise TypeError(f"{name} must have X's dtype and device ({X.dtype}, {X.device}), got ({W.dtype}, "
                            f"{W.device})")
    return W_V, B


def layer_map(X, W_V, B=None, *, mask=None, beta=1.0, norm="rms") -> torch.Tensor:
    """One self-attention layer with fixed weights: X' = normalise(softmax_mask(beta X B X^T) X W_V).

    The public layer :func:`rcteach.layers.forward` with query-key attention, W_Q = sqrt(d) B and
    W_K = I_d (its logits beta (X W_Q)(X W_K)^T / sqrt(d) are beta X B X^T).

    Parameters
    ----------
    X : Tensor, (*batch, N, d)
        Tokens as rows.
    W_V : Tensor, (d, d) or (*batch, d, d)
        Value matrix, acting from the right.
    B : Tensor, (d, d) or (*batch, d, d), optional
        Bilinear form of the logits, B = W_Q W_K^T (any scaling such as 1/sqrt(d_qk) folded in);
        None means zero logits, i.e. uniform attention over the mask.
    mask : bool Tensor (N, N), optional
        ``mask[i, j]`` True iff token i attends to token j (``rcteach.make_mask``).
    beta : float
        Inverse temperature multiplying the logits.
    norm : {"rms", "layernorm", None}
        Token-wise normalisation (``rcteach.norms.normalise``): "rms" maps each token to unit norm.

    Returns
    -------
    Tensor, shape (*batch, N, d)
    """
    X = _validate.matrix("X", X, min_rows=2)
    W_V, B = _weights(X, W_V, B)
    d = X.shape[-1]
    config = on_tokens(LayerConfig(attention="qk", beta=beta, mask=mask, norm=norm), X)
    identity = torch.eye(d, dtype=X.dtype, device=X.device)
    return forward(X, config, LayerWeights(W_Q=math.sqrt(d) * B, W_K=identity, W_V=W_V))  # (*batch, N, d)


def random_unit_tokens(N, d, *, batch=(), seed=None, generator=None, device=None, dtype=None) -> torch.Tensor:
    """N tokens drawn uniformly on the unit sphere S^{d-1}, shape (*batch, N, d)."""
    N = _validate.integer("N", N, minimum=2)
    d = _validate.integer("d", d, minimum=1)
    batch = _validate.batch_shape(batch)
    device, dtype = resolve(device, dtype)
    gen = make_generator(seed, generator, device)
    G = torch.randn(*batch, N, d, generator=gen, device=device, dtype=dtype)
    return G / torch.linalg.vector_norm(G, dim=-1, keepdim=True)


def tangent_basis(X) -> torch.Tensor:
    """Orthonormal basis of the tangent space of (S^{d-1})^N at unit-norm tokens X (N, d).

    Returns U of shape (N d, N (d - 1)): block diagonal, block i spanning the complement of x_i,
    in the row-major flattening of X (entry (i, k) at index i d + k).
    """
    X = _validate.matrix("X", X, min_rows=1)
    if X.dim() != 2:
        raise ValueError(f"X must be a single (N, d) state here, got shape {tuple(X.shape)}")
    N, d = X.shape
    if d < 2:
        raise ValueError(f"X must have d >= 2 columns (the unit sphere S^(d-1) needs d >= 2), got shape "
                         f"{tuple(X.shape)}")
    norms = torch.linalg.vector_norm(X, dim=-1)
    if not torch.allclose(norms, torch.ones_like(norms), atol=1e-8):
        raise ValueError("X must have unit-norm tokens (rows)")
    U = torch.zeros(N * d, N * (d - 1), dtype=X.dtype, device=X.device)
    for i in range(N):  # a loop over N <= a handful of tokens: fine
        # complete x_i to an orthonormal basis; the last d - 1 columns span its complement
        Q, _ = torch.linalg.qr(torch.cat([X[i, :, None], torch.eye(d, dtype=X.dtype, device=X.device)], dim=1))
        U[i * d:(i + 1) * d, i * (d - 1):(i + 1) * (d - 1)] = Q[:, 1:d]
    return U


def _flat_map(W_V, B, mask, beta, norm, shape):
    def f(x):
        return layer_map(x.reshape(shape), W_V, B, mask=mask, beta=beta, norm=norm).reshape(-1)
    return f


def tangent_jacobian(X, W_V, B=None, *, mask=None, beta=1.0, norm="rms") -> torch.Tensor:
    """Derivative of the layer map at X restricted to the tangent space: U^T J U, (N(d-1), N(d-1)).

    J = dF/dX (N d x N d) comes from ``torch.autograd.functional.jacobian``; U is
    :func:`tangent_basis` at X.  At a fixed point with ``norm="rms"``, U^T J U is the linearised
    dynamics on the product of spheres.
    """
    X = _validate.matrix("X", X, min_rows=2)
    if X.dim() != 2:
        raise ValueError(f"X must be a single (N, d) state here, got shape {tuple(X.shape)}")
    f = _flat_map(W_V, B, mask, beta, norm, X.shape)
    J = torch.autograd.functional.jacobian(f, X.reshape(-1))  # (N d, N d)
    U = tangent_basis(X)
    return U.T @ J @ U


def spectral_radius(M) -> float:
    """Largest eigenvalue modulus of a square matrix."""
    M = _validate.matrix("M", M, square=True)
    return float(linalg.eigvals_unchecked(M).abs().max())


def numerical_rank(X, *, rtol=1e-6) -> torch.Tensor:
    """Number of singular values of X (*batch, N, d) above rtol * s_1, shape (*batch,)."""
    X = _validate.matrix("X", X)
    rtol = _validate.real("rtol", rtol, positive=True)
    s = linalg.svdvals_unchecked(X)
    return (s > rtol * s[..., :1]).sum(-1)


def iterate(X0, W_V, B=None, *, steps, mask=None, beta=1.0, norm="rms") -> torch.Tensor:
    """Apply the layer map ``steps`` times to X0 (*batch, N, d); returns the final state."""
    steps = _validate.integer("steps", steps, minimum=0)
    X = _validate.matrix("X0", X0, min_rows=2)
    for _ in range(steps):
        X = layer_map(X, W_V, B, mask=mask, beta=beta, norm=norm)
    return X


def polish(X, W_V, B=None, *, mask=None, beta=1.0, steps=8) -> torch.Tensor:
    """Newton's method for F(X) = X on the product of unit spheres, from unit tokens X (N, d).

    Each step solves (I - U^T J U) t = U^T (F(X) - X) in the tangent space and retracts,
    X <- rownormalise(X + U t).  Converges quadratically near any non-degenerate fixed point,
    stable or not.
    """
    steps = _validate.integer("steps", steps, minimum=0)
    X = _validate.matrix("X", X, min_rows=2)
    for _ in range(steps):
        f = _flat_map(W_V, B, mask, beta, "rms", X.shape)
        x = X.reshape(-1)
        J = torch.autograd.functional.jacobian(f, x)
        U = tangent_basis(X)
        r = U.T @ (f(x) - x)
        K = torch.eye(U.shape[1], dtype=X.dtype, device=X.device) - U.T @ J @ U
        t = torch.linalg.lstsq(K, r[:, None]).solution[:, 0]
        X = normalise((x + U @ t).reshape(X.shape), "rms")
    return X


@dataclass(frozen=True)
class Equilibrium:
    """A candidate fixed point of the layer map (``norm="rms"``) and its diagnostics."""

    X: torch.Tensor  # (N, d), unit-norm tokens
    residual: float  # ||F(X) - X||_F
    spectral_radius: float  # of U^T J U, the tangent-space derivative
    rank: int  # numerical rank of X
    mu: float  # distance to consensus ||X - 1 xbar^T||_F

    @property
    def stable(self) -> bool:
        """Linearly stable: spectral radius of the tangent derivative below one."""
        return self.spectral_radius < 1.0

    @property
    def collapsed(self) -> bool:
        """Consensus: all tokens equal (mu below 1e-8)."""
        return self.mu < 1e-8


def analyse(X, W_V, B=None, *, mask=None, beta=1.0, rtol=1e-6) -> Equilibrium:
    """Residual, tangent spectral radius, rank and mu of a state X (N, d) of unit tokens."""
    F = layer_map(X, W_V, B, mask=mask, beta=beta, norm="rms")
    rho = spectral_radius(tangent_jacobian(X, W_V, B, mask=mask, beta=beta, norm="rms"))
    mu = float(mu_unchecked(X))
    return Equilibrium(X, float(torch.linalg.matrix_norm(F - X)), rho, int(numerical_rank(X, rtol=rtol)), mu)


def unique_equilibria(states, *, atol=1e-6) -> list[torch.Tensor]:
    """Distinct states among ``states`` (n, N, d): those farther than ``atol`` from every earlier one."""
    states = _validate.matrix("states", states)
    atol = _validate.real("atol", atol, minimum=0.0)
    kept: list[torch.Tensor] = []
    for X in states:  # a loop over candidate states, not tokens
        if all(float(torch.linalg.matrix_norm(X - Y)) > atol for Y in kept):
            kept.append(X)
    return kept


def find_equilibria(W_V, B=None, *, N, mask=None, beta=1.0, starts=64, steps=400, polish_steps=6,
                    tol=1e-10, seed=None, generator=None) -> list[Equilibrium]:
    """Search for equilibria of the layer map by iteration from random starts, then Newton.

    Runs ``steps`` layers from ``starts`` random unit-token states (batched), keeps the end states
    that moved less than 1e-6 in the last layer (candidates near a stable fixed point), polishes
    each with :func:`polish`, and returns the distinct ones whose residual is below ``tol``, each
    with its tangent spectral radius and rank (:func:`analyse`), sorted by rank.

    Parameters
    ----------
    W_V, B : Tensor (d, d)
        Value matrix and logit form (see :func:`layer_map`).
    N : int
        Number of tokens.
    starts, steps, polish_steps : int
        Random initial states, layers iterated, Newton steps.
    tol : float
        Largest residual ||F(X) - X||_F accepted as a fixed point.
    """
    W_V = _validate.matrix("W_V", W_V, square=True)
    N = _validate.integer("N", N, minimum=2)
    starts = _validate.integer("starts", starts, minimum=1)
    tol = _validate.real("tol", tol, positive=True)
    steps = _validate.integer("steps", steps, minimum=0)
    polish_steps = _validate.integer("polish_steps", polish_steps, minimum=0)
    d = W_V.shape[-1]
    X0 = random_unit_tokens(N, d, batch=starts, seed=seed, generator=generator, device=W_V.device, dtype=W_V.dtype)
    X = iterate(X0, W_V, B, steps=steps, mask=mask, beta=beta)
    moved = torch.linalg.matrix_norm(layer_map(X, W_V, B, mask=mask, beta=beta) - X)  # (starts,)
    found = []
    for Xc in unique_equilibria(X[moved < 1e-6], atol=1e-5):
        Xp = polish(Xc, W_V, B, mask=mask, beta=beta, steps=polish_steps)
        eq = analyse(Xp, W_V, B, mask=mask, beta=beta)
        if eq.residual < tol and math.isfinite(eq.spectral_radius):
            found.append(eq)
    out: list[Equilibrium] = []
    for e in found:  # drop polished duplicates
        if all(float(torch.linalg.matrix_norm(e.X - o.X)) > 1e-6 for o in out):
            out.append(e)
    return sorted(out, key=lambda e: (e.rank, e.mu))


def two_token_example(*, q=0.5, dtype=torch.float64, device=None):
    """Value matrix and logit form of the N = d = 2 causal counterexample of the chapter.

    W_V = [[1, 0], [-1, q]] (rows act on row tokens: e1 W_V = e1, e2 W_V = -e1 + q e2) and
    B = [[0, 1], [0, 0]].  With the causal mask and RMS normalisation, (e1, e1) and (e1, e2) are
    both fixed points; at (e1, e2) token 2 attends 1/2 to each token, the -e1 row of W_V cancels
    the pull towards token 1, and the derivative of the attention weight cancels W_V's repulsion
    from e2, so the tangent Jacobian has eigenvalues q (token 1) and 0 (token 2).

    Returns
    -------
    (W_V, B), each (2, 2).
    """
    q = _validate.real("q", q)
    if not 0 < abs(q) < 1:
        raise ValueError(f"q must satisfy 0 < |q| < 1 (token 1 stable at e1), got {q}")
    device, dtype = resolve(device, dtype)
    W_V = torch.tensor([[1.0, 0.0], [-1.0, q]], dtype=dtype, device=device)
    B = torch.tensor([[0.0, 1.0], [0.0, 0.0]], dtype=dtype, device=device)
    return W_V, B


def triangular_example(N, *, q=0.8, dtype=torch.float64, device=None):
    """Value matrix and logit form with stable equilibria of every rank 1..N (N = d, causal mask).

    With lam_m = q^-(m-1) (m = 1..N) and rows acting on row tokens::

        e_1 W_V = e_1,      e_m W_V = q^(m-1) e_m - q^(m-2) e_(m-1)   (m >= 2)
        B = strictly upper-triangular ones (B_pl = 1 for p < l, else 0)

    W_V = L^-1 with L = diag(lam) T, T the lower-triangular ones, so at X = I (e_1..e_N) every
    token attends uniformly to tokens 1..m (B is zero on and below the diagonal) and the average
    (e_1 + ... + e_m)/m times W_V telescopes to q^(m-1) e_m / m: X = I is a fixed point.  The
    tangent Jacobian at X = I is block triangular (causal mask); token m's block is nilpotent on
    the directions e_p, p < m (B's ones cancel W_V's repulsion, as in :func:`two_token_example`)
    and has eigenvalues q^(p-m) on e_p, p > m: spectral radius exactly q.  N = 2 gives
    :func:`two_token_example`.

    Returns
    -------
    (W_V, B), each (N, N).
    """
    N = _validate.integer("N", N, minimum=2)
    q = _validate.real("q", q)
    if not 0 < q < 1:
        raise ValueError(f"q must satisfy 0 < q < 1, got {q}")
    device, dtype = resolve(device, dtype)
    pw = q ** torch.arange(N, dtype=dtype, device=device)  # 1/lam_m = q^(m-1)
    W_V = torch.diag(pw) - torch.diag(pw[:-1], -1)  # (N, N): row m = q^(m-1) e_m - q^(m-2) e_(m-1)
    B = torch.triu(torch.ones(N, N, dtype=dtype, device=device), 1)
    return W_V, B


def rank_k_equilibrium(k, *, N, q=0.8, steps=400, polish_steps=3, dtype=torch.float64, device=None) -> Equilibrium:
    """The rank-k equilibrium of :func:`triangular_example` (causal mask, RMS normalisation).

    Tokens 1..k sit at e_1..e_k (a fixed point by the telescoping of the docstring above; W_V is
    lower bidiagonal, so span(e_1..e_k) is invariant).  Tokens k+1..N start at
    (e_1 + ... + e_k)/sqrt(k), are iterated ``steps`` layers inside that span (where they settle
    at a fixed point that depends on k and q) and are polished by Newton's method (:func:`polish`).
    The result is analysed with :func:`analyse`: residual, tangent spectral radius (including the
    directions leaving the span), rank and mu.  k = 1 is consensus at e_1; k = N is X = I.

    We found every rank k = 1..N a stable equilibrium (residual ~1e-16, spectral radius < 1) for
    q = 0.8 and N = 3..6.  For q = 0.25..0.5 the later tokens of k = 3 oscillate instead of settling
    (check ``residual``); for q <= 0.2 all ranks are linearly stable, but the tangent Jacobian is
    strongly non-normal (entries up to q^-(N-1)) and perturbations of 1e-6 already escape.
    """
    N = _validate.integer("N", N, minimum=2)
    k = _validate.integer("k", k, minimum=1)
    if k > N:
        raise ValueError(f"k must be at most N = {N}, got {k}")
    steps = _validate.integer("steps", steps, minimum=0)
    polish_steps = _validate.integer("polish_steps", polish_steps, minimum=0)
    W_V, B = triangular_example(N, q=q, dtype=dtype, device=device)
    mask = make_mask("causal", N, device=W_V.device)
    X = torch.zeros(N, N, dtype=W_V.dtype, device=W_V.device)
    X[:k, :k] = torch.eye(k, dtype=W_V.dtype, device=W_V.device)
    X[k:, :k] = 1.0 / math.sqrt(k)
    X = iterate(X, W_V, B, steps=steps, mask=mask)
    X = polish(X, W_V, B, mask=mask, steps=polish_steps)
    return analyse(X, W_V, B, mask=mask)


def embedded_example(N, d, *, q=0.8, r=0.5, seed=None, dtype=torch.float64, device=None):
    """The triangular example (:func:`triangular_example`) in d >= N features and a random orthonormal basis.

    With Z a Haar orthogonal (d, d) matrix and R a Haar orthogonal (d - N, d - N) one, returns
    (W_V, B, X*) with W_V = Z^T diag(W, r R) Z, B = Z^T diag(B_N, 0) Z and X* = [I_N, 0] Z, (N, d).
    Two facts make this the same counterexample (chapter "Equilibria of every rank"):

    * a change of feature basis is harmless: F_{Z^T W Z, Z^T B Z}(X Z) = F_{W, B}(X) Z for any orthogonal Z,
      since RMS normalisation and the logits X B X^T are invariant under it;
    * zero activations are irrelevant: the d - N coordinates where X* is zero stay zero (W_V maps the first
      N coordinates into themselves) and B does not see them, so X* is still a fixed point.  Only its
      stability gains the new tangent directions: token m leaning into them is scaled by r / q^(m-1)
      (:func:`embedded_radius`).
    """
    N = _validate.integer("N", N, minimum=2)
    d = _validate.integer("d", d, minimum=N)
    r = _validate.real("r", r, minimum=0.0)
    device, dtype = resolve(device, dtype)
    gen = make_generator(seed, None, device)
    W, B_N = triangular_example(N, q=q, dtype=dtype, device=device)
    W_V = torch.zeros(d, d, dtype=dtype, device=device)
    B = torch.zeros(d, d, dtype=dtype, device=device)
    W_V[:N, :N], B[:N, :N] = W, B_N
    if d > N:
        G = torch.randn(d - N, d - N, generator=gen, device=device, dtype=dtype)
        R, Rr = torch.linalg.qr(G)
        W_V[N:, N:] = r * R * torch.sign(Rr.diagonal())  # Haar orthogonal (the sign fix of the QR)
    G = torch.randn(d, d, generator=gen, device=device, dtype=dtype)
    Z, Zr = torch.linalg.qr(G)
    Z = Z * torch.sign(Zr.diagonal())
    X = torch.zeros(N, d, dtype=dtype, device=device)
    X[:, :N] = torch.eye(N, dtype=dtype, device=device)
    return Z.T @ W_V @ Z, Z.T @ B @ Z, X @ Z


def embedded_radius(N, *, q=0.8, r=0.5) -> float:
    """Tangent spectral radius of the full-rank equilibrium of :func:`embedded_example`: max(q, r / q^(N-1)).

    At X = I the causal attention is uniform over 1..m and token m's output a_m X W_V = q^(m-1) e_m / m;
    leaning it by eps f into the extra coordinates adds (1/m) eps f r R to the output, so after
    normalisation the lean is scaled by r / q^(m-1) (times the rotation R); B does not see these
    coordinates, so the attention weights do not move, and the Jacobian stays block triangular.  The
    worst token is the last: stable iff q < 1 and r < q^(N-1).  Derived.
    """
    N = _validate.integer("N", N, minimum=2)
    q = _validate.real("q", q, positive=True)
    r = _validate.real("r", r, minimum=0.0)
    return max(q, r / q ** (N - 1))
