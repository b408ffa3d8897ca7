"""Attention masks and the directed graphs they define (Wu et al., 2024).

Introduced in chapter "Masks are graphs" (book/08_masks_as_graphs.md).

Convention: ``mask[i, j]`` is True iff token i may attend to token j.  As a graph, the mask has
an edge j -> i for every allowed pair (information flows from the attended token j to token i);
self-loops are included when the diagonal is allowed.  Graph properties are computed with
networkx on that directed graph.  :func:`consensus_rate` computes the rate at which uniform
attention over a mask drives tokens to consensus (the linear consensus dynamics of the mask).

Masks that change from layer to layer (``rcteach.propagate(..., masks=[...])``, chapter "Collapse
under masks"): :func:`reach_mask` gives who reaches whom through a run of layers, :func:`union_mask`
the union graph, :func:`window_centres` the tokens that reach everyone, and
:func:`periodic_consensus_rate` the rate per period of uniform attention.  :func:`block_mask` and
:func:`with_sinks` build block-diagonal masks and masks with attention sinks.
"""

from __future__ import annotations

import math

import torch

from . import _validate, linalg


class _Networkx:
    """``networkx``, imported on first use (it takes a fifth of a second: importing rcteach stays cheap)."""

    def __getattr__(self, name):
        import networkx

        return getattr(networkx, name)


nx = _Networkx()

__all__ = [
    "MASK_KINDS",
    "make_mask",
    "check_mask",
    "check_batch_mask",
    "mask_graph",
    "is_strongly_connected",
    "is_quasi_strongly_connected",
    "centre_nodes",
    "diameter",
    "centre_eccentricity",
    "consensus_rate",
    "consensus_transient_layer",
    "block_mask",
    "with_sinks",
    "second_eigenvalue_modulus",
    "reach_mask",
    "union_mask",
    "window_centres",
    "periodic_consensus_rate",
]

MASK_KINDS = ("complete", "causal", "sliding", "sliding-causal")


def make_mask(kind, T, *, window=None, device=None) -> torch.Tensor:
    """A boolean (T, T) mask, ``mask[i, j]`` True iff token i may attend to token j.

    Kinds
    -----
    ``"complete"``       every pair;
    ``"causal"``         j <= i;
    ``"sliding"``        |i - j| <= window (bidirectional local attention);
    ``"sliding-causal"`` 0 <= i - j <= window.

    ``window`` (an int >= 0) is required by the sliding kinds; the other kinds ignore it, so one
    ``window`` serves a loop over every kind.

    Examples
    --------
    >>> rcteach.make_mask("sliding-causal", 4, window=1).int()
    tensor([[1, 0, 0, 0],
            [1, 1, 0, 0],
            [0, 1, 1, 0],
            [0, 0, 1, 1]], dtype=torch.int32)
    """
    kind = _validate.choice("kind", kind, MASK_KINDS)
    T = _validate.integer("T", T, minimum=2)
    if kind.startswith("sliding"):
        if window is None:
            raise ValueError(f"window is required for kind={kind!r}")
        window = _validate.integer("window", window, minimum=0)
    i = torch.arange(T, device=None if device is None else _validate.device(device))
    lag = i[:, None] - i[None, :]  # (T, T): i - j
    if kind == "complete":
        return torch.ones(T, T, dtype=torch.bool, device=device)
    if kind == "causal":
        return lag >= 0
    if kind == "sliding":
        return lag.abs() <= window
    return (lag >= 0) & (lag <= window)


def check_mask(mask, T: int | None = None, *, name: str = "mask") -> torch.Tensor:
    """Validate a boolean (T, T) mask (or a batch of them) that allows >= 1 position per row."""
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name} must be a boolean torch.Tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(f"{name} must have dtype torch.bool, got {mask.dtype}")
    if mask.layout != torch.strided or mask.device.type == "meta":
        raise TypeError(f"{name} must be a dense tensor holding data, got layout {mask.layout} on {mask.device}")
    if mask.dim() < 2 or mask.shape[-1] != mask.shape[-2] or mask.shape[-1] < 1:
        raise ValueError(f"{name} must have shape (*batch, T, T) with T >= 1, got {tuple(mask.shape)}")
    if T is not None and mask.shape[-1] != T:
        raise ValueError(f"{name} must be {T} x {T} to match the {T} tokens, got {tuple(mask.shape)}")
    if mask.numel() and not mask.any(-1).all():
        raise ValueError(f"{name} must allow at least one position in every row")
    return mask


