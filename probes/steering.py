"""Steering with a direction during `generate`, sweeps over layer x alpha, and their controls.

Every edit goes through `LatentModel.steer` (add `h + v`, ablate the `v` component, clamp it).
Strength: `alpha` is in units of the layer's mean residual norm, so the added vector is
`alpha * mean|h_l| * unit(d)` and one alpha means roughly the same push at every layer (the
scaling advice in the CAA / Hua et al. line of work). Controls:

* coherence guard: perplexity of neutral text under the same edit; a setting whose perplexity
  exceeds `ppl_tol` times the unsteered value is flagged incoherent (its behaviour change may just
  be broken text);
* same-norm random vectors: a Gaussian direction rescaled to the steering vector's norm, run
  through the same sweep (Hua et al.: matched-norm random vectors do nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from probes.activations import render
from probes.data import Item

if TYPE_CHECKING:
    from latent import LatentModel

__all__ = ["SteerSpec", "generate_texts", "perplexity", "random_like", "reply_logprob", "steered", "sweep"]

log = logging.getLogger(__name__)


@dataclass
class SteerSpec:
    """One edit: `mode` ("add"/"ablate"/"clamp") of `vector` (D,) at decoder `layer` with `alpha`."""

    layer: int
    vector: torch.Tensor
    alpha: float = 1.0
    mode: str = "add"


def random_like(vector: torch.Tensor, seed: int = 0) -> torch.Tensor:
    """A Gaussian random vector with exactly the norm of `vector` (the matched-norm control)."""
    if vector.ndim != 1:
        raise ValueError(f"`vector` must be 1-D, got shape {tuple(vector.shape)}.")
    g = torch.Generator().manual_seed(seed)
    r = torch.randn(vector.shape[0], generator=g, dtype=torch.float64)
    return (r / r.norm() * vector.double().norm()).to(vector.dtype)


def direction_vector(direction: np.ndarray | torch.Tensor, alpha: float, scale: float) -> torch.Tensor:
    """alpha * scale * unit(direction) as a float32 tensor."""
    d = torch.as_tensor(np.asarray(direction), dtype=torch.float64)
    if d.ndim != 1 or not torch.isfinite(d).all() or d.norm() == 0:
        raise ValueError("`direction` must be a finite, non-zero 1-D vector.")
    return (d / d.norm() * alpha * scale).float()


@contextmanager
def steered(m: LatentModel, specs: SteerSpec | list[SteerSpec] | None) -> Iterator[None]:
    """Apply zero, one or several edits for the duration of the block."""
    specs = [] if specs is None else [specs] if isinstance(specs, SteerSpec) else list(specs)
    with ExitStack() as stack:
        for s in specs:
            stack.enter_context(m.steer(s.layer, s.vector, alpha=s.alpha, mode=s.mode))
        yield


@torch.no_grad()
def generate_texts(
    m: LatentModel,
    items: list[Item],
    steer: SteerSpec | list[SteerSpec] | None = None,
    max_new_tokens: int = 24,
    batch_size: int = 32,
) -> list[str]:
    """Greedy replies to `items` (rendered with the chat template), optionally under steering."""
    if not items:
        raise ValueError("`items` is empty: nothing to generate.")
    texts = [render(m, Item(it.messages)) for it in items]
    out: list[str] = []
    with steered(m, steer):
        for i in range(0, len(texts), batch_size):
            gen = m.generate(**m.encode(texts[i : i + batch_size]), max_new_tokens=max_new_tokens)
            out.extend(gen.texts)
    return out


@torch.no_grad()
def perplexity(
    m: LatentModel, texts: list[str], steer: SteerSpec | list[SteerSpec] | None = None, batch_size: int = 16
) -> float:
    """Token-level perplexity of plain `texts` (teacher forcing), optionally under steering."""
    if not texts:
        raise ValueError("`texts` is empty: the coherence guard needs neutral text.")
    nll, count = 0.0, 0
    with steered(m, steer):
        for i in range(0, len(texts), batch_size):
            enc = m.encode(texts[i : i + batch_size])
            mask = enc["attention_mask"].to(m.device)
            logp = m.token_logprobs(enc["input_ids"], mask)  # (B, T-1), 0 at pads
            keep = (mask[:, 1:] * mask[:, :-1]).bool()
            nll -= float(logp[keep].sum())
            count += int(keep.sum())
    if count == 0:
        raise ValueError("neutral texts are too short: need at least two tokens each.")
    return float(np.exp(nll / count))


@torch.no_grad()
def reply_logprob(
    m: LatentModel,
    items: list[Item],
    replies: list[str],
    steer: SteerSpec | list[SteerSpec] | None = None,
    batch_size: int = 16,
) -> np.ndarray:
    """log P(reply | prompt) per item (teacher forcing), optionally under steering: a continuous
    behaviour score (e.g. log P(<rejected/>) - log P(answer)) that moves before greedy output flips."""
    if not items or len(items) != len(replies):
        raise ValueError(f"need one reply per item, got {len(items)} items and {len(replies)} replies.")
    prompts = [render(m, Item(it.messages)) for it in items]
    n_tok = lambda t: len(m.tokenizer(t, add_special_tokens=False)["input_ids"])  # noqa: E731
    out: list[float] = []
    with steered(m, steer):
        for i in range(0, len(items), batch_size):
            full = [p + r for p, r in zip(prompts[i : i + batch_size], replies[i : i + batch_size])]
            n_reply = [n_tok(f) - n_tok(p) for f, p in zip(full, prompts[i : i + batch_size])]
            if min(n_reply) < 1:
                raise ValueError("a reply is empty after tokenization: pass non-empty replies.")
            enc = m.encode(full)
            tok = m.token_logprobs(enc["input_ids"], enc["attention_mask"])  # (B, T-1): log p of token t+1
            out.extend(float(tok[b, -n:].sum()) for b, n in enumerate(n_reply))  # left padding: reply is last
    return np.array(out)


def sweep(
    m: LatentModel,
    items: list[Item],
    directions: dict[int, np.ndarray],
    norms: dict[int, float],
    alphas: list[float],
    metric: Callable[[list[str]], float],
    neutral: list[str],
    mode: str = "add",
    ppl_tol: float = 1.5,
    n_random: int = 1,
    max_new_tokens: int = 24,
    seed: int = 0,
) -> list[dict]:
    """Layer x alpha sweep of `metric(replies)` for the direction and for same-norm random vectors.

    Args:
        directions (`dict[int, np.ndarray]`): layer -> direction (any norm; made unit here).
        norms (`dict[int, float]`): layer -> mean residual norm (alpha is in these units).
        metric (`Callable`): maps the list of replies (same order as `items`) to a number.
        neutral (`list[str]`): text for the perplexity guard.
        ppl_tol (`float`): a row is `coherent` when ppl <= ppl_tol * unsteered ppl.

    Returns rows {layer, alpha, kind ("direction"/"random"), seed, metric, ppl, coherent}; the first row
    is the unsteered baseline (layer -1, alpha 0).
    """
    if not directions:
        raise ValueError("`directions` is empty: pass layer -> direction.")
    if not alphas:
        raise ValueError("`alphas` is empty: pass at least one steering strength.")
    if ppl_tol < 1:
        raise ValueError(f"`ppl_tol` must be >= 1, got {ppl_tol}.")
    missing = [layer for layer in directions if layer not in norms]
    if missing:
        raise ValueError(f"no residual norm for layers {missing}: pass `norms` for every steered layer.")
    base_ppl = perplexity(m, neutral)
    base = metric(generate_texts(m, items, max_new_tokens=max_new_tokens))
    rows = [dict(layer=-1, alpha=0.0, kind="baseline", seed=-1, metric=base, ppl=base_ppl, coherent=True)]
    for layer, d in directions.items():
        for alpha in alphas:
            vec = direction_vector(d, alpha, norms[layer])
            controls = [("direction", 0, vec)] + [
                ("random", seed + k, random_like(vec, seed + k)) for k in range(n_random)
            ]
            for kind, s, v in controls:
                # ablate/clamp use the direction itself with `alpha` as the clamp value
                spec = (
                    SteerSpec(layer, v, 1.0, "add")
                    if mode == "add"
                    else SteerSpec(layer, v, alpha * norms[layer], mode)
                )
                ppl = perplexity(m, neutral, spec)
                val = metric(generate_texts(m, items, spec, max_new_tokens=max_new_tokens))
                rows.append(
                    dict(
                        layer=layer,
                        alpha=alpha,
                        kind=kind,
                        seed=s,
                        metric=val,
                        ppl=ppl,
                        coherent=ppl <= ppl_tol * base_ppl,
                    )
                )
                log.info("steer L%d a=%.2f %s: metric %.3f ppl %.2f", layer, alpha, kind, val, ppl)
    return rows
