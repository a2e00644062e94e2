"""The one writer of a trained model's card, and the one loss plot, for every trainer of the project.

A card is three files next to the weights: `card.json` (every setting and number), `loss_curve.png`
and `README.md`: a title, an opening paragraph, then sections in order (`card_markdown`). The loss
curve is drawn by `plot_loss` from named curves, so each trainer says only what its curves are.

Example:
```python
write_model_card(
    folder,
    card,
    card_markdown("builtin:arith-mini", "A toy model.", [("Training", "- 10 steps.")]),
    [("pretrain", [1, 2], [3.0, 2.0])],
    xlabel="optimizer step",
)
```
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

__all__ = ["LOSS_CURVE", "card_markdown", "plot_loss", "write_model_card"]

LOSS_CURVE = "![loss curve](loss_curve.png)"
"""The README line that shows the card's loss curve (put it in the section it belongs to)."""

Curve = tuple[str, Sequence[float], Sequence[float]]
"""(label, x values, loss values) of one line of the loss plot."""


def card_markdown(title: str, intro: str, sections: Sequence[tuple[str, str]]) -> str:
    """A card's README.md: `# title`, the opening paragraph(s), then one `## heading` and body per
    section, in order."""
    return f"# {title}\n\n{intro}" + "".join(f"\n\n## {head}\n{body}" for head, body in sections) + "\n"


def plot_loss(
    curves: Sequence[Curve],
    path: Path,
    *,
    xlabel: str,
    ylabel: str = "loss",
    colors: dict[str, str] | None = None,
) -> None:
    """Training loss on a log scale, one line per curve (`colors` by label, else matplotlib's cycle);
    curves with no points are left out."""
    from latent.plotting import figure, save_figure

    fig, ax = figure(figsize=(6, 3.5), dpi=100, extra="train")
    for label, xs, ys in curves:
        if len(xs):
            ax.plot(xs, ys, label=label, **({"color": colors[label]} if colors and label in colors else {}))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_yscale("log")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)


def write_model_card(
    folder: Path,
    card: dict,
    readme: str,
    curves: Sequence[Curve],
    *,
    xlabel: str,
    ylabel: str = "loss",
    colors: dict[str, str] | None = None,
) -> None:
    """Write `card.json`, `loss_curve.png` (`plot_loss`) and `README.md` (`readme`, e.g. from
    `card_markdown`) into `folder`, in that order."""
    folder = Path(folder)
    (folder / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    plot_loss(curves, folder / "loss_curve.png", xlabel=xlabel, ylabel=ylabel, colors=colors)
    (folder / "README.md").write_text(readme)