def check_batch_mask(mask, X, *, name: str = "mask", x_name: str = "X") -> torch.Tensor:
    """Validate a mask for tokens X (*batch, T, d): (T, T) or a batch of masks that broadcasts to X's
    batch shape (it must not enlarge it); returned on X's device."""
    mask = check_mask(mask, X.shape[-2], name=name)
    if _validate.broadcast(name, mask.shape[:-2], x_name, X.shape[:-2]) != tuple(X.shape[:-2]):
        raise ValueError(f"{name}'s batch shape {tuple(mask.shape[:-2])} must broadcast to {x_name}'s "
                         f"{tuple(X.shape[:-2])}, not enlarge it")
    return mask.to(X.device)


def block_mask(sizes, *, device=None) -> torch.Tensor:
    """A block-diagonal boolean (T, T) mask: tokens attend within consecutive blocks of the given sizes
    (T = sum(sizes)).  Its graph has one strongly connected component per block, so on its own it never
    mixes the blocks; alternating two such masks can (chapter "Collapse under masks")."""
    if not isinstance(sizes, (list, tuple)) or not sizes:
        raise TypeError("sizes must be a non-empty list or tuple of block sizes")
    sizes = [_validate.integer(f"sizes[{k}]", n, minimum=1) for k, n in enumerate(sizes)]
    labels = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    out = labels[:, None] == labels[None, :]
    return out if device is None else out.to(_validate.device(device))


def with_sinks(mask, sinks=1) -> torch.Tensor:
    """``mask`` with attention sinks: every token may also attend to the first ``sinks`` tokens (the masks of
    streaming attention, Xiao et al. 2024).  Each sink is then a centre node one layer away from every token."""
    mask = check_mask(mask).clone()
    sinks = _validate.integer("sinks", sinks, minimum=1, maximum=mask.shape[-1])
    mask[..., :sinks] = True
    return mask


def mask_graph(mask) -> nx.DiGraph:
    """The directed graph of a (T, T) mask: nodes 0..T-1, an edge j -> i iff ``mask[i, j]``."""
    mask = check_mask(mask)
    if mask.dim() != 2:
        raise ValueError(f"mask must be a single (T, T) mask here, got shape {tuple(mask.shape)}")
    G = nx.DiGraph()
    G.add_nodes_from(range(mask.shape[0]))
    i, j = torch.nonzero(mask.cpu(), as_tuple=True)
    G.add_edges_from(zip(j.tolist(), i.tolist()))
    return G


def is_strongly_connected(mask) -> bool:
    """True iff every token reaches every other token by a directed path."""
    return nx.is_strongly_connected(mask_graph(mask))


def centre_nodes(mask) -> list[int]:
    """The centre nodes: tokens from which every token is reachable by a directed path.

    Non-empty exactly when the graph is quasi-strongly connected (it has a spanning tree rooted at
    any centre node).  They form the one source component of the graph's condensation.
    """
    G = mask_graph(mask)
    C = nx.condensation(G)
    sources = [c for c in C if C.in_degree(c) == 0]
    if len(sources) != 1:
        return []
    return sorted(C.nodes[sources[0]]["members"])


def is_quasi_strongly_connected(mask) -> bool:
    """True iff some token reaches every token (the graph has a directed spanning tree)."""
    return bool(centre_nodes(mask))


def diameter(mask) -> float:
    """The longest shortest directed path between two tokens, ``inf`` if some pair is unreachable.

    For a strongly connected mask this is the usual diameter.  For a quasi-strongly connected
    mask that is not strongly connected (causal, sliding-causal) some pairs are unreachable, so
    the diameter is infinite; :func:`centre_eccentricity` gives the finite depth of its spanning
    trees instead.
    """
    G = mask_graph(mask)
    if not nx.is_strongly_connected(G):
        return math.inf
    return nx.diameter(G)


def centre_eccentricity(mask) -> float:
    """The fewest steps in which some centre node reaches every token, ``inf`` if none exists.

    min over centre nodes c of max_i dist(c, i): the depth of the shallowest directed spanning
    tree.  Equals the radius for strongly connected masks.
    """
    G = mask_graph(mask)
    centres = centre_nodes(mask)
    if not centres:
        return math.inf
    return min(max(nx.single_source_shortest_path_length(G, c).values()) for c in centres)


