"""Statistics the checks share: seed means and medians with their standard errors, and the
radius of a uniformly filled disc estimated from the second moment of the eigenvalues in it."""

from __future__ import annotations

import math

import torch


def mean_se(x: torch.Tensor) -> tuple[float, float]:
    """Mean of the 1-D tensor x and its standard error sd / sqrt(n)."""
    return x.mean().item(), (x.std() / math.sqrt(x.numel())).item()


def median_se(x: torch.Tensor) -> tuple[float, float]:
    """Median and its standard error from the interquartile range (robust to rare heavy-tail draws)."""
    q = torch.quantile(x, torch.tensor([0.25, 0.5, 0.75], dtype=x.dtype, device=x.device))
    sd = (q[2] - q[0]).item() / 1.349  # the IQR of a normal law is 1.349 sd
    return q[1].item(), 1.2533 * sd / math.sqrt(x.numel())  # se of a median ~ sqrt(pi/2) sd / sqrt(n)


def disc_radius(bulk: torch.Tensor) -> torch.Tensor:
    """Radius R of a uniformly filled disc from its points: R = sqrt(2 mean |lambda|^2), (*batch,).

    ``bulk`` (*batch, n) holds the eigenvalues in the disc (the outlier removed).  For the uniform
    law on the disc of radius R, E|lambda|^2 = R^2 / 2.  Unlike the largest modulus |lambda_2| this
    uses every eigenvalue: it has no edge excess (the largest modulus sits 2-4% above R at
    T = 256..512) and a seed-to-seed spread of ~0.4% at T = 512 instead of ~1%.
    """
    return (2 * bulk.abs().square().mean(-1)).sqrt()
