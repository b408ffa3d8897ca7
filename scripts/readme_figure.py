"""Draw the README's figure: the spectrum of random softmax attention and of its centred version.

Run: .venv/bin/python scripts/readme_figure.py  (writes docs/spectral-gap.png)
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import rcteach  # noqa: E402

T, s2 = 256, rcteach.LN2
A = rcteach.random_attention(T, s2, seed=0)
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.4), facecolor="white", layout="constrained")
radius = rcteach.theory.bulk_radius(T, s2)
rcteach.plotting.plot_spectrum(rcteach.spectrum(A), radius=radius, outlier=1.0, ax=left,
                               title=f"softmax attention A (T = {T}): outlier at 1")
rcteach.plotting.plot_spectrum(rcteach.spectrum(rcteach.centre(A)), radius=radius, ax=right,
                               title="centred attention A - 11ᵀ/T: no outlier")
out = Path(__file__).resolve().parents[1] / "docs" / "spectral-gap.png"
fig.savefig(out, dpi=110)
print(f"wrote {out}")