def consensus_rate(mask, *, skip=None) -> float:
    """|lambda_2|: the second-largest eigenvalue modulus of the row-normalised mask.

    With uniform attention over the mask (logits 0, beta = 0), A = D^{-1} M with M the boolean
    (T, T) mask and D = diag(M 1); the tokens follow the linear consensus dynamics X_t = A^t X_0
    and mu(X_t) = ||P A^t X_0||_F decays asymptotically as |lambda_2|^t (A1 = 1 carries the
    eigenvalue 1).  Returns 1.0 when A has a second eigenvalue of modulus 1 (no consensus: the
    mask is not quasi-strongly connected, or a periodic graph without self-loops).

    Computed exactly block by block: A is block triangular over the strongly connected components
    of the mask's graph (:func:`mask_graph`), so spec(A) is the union of the spectra of its
    diagonal blocks.  A single-token component (causal masks) contributes its diagonal entry
    1/n_i exactly; a block with a symmetric mask is similar to the symmetric
    D^{-1/2} M D^{-1/2} and uses a symmetric eigensolver.  This avoids the large round-off of
    eigensolvers on the defective matrices of sliding-causal masks.

    With a skip connection, X' = X + a A X (``skip=a > 0``; chapter "LayerNorm"), the layer is the
    linear map I + a A, or (I + a A)/(1 + a) once a token-wise normalisation removes the scale: every
    eigenvalue lambda of A becomes (1 + a lambda)/(1 + a), and the rate is the second-largest modulus
    of those (for real lambda_2 >= 0: (1 + a lambda_2)/(1 + a), slower than lambda_2).

    Parameters
    ----------
    mask : bool Tensor, (T, T)
    skip : float > 0, optional

    Returns
    -------
    float in [0, 1]

    Examples
    --------
    >>> causal = rcteach.make_mask("causal", 6)
    >>> rcteach.consensus_rate(causal)  # 1/2 for every T (rcteach.theory.causal_consensus_rate)
    0.5
    >>> rcteach.consensus_rate(causal, skip=1.0)  # (1 + a lambda_2)/(1 + a) with a = 1
    0.75
    """
    if skip is not None:
        skip = _validate.real("skip", skip, positive=True)
    mask = check_mask(mask).cpu()
    if mask.dim() != 2:
        raise ValueError(f"mask must be a single (T, T) mask, got shape {tuple(mask.shape)}")
    M = mask.to(torch.float64)
    deg = M.sum(-1)  # (T,) allowed positions per row
    eigenvalues = []
    for component in nx.strongly_connected_components(mask_graph(mask)):
        idx = torch.tensor(sorted(component))
        block = M[idx][:, idx]  # (k, k)
        if idx.numel() == 1:
            eigenvalues.append(block.reshape(()) / deg[idx[0]])
        elif torch.equal(block, block.T):
            scale = deg[idx].rsqrt()
            eigenvalues.append(linalg.eigvalsh_unchecked(scale[:, None] * block * scale[None, :]))
        else:
            eigenvalues.append(linalg.eigvals_unchecked(block / deg[idx][:, None]))
    eigenvalues = torch.cat([e.reshape(-1).to(torch.complex128) for e in eigenvalues])
    if skip is not None:
        eigenvalues = (1.0 + skip * eigenvalues) / (1.0 + skip)
    moduli = eigenvalues.abs().sort(descending=True).values
    return float(moduli[1].clamp(0.0, 1.0))


def second_eigenvalue_modulus(A) -> float:
    """|lambda_2| of one row-stochastic (T, T) matrix A (A 1 = 1): the rate of the linear consensus
    dynamics X_{t+1} = A X_t, for attention that is the same at every layer (uniform attention over a
    mask with a logit bias, a product of layers' attention over one period of a time-varying mask).

    The eigenvalue 1 of A 1 = 1 is removed by working in an orthonormal basis (1/sqrt(T), Q) of R^T,
    where A = [[1, b^T], [0, Q^T A Q]]: |lambda_2| is the spectral radius of Q^T A Q, computed with a
    general eigensolver in float64 (use :func:`consensus_rate` for a plain mask: it is exact block by block).
    """
    A = _validate.matrix("A", A, min_rows=2)
    if A.dim() != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be one square (T, T) matrix, got shape {tuple(A.shape)}")
    A = A.detach().cpu().to(torch.float64)
    if not torch.allclose(A.sum(-1), torch.ones(A.shape[0], dtype=torch.float64), atol=1e-10) or (A < 0).any():
        raise ValueError("A must be row-stochastic: nonnegative entries, rows summing to 1")
    T = A.shape[0]
    basis = torch.eye(T, dtype=torch.float64)
    basis[:, 0] = 1.0
    Q = torch.linalg.qr(basis)[0][:, 1:]  # (T, T-1): the first column of the QR is 1/sqrt(T), these span 1-perp
    B = Q.T @ A @ Q  # (T-1, T-1)
    if float(torch.linalg.matrix_norm(B)) <= 1e-13:
        return 0.0  # A = 1 p^T up to round-off: consensus in one step (no eigensolver on a zero block)
    return float(linalg.eigvals(B).abs().max().clamp(0.0, 1.0))


