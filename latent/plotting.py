"""The one matplotlib set-up behind every report figure: the file-only Agg backend (no display needed on
a server), imported when a figure is drawn, so importing a module that can plot costs nothing and the
core install needs no matplotlib.

    fig, ax = figure(figsize=(6, 4), extra="eval")
    ax.plot(xs, ys)
    save_figure(fig, "runs/x/curve.png", dpi=120)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["can_plot", "figure", "pyplot", "save_figure"]


def can_plot() -> bool:
    """Whether matplotlib is installed (a run that only adds a figure skips it when not)."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def pyplot(extra: str = "eval") -> Any:
    """`matplotlib.pyplot` on the Agg backend. Without matplotlib: a `ModuleNotFoundError` (name
    "matplotlib") that names the extra carrying it, `extra`."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            f'plots need matplotlib, which comes with the [{extra}] extra: pip install "latentworks[{extra}]"',
            name="matplotlib",
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure(*args: Any, extra: str = "eval", **kwargs: Any) -> tuple[Any, Any]:
    """`(fig, axes)` from `plt.subplots(*args, **kwargs)` on the Agg backend."""
    return pyplot(extra).subplots(*args, **kwargs)


def save_figure(fig: Any, path: str | Path, *, dpi: float | None = None) -> Path:
    """Write `fig` to `path` (its folder made if missing; `dpi=None` keeps the figure's own) and close
    it, so a long run drawing many figures does not keep them all in memory."""
    import matplotlib.pyplot as plt

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, **({} if dpi is None else {"dpi": dpi}))
    plt.close(fig)
    return out
