"""The one figure helper: Agg backend, a PNG on disk (folder made), the figure closed, and a missing
matplotlib named with the extra that carries it."""

import sys

import pytest

from latent.plotting import can_plot, figure, save_figure

pytest.importorskip("matplotlib", reason="matplotlib comes with the [eval], [probes] and [train] extras")


def test_figure_is_saved_as_png_and_closed(tmp_path):
    import matplotlib
    import matplotlib.pyplot as plt

    fig, axes = figure(1, 2, figsize=(4, 2))
    assert matplotlib.get_backend().lower() == "agg" and len(axes) == 2
    axes[0].plot([0, 1], [1, 0])
    path = save_figure(fig, tmp_path / "new" / "curve.png", dpi=50)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert fig.number not in plt.get_fignums()
    assert can_plot()


def test_missing_matplotlib_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    with pytest.raises(ModuleNotFoundError, match=r'pip install "latentworks\[probes\]"') as err:
        figure(extra="probes")
    assert err.value.name == "matplotlib"
