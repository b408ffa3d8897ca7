"""Unit tests for rcteach.plotting: white, titled, labelled figures."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from rcteach import plotting  # noqa: E402

WHITE = to_rgba("white")


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_axes_new_figure():
    fig, ax = plotting.axes("Title", "x label (T)", "Frobenius stable rank")
    assert fig.get_facecolor() == WHITE
    assert ax.get_facecolor() == WHITE
    assert ax.get_title() == "Title"
    assert ax.get_xlabel() == "x label (T)"
    assert ax.get_ylabel() == "Frobenius stable rank"
    assert ax.figure is fig
    assert tuple(fig.get_size_inches()) == pytest.approx((5.5, 4.0))


def test_axes_figsize():
    fig, _ = plotting.axes("t", "x", "y", figsize=(3, 2))
    assert tuple(fig.get_size_inches()) == pytest.approx((3, 2))


def test_axes_reuses_given_axes():
    fig0, (left, right) = plt.subplots(1, 2, facecolor="lightgray")
    left.set_facecolor("black")
    fig, ax = plotting.axes("Right panel", "a", "b", ax=right)
    assert fig is fig0 and ax is right
    assert fig.get_facecolor() == WHITE
    assert ax.get_facecolor() == WHITE
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("Right panel", "a", "b")
    assert len(fig.axes) == 2  # no new axes


def test_plot_spectrum_tensor_with_predictions():
    ev = torch.tensor([[1 + 0j, 0.2 + 0.1j], [-0.1 - 0.2j, 0.05 + 0j]], dtype=torch.complex128)
    fig, ax = plotting.plot_spectrum(ev, radius=0.25, outlier=1.0, title="Spectrum of A")
    assert fig.get_facecolor() == WHITE and ax.get_facecolor() == WHITE
    assert ax.get_title() == "Spectrum of A"
    assert ax.get_xlabel() == "Re λ" and ax.get_ylabel() == "Im λ"
    points = ax.collections[0].get_offsets()
    flat = ev.flatten().numpy()
    assert np.allclose(points, np.column_stack([flat.real, flat.imag]))
    circle, star = ax.lines
    xy = circle.get_xydata()
    assert np.allclose(np.hypot(xy[:, 0], xy[:, 1]), 0.25)
    assert np.allclose(star.get_xydata(), [[1.0, 0.0]])
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["eigenvalues", "predicted bulk radius 0.25", "predicted outlier 1"]


def test_plot_spectrum_array_without_predictions():
    ev = np.array([0.5 + 0.5j, -0.3j, 1.0])
    fig, ax = plotting.plot_spectrum(ev, label="A_perp", s=10, color="C1")
    assert ax.get_title() == "Eigenvalues"
    assert len(ax.lines) == 0
    assert np.allclose(ax.collections[0].get_offsets(), np.column_stack([ev.real, ev.imag]))
    assert ax.collections[0].get_sizes()[0] == 10
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["A_perp"]


def test_plot_spectrum_on_given_axes():
    fig0, ax0 = plt.subplots()
    fig, ax = plotting.plot_spectrum(torch.tensor([1.0, 0.1]), ax=ax0)
    assert ax is ax0 and fig is fig0
    assert fig.get_facecolor() == WHITE
    assert ax.get_title() == "Eigenvalues"


def test_figures_render():
    fig, _ = plotting.plot_spectrum(torch.randn(20, dtype=torch.complex64), radius=1.0, outlier=1.0)
    fig.canvas.draw()  # the constrained layout and legend render without error
    width, height = fig.canvas.get_width_height()
    assert width > 0 and height > 0
