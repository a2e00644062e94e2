"""MORetro*: multi-objective AND-OR retrosynthesis search that recovers the Pareto front of routes.

Paper: Hastedt, Zhang & del Rio Chanona, "From Feasible to Practical: Pareto-Optimal Synthesis
Planning", ICML 2026, arXiv 2605.07521. Reference code: github.com/fredhastedt/MORetro (read only;
nothing copied). Our implementation, written from the paper's description:

- AND-OR graph of molecule nodes keyed by (SMILES, depth) (so the graph is acyclic) and reactions
  with cost vectors c(r) in [0, 1]^m; building blocks cost 0 (the admissible, h = 0 setting).
- Selection: for each active weight w, Retro*'s rule on the scalarised costs w . c: the open
  molecule on the cheapest partial route (value = cost above it + lower bound below it).
- Bookkeeping: every node keeps the Pareto set of its solved sub-route costs (sums over children
  plus the reaction cost); the target's set is the returned front.
- Pruning: an open node whose componentwise lower-bound vector (cheapest cost above + below, per
  objective) is weakly dominated by the current front cannot lead to a new Pareto route; the
  search stops when every open node is pruned, which is the exactness certificate.
- Weights: as in the paper, a GP from weight to hypervolume improvement with GIBBON choosing the next
  batch (`gibbon.py`, botorch); or our simplified "solution-informed" sampler (`weight_selection`).
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field

import numpy as np

from .config import MORetroConfig
from .data import Expander, Reaction, pareto_filter

logger = logging.getLogger(__name__)

Key = tuple[str, int]  # (molecule SMILES, depth)
INF = float("inf")


@dataclass
class SearchResult:
    """Returned front (cost vectors), number of expansions, and whether exactness was certified."""

    front: list
    n_expansions: int
    exhausted: bool  # True: no undominated open node left, so `front` is the true front
    trace: list = field(default_factory=list)  # (n_expansions, front) after each iteration
    gp_proposals: int = 0  # weight batches chosen by the GP + GIBBON (0 for the simple sampler)


class AndOrGraph:
    """AND-OR graph: molecule nodes (OR) with their expanded reactions (AND)."""

    def __init__(self, target: str, building_blocks: frozenset, max_depth: int, m: int) -> None:
        self.bb, self.max_depth, self.m = building_blocks, max_depth, m
        self.root: Key = (target, 0)
        self.children: dict[Key, list[tuple[np.ndarray, list[Key]]] | None] = {self.root: None}

    def status(self, k: Key) -> str:
        if k[0] in self.bb:
            return "bb"
        if self.children.get(k) is not None:
            return "expanded"
        return "dead" if k[1] >= self.max_depth else "open"

    def expand(self, k: Key, reactions: list[Reaction]) -> None:
        rows = []
        for r in reactions:
            kids = [(s, k[1] + 1) for s in r.reactants]
            for kid in kids:
                self.children.setdefault(kid, None)
            rows.append((np.asarray(r.cost, dtype=float), kids))
        self.children[k] = rows

    def bottom_up_order(self) -> list[Key]:
        return sorted(self.children, key=lambda k: -k[1])

    def lower_bounds(self, w: np.ndarray | None) -> dict[Key, np.ndarray]:
        """Cheapest completion below each node: per objective (w=None) or scalarised by w."""
        dim = self.m if w is None else 1
        val: dict[Key, np.ndarray] = {}
        for k in self.bottom_up_order():
            st = self.status(k)
            if st in ("bb", "open"):
                val[k] = np.zeros(dim)  # h = 0 is admissible
            elif st == "dead":
                val[k] = np.full(dim, INF)
            else:
                best = np.full(dim, INF)
                for cost, kids in self.children[k]:
                    c = cost if w is None else np.array([cost @ w])
                    best = np.minimum(best, c + sum((val[q] for q in kids), np.zeros(dim)))
                val[k] = best
        return val

    def costs_above(self, below: dict[Key, np.ndarray], w: np.ndarray | None) -> dict[Key, np.ndarray]:
        """Cheapest cost of the rest of a route from the root down to each node (top-down)."""
        dim = self.m if w is None else 1
        g = {k: np.full(dim, INF) for k in self.children}
        g[self.root] = np.zeros(dim)
        for k in sorted(self.children, key=lambda q: q[1]):
            if self.status(k) != "expanded" or not np.isfinite(g[k]).any():
                continue
            for cost, kids in self.children[k]:
                c = cost if w is None else np.array([cost @ w])
                for j, q in enumerate(kids):
                    siblings = sum((below[s] for i, s in enumerate(kids) if i != j), np.zeros(dim))
                    g[q] = np.minimum(g[q], g[k] + c + siblings)
        return g

    def solved_fronts(self) -> dict[Key, list]:
        """Pareto set of solved sub-route costs at every node (bottom-up)."""
        zero = (0.0,) * self.m
        out: dict[Key, list] = {}
        for k in self.bottom_up_order():
            st = self.status(k)
            if st == "bb":
                out[k] = [zero]
            elif st != "expanded":
                out[k] = []
            else:
                pts = []
                for cost, kids in self.children[k]:
                    for combo in itertools.product(*[out[q] for q in kids]):
                        pts.append(
                            tuple(float(v) for v in cost + np.sum(combo, axis=0)) if combo else tuple(cost)
                        )
                out[k] = pareto_filter(pts)
        return out


class MORetroStar:
    """Multi-objective Retro*: expands molecules chosen by several scalarisations, prunes by dominance.

    Example:
        >>> from families.moretro.data import Reaction
        >>> rx = {"T": [Reaction("T", ("A",), (0.1, 0.9)), Reaction("T", ("B",), (0.9, 0.1))]}
        >>> res = MORetroStar(MORetroConfig(n_objectives=2)).search("T", lambda s: rx.get(s, []), frozenset("AB"))
        >>> res.front, res.exhausted
        ([(0.1, 0.9), (0.9, 0.1)], True)
    """

    def __init__(self, config: MORetroConfig | None = None) -> None:
        self.config = config or MORetroConfig()

    def _sample_weights(self, rng: np.random.Generator, keep: list[np.ndarray], n: int) -> list[np.ndarray]:
        """Keep productive weights; fill up with Dirichlet draws far (in angle) from the kept ones."""
        out = list(keep)[:n]
        m = self.config.n_objectives
        while len(out) < n:
            cands = rng.dirichlet(np.ones(m), size=32)
            if out:
                ref = np.array(out) / np.linalg.norm(out, axis=1, keepdims=True)
                unit = cands / np.linalg.norm(cands, axis=1, keepdims=True)
                out.append(cands[int(np.argmin((unit @ ref.T).max(axis=1)))])  # least covered direction
            else:
                out.append(np.full(m, 1.0 / m))
        return out

    def search(self, target: str, expand: Expander, building_blocks: frozenset) -> SearchResult:
        """Run the search from `target`; `expand(smiles)` returns the single-step reactions."""
        cfg = self.config
        if not isinstance(target, str) or not target:
            raise ValueError("`target` must be a non-empty SMILES string.")
        graph = AndOrGraph(target, frozenset(building_blocks), cfg.max_depth, cfg.n_objectives)
        rng = np.random.default_rng(cfg.seed)
        weights = [np.eye(cfg.n_objectives)[i] for i in range(min(cfg.n_objectives, cfg.n_weights))]
        weights = self._sample_weights(rng, weights, cfg.n_weights)
        productive: dict[int, int] = {}
        credit = np.zeros(len(weights))  # HV improvement per active weight since the last resampling
        selector = None
        if cfg.weight_selection == "gibbon":
            from .gibbon import GibbonWeightSelector, hv_improvement

            selector = GibbonWeightSelector(cfg.n_objectives, cfg.seed)
        n_exp, it, trace, exhausted = 0, 0, [], False
        front: list = []
        while n_exp < cfg.expansion_budget:
            it += 1
            front = graph.solved_fronts()[graph.root]
            open_nodes = self._undominated_open(graph, front)
            if not open_nodes:
                exhausted = True
                break
            chosen: dict[Key, list[int]] = {}
            for i, w in enumerate(weights):
                below = graph.lower_bounds(w)
                above = graph.costs_above(below, w)
                k = min(open_nodes, key=lambda q: (above[q][0] + below[q][0], q))
                chosen.setdefault(k, []).append(i)
            for k, idx in chosen.items():  # weights that agree share one expansion
                if n_exp >= cfg.expansion_budget:
                    break
                rxns = expand(k[0])
                for r in rxns:
                    if len(r.cost) != cfg.n_objectives:
                        raise ValueError(
                            f"Reaction {r.product} <- {r.reactants} has {len(r.cost)} costs but "
                            f"`n_objectives` is {cfg.n_objectives}; make the expander and the config agree."
                        )
                graph.expand(k, rxns)
                n_exp += 1
                new_front = graph.solved_fronts()[graph.root]
                if set(new_front) - set(front):
                    for i in idx:
                        productive[i] = it
                    if selector is not None:
                        credit[idx] += hv_improvement(front, new_front) / len(idx)
                front = new_front
            trace.append((n_exp, list(front)))
            if it % cfg.resample_every == 0 and selector is not None:
                for w, c in zip(weights, credit):
                    selector.observe(w, c)
                weights = selector.propose(cfg.n_weights)
                credit = np.zeros(len(weights))
            elif it % cfg.resample_every == 0:
                keep = [
                    w for i, w in enumerate(weights) if it - productive.get(i, -(10**9)) < cfg.resample_every
                ]
                weights = self._sample_weights(rng, keep, cfg.n_weights)
                productive = {i: it for i in range(len(keep))}
        front = graph.solved_fronts()[graph.root]
        if not exhausted and not self._undominated_open(graph, front):
            exhausted = True
        logger.info(
            "MORetro* %s: %d expansions, |front|=%d, exhausted=%s", target, n_exp, len(front), exhausted
        )
        return SearchResult(front, n_exp, exhausted, trace, selector.n_gp_fits if selector else 0)

    def _undominated_open(self, graph: AndOrGraph, front: list) -> list[Key]:
        """Open nodes reachable from the root whose lower-bound vector no front point dominates."""
        below = graph.lower_bounds(None)
        above = graph.costs_above(below, None)
        fr = np.asarray(front, dtype=float).reshape(-1, graph.m)
        out = []
        for k in graph.children:
            if graph.status(k) != "open" or not np.isfinite(above[k]).all():
                continue
            lb = above[k] + below[k]
            if self.config.prune_dominated and len(fr) and (fr <= lb + 1e-12).all(axis=1).any():
                continue
            out.append(k)
        return out