def _masks_list(masks) -> list[torch.Tensor]:
    """Validate a non-empty sequence of single (T, T) masks of one T."""
    if isinstance(masks, torch.Tensor) or not isinstance(masks, (list, tuple)) or not masks:
        raise TypeError("masks must be a non-empty list or tuple of boolean (T, T) masks")
    out = [check_mask(m, name=f"masks[{k}]").cpu() for k, m in enumerate(masks)]
    T = out[0].shape[-1]
    for k, m in enumerate(out):
        if m.dim() != 2 or m.shape[-1] != T:
            raise ValueError(f"masks[{k}] must be a single ({T}, {T}) mask like masks[0], got {tuple(m.shape)}")
    return out


def reach_mask(masks) -> torch.Tensor:
    """Who reaches whom through a run of layers: a boolean (T, T) mask, True at [i, j] iff token j's
    information reaches token i through layers with the masks ``masks[0], masks[1], ...`` in that order.

    A time-respecting path j = k_0 -> k_1 -> ... -> k_n = i has step t allowed by ``masks[t]``
    (``masks[t][k_{t+1}, k_t]``); the result is the boolean product M_n ... M_1.  For one mask this is
    the mask itself.  With self-loops in every mask, each step may also stay put, so a path of the union
    graph (:func:`union_mask`) of length r is realised within r periods.
    """
    out = _masks_list(masks)
    reach = torch.eye(out[0].shape[-1], dtype=torch.bool)
    for m in out:
        reach = (m.to(torch.int64) @ reach.to(torch.int64)) > 0  # (T, T): one more layer
    return reach


def union_mask(masks) -> torch.Tensor:
    """The union graph of a schedule of masks: True at [i, j] iff some ``masks[t]`` allows i to attend to j."""
    out = _masks_list(masks)
    union = out[0].clone()
    for m in out[1:]:
        union |= m
    return union


def window_centres(masks) -> list[int]:
    """The tokens that reach every token through the layers ``masks[0], ..., masks[-1]``
    (:func:`reach_mask`): the columns of the reach mask that are all True.

    Non-empty for some fixed number of layers r is the condition under which, we believe, the collapse
    results of Wu et al. extend to time-varying masks ("some token reaches all others over a fixed number
    of layers"): every window of r layers then mixes a common token into every token.  One mask
    repeated r times has a centre iff its graph has a centre node reaching all within r steps
    (:func:`centre_eccentricity` <= r, with self-loops).
    """
    return torch.nonzero(reach_mask(masks).all(0)).flatten().tolist()


def periodic_consensus_rate(masks) -> float:
    """|lambda_2| per period of uniform attention on a periodic schedule of masks (``beta = 0``):
    the second-largest eigenvalue modulus of U_n ... U_1, U_t = the row-normalised ``masks[t - 1]``.

    X after one period is U_n ... U_1 X (values orthogonal or absent), so mu decays asymptotically by
    this factor per period of n layers.  1 when no token reaches all others in any number of periods.
    """
    out = _masks_list(masks)
    product = torch.eye(out[0].shape[-1], dtype=torch.float64)
    for m in out:
        M = m.to(torch.float64)
        product = (M / M.sum(-1, keepdim=True)) @ product
    return second_eigenvalue_modulus(product)


def consensus_transient_layer(mask, level, *, max_layers=10_000) -> int:
    """First layer t with ||P A^t||_F / ||A^t||_F <= level, A the row-normalised mask (uniform attention).

    For tokens X_0 with i.i.d. isotropic rows, E||P A^t X_0||_F^2 / E||A^t X_0||_F^2 equals the squared
    ratio, so this is when the linear consensus dynamics bring the relative distance to consensus
    mu / ||X||_F down to ``level``.  For non-normal masks (sliding-causal) it is much later than
    log(level) / log|lambda_2| (:func:`consensus_rate`): the transient of their long Jordan chains.
    Returns ``max_layers`` + 1 if the level is not reached.  Derived.  A sparse mask (a sliding
    window: under an eighth of the entries allowed) is multiplied in sparse form, O(w T^2) a layer.
    """
    level = _validate.real("level", level, positive=True)
    max_layers = _validate.integer("max_layers", max_layers, minimum=0)
    mask = check_mask(mask).cpu()
    M = mask.to(torch.float64)
    A = M / M.sum(-1, keepdim=True)  # (T, T)
    if 8 * mask.sum() < mask.numel():
        A = A.to_sparse()
    At = torch.eye(A.shape[0], dtype=torch.float64)
    for t in range(max_layers + 1):
        centred = At - At.mean(0, keepdim=True)  # P A^t
        if torch.linalg.matrix_norm(centred) <= level * torch.linalg.matrix_norm(At):
            return t
        At = A @ At
    return max_layers + 1
