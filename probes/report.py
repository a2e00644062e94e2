"""Small helpers shared by the experiments: JSON-safe results, markdown tables, bar/heatmap plots, CIs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["bar_plot", "heatmap", "md_table", "mean_ci", "to_jsonable", "write_result"]


def to_jsonable(obj: object) -> object:
    """Recursively turn numpy scalars/arrays and tuples into JSON types (arrays become lists)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


def mean_ci(x: np.ndarray, n_boot: int = 500, seed: int = 0) -> dict:
    """Mean with a 95% bootstrap percentile CI: {"mean", "lo", "hi", "n"}."""
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        raise ValueError("cannot average an empty sample.")
    rng = np.random.default_rng(seed)
    boots = rng.choice(x, (n_boot, x.size)).mean(1)
    return {
        "mean": float(x.mean()),
        "lo": float(np.quantile(boots, 0.025)),
        "hi": float(np.quantile(boots, 0.975)),
        "n": int(x.size),
    }


def fmt_ci(d: dict, digits: int = 2) -> str:
    """'0.53 [0.41, 0.66]' from a mean_ci dict."""
    return f"{d['mean']:.{digits}f} [{d['lo']:.{digits}f}, {d['hi']:.{digits}f}]"


def md_table(rows: list[dict], cols: list[str] | None = None, digits: int = 3) -> str:
    """Markdown table of `rows` (dicts); floats rounded to `digits`."""
    if not rows:
        return "(no rows)\n"
    cols = cols or list(rows[0])

    def cell(v: object) -> str:
        if isinstance(v, float | np.floating):
            return f"{v:.{digits}f}"
        if isinstance(v, dict) and {"mean", "lo", "hi"} <= set(v):
            return fmt_ci(v, digits)
        if isinstance(v, tuple | list) and len(v) == 2 and all(isinstance(t, float) for t in v):
            return f"[{v[0]:.{digits}f}, {v[1]:.{digits}f}]"
        return str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def write_result(out_dir: Path, name: str, result: dict, report: str) -> tuple[Path, Path]:
    """Write `<name>.json` and `<name>.md` into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jpath, mpath = out_dir / f"{name}.json", out_dir / f"{name}.md"
    jpath.write_text(json.dumps(to_jsonable(result), indent=1))
    mpath.write_text(report)
    return jpath, mpath


def bar_plot(labels: list[str], stats: list[dict], path: Path, ylabel: str, title: str = "") -> Path:
    """Bars of mean_ci dicts with their CI as error bars."""
    from latent.plotting import figure, save_figure

    fig, ax = figure(figsize=(max(4, 0.9 * len(labels)), 3.4), extra="probes")
    means = np.array([s["mean"] for s in stats])
    err = np.array([[s["mean"] - s["lo"] for s in stats], [s["hi"] - s["mean"] for s in stats]])
    ax.bar(range(len(labels)), means, yerr=err, capsize=3, color="#4C72B0")
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.axhline(0, color="grey", lw=0.8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    return path


def heatmap(
    matrix: np.ndarray,
    rows: list[str],
    cols: list[str],
    path: Path,
    title: str = "",
    vmin: float = 0,
    vmax: float = 1,
) -> Path:
    """Annotated heatmap (e.g. the cross-probe transfer AUROC matrix)."""
    from latent.plotting import figure, save_figure

    fig, ax = figure(figsize=(1.1 * len(cols) + 1.5, 0.9 * len(rows) + 1), extra="probes")
    im = ax.imshow(matrix, vmin=vmin, vmax=vmax, cmap="viridis")
    for i in range(len(rows)):
        for j in range(len(cols)):
            ax.text(j, i, f"{matrix[i, j]:.2f}", ha="center", va="center", color="w", fontsize=8)
    ax.set_xticks(range(len(cols)), cols)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("evaluated on")
    ax.set_ylabel("trained on")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    return path
