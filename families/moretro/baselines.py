"""Baselines: single-objective Retro* per weight, and weighted-sum restarts.

Both run Retro*'s best-first rule on scalarised costs w . c in the same AND-OR graph as MORetro*,
so the only difference is the multi-objective bookkeeping and dominance pruning.
"""

from __future__ import annotations

import numpy as np

from .data import Expander, pareto_filter
from .model import AndOrGraph


def retro_star_scalar(
    target: str, expand: Expander, building_blocks: frozenset, w: np.ndarray, max_depth: int, budget: int
) -> tuple[list, int]:
    """Retro* on w . c until the w-optimal route is solved; returns (all solved front points, expansions)."""
    w = np.asarray(w, dtype=float)
    if w.ndim != 1 or (w < 0).any() or w.sum() <= 0:
        raise ValueError(f"`w` must be a non-negative, non-zero weight vector, got {w}.")
    graph = AndOrGraph(target, frozenset(building_blocks), max_depth, len(w))
    n = 0
    while n < budget:
        below = graph.lower_bounds(w)
        if not np.isfinite(below[graph.root][0]):
            break  # no route within the depth limit
        solved = graph.solved_fronts()[graph.root]
        best_solved = min((float(np.dot(w, f)) for f in solved), default=np.inf)
        if best_solved <= below[graph.root][0] + 1e-12:
            break  # the w-optimal route is solved: Retro* stops here
        above = graph.costs_above(below, w)
        opens = [k for k in graph.children if graph.status(k) == "open" and np.isfinite(above[k][0])]
        if not opens:
            break
        k = min(opens, key=lambda q: (above[q][0] + below[q][0], q))
        graph.expand(k, expand(k[0]))
        n += 1
    return graph.solved_fronts()[graph.root], n


def retro_star_per_weight(
    target: str, expand: Expander, building_blocks: frozenset, weights: list, max_depth: int, budget: int
) -> tuple[list, int]:
    """Independent Retro* runs, one per weight, each keeping only its w-optimal route."""
    if not weights:
        raise ValueError("`weights` must contain at least one weight vector.")
    pts, used = [], 0
    per = max(1, budget // len(weights))
    for w in weights:
        front, n = retro_star_scalar(target, expand, building_blocks, w, max_depth, min(per, budget - used))
        used += n
        if front:
            pts.append(min(front, key=lambda f: float(np.dot(w, f))))
        if used >= budget:
            break
    return pareto_filter(pts), used


def weighted_sum_restarts(
    target: str,
    expand: Expander,
    building_blocks: frozenset,
    m: int,
    max_depth: int,
    budget: int,
    rng: np.random.Generator,
) -> tuple[list, int]:
    """Restart Retro* with random simplex weights until the budget is spent; keep every solved route."""
    pts, used = [], 0
    while used < budget:
        w = rng.dirichlet(np.ones(m))
        front, n = retro_star_scalar(target, expand, building_blocks, w, max_depth, budget - used)
        pts.extend(front)
        used += max(n, 1)  # a zero-expansion restart still costs a step, so the loop ends
    return pareto_filter(pts), used
