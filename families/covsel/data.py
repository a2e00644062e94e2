"""Ground truth for covariate selection: random DAGs with latents, the adjustment criterion, SEMs.

The adjustment criterion used as truth is the generalized one of Shpitser et al. (2010) /
Perkovic et al. (2015): Z is valid for (X, Y) iff Z has no node of forb(X, Y) and Z d-separates X
and Y in the proper back-door graph. It allows post-treatment covariates, unlike the back-door rule.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import networkx as nx
import numpy as np


@dataclass
class CausalInstance:
    """A DAG over nodes 0..d-1 (a topological order), its latent nodes, and a target pair (x, y)."""

    graph: nx.DiGraph
    latent: frozenset
    x: int
    y: int
    weights: np.ndarray | None = None  # (d, d) edge weights of a linear SEM; W[i, j] for i -> j
    names: list[str] = field(default_factory=list)

    @property
    def observed(self) -> list[int]:
        return [v for v in sorted(self.graph.nodes) if v not in self.latent]

    @property
    def covariates(self) -> list[int]:
        return [v for v in self.observed if v not in (self.x, self.y)]


def _check_pair(graph: nx.DiGraph, x: int, y: int) -> None:
    if x == y or x not in graph or y not in graph:
        raise ValueError(f"`x`={x} and `y`={y} must be two distinct nodes of the graph.")


def forbidden_set(graph: nx.DiGraph, x: int, y: int) -> set[int]:
    """forb(X, Y): X plus every descendant of a node (other than X) on a proper causal path X -> ... -> Y."""
    _check_pair(graph, x, y)
    causal_nodes = (nx.descendants(graph, x) & (nx.ancestors(graph, y) | {y})) - {x}
    forb = {x}
    for v in causal_nodes:
        forb |= {v} | nx.descendants(graph, v)
    return forb


def proper_backdoor_graph(graph: nx.DiGraph, x: int, y: int) -> nx.DiGraph:
    """Remove the first edge X -> V of every proper causal path from X to Y."""
    g = graph.copy()
    on_causal = nx.ancestors(graph, y) | {y}
    g.remove_edges_from([(x, v) for v in graph.successors(x) if v in on_causal])
    return g


def is_valid_adjustment(graph: nx.DiGraph, x: int, y: int, z: set[int] | frozenset) -> bool:
    """Generalized adjustment criterion for a single treatment and outcome."""
    z = set(z)
    if z & forbidden_set(graph, x, y):
        return False
    return bool(nx.is_d_separator(proper_backdoor_graph(graph, x, y), {x}, {y}, z))


def canonical_adjustment_set(graph: nx.DiGraph, x: int, y: int, latent: set | frozenset) -> set[int]:
    """Observed ancestors of {X, Y} outside forb; valid iff any observed adjustment set exists.

    This is the "canonical set" theorem of van der Zander, Liskiewicz & Textor (2014).
    """
    anc = nx.ancestors(graph, x) | nx.ancestors(graph, y)
    return {v for v in anc if v not in latent} - forbidden_set(graph, x, y) - {x, y}


def valid_set_exists(inst: CausalInstance) -> bool:
    """Whether some set of observed covariates satisfies the adjustment criterion."""
    z = canonical_adjustment_set(inst.graph, inst.x, inst.y, inst.latent)
    return is_valid_adjustment(inst.graph, inst.x, inst.y, z)


def brute_force_valid_sets(inst: CausalInstance, max_size: int | None = None) -> list[frozenset]:
    """Every valid observed adjustment set (exponential; for small graphs and tests)."""
    cov = inst.covariates
    top = len(cov) if max_size is None else min(max_size, len(cov))
    return [
        frozenset(z)
        for k in range(top + 1)
        for z in itertools.combinations(cov, k)
        if is_valid_adjustment(inst.graph, inst.x, inst.y, set(z))
    ]


def has_effect(inst: CausalInstance) -> bool:
    """X has a (graphical) causal effect on Y iff Y is a descendant of X."""
    return inst.y in nx.descendants(inst.graph, inst.x)


def random_instance(
    rng: np.random.Generator,
    n_nodes: int = 20,
    expected_degree: float = 3.0,
    latent_frac: float = 0.2,
    p_effect: float = 0.7,
) -> CausalInstance:
    """Random DAG (Erdos-Renyi over a random order) with latent confounders and a target pair.

    Latents are drawn among nodes with >= 2 children so that they confound something; X and Y
    are observed and Y is a descendant of X with probability about `p_effect`.
    """
    if n_nodes < 4:
        raise ValueError(f"`n_nodes` must be >= 4, got {n_nodes}.")
    if not 0.0 <= latent_frac < 0.9:
        raise ValueError(f"`latent_frac` must lie in [0, 0.9), got {latent_frac}.")
    if expected_degree <= 0:
        raise ValueError(f"`expected_degree` must be > 0, got {expected_degree}.")
    p = min(1.0, expected_degree / (n_nodes - 1))
    g = nx.DiGraph()
    g.add_nodes_from(range(n_nodes))
    for i, j in itertools.combinations(range(n_nodes), 2):
        if rng.random() < p:
            g.add_edge(i, j)
    pairs = [(a, b) for a, b in itertools.permutations(range(n_nodes), 2) if a < b]
    with_effect = [(a, b) for a, b in pairs if b in nx.descendants(g, a)]
    without = [(a, b) for a, b in pairs if b not in nx.descendants(g, a)]
    pool = with_effect if (with_effect and (rng.random() < p_effect or not without)) else without
    x, y = pool[rng.integers(len(pool))]
    candidates = [v for v in g.nodes if v not in (x, y) and g.out_degree(v) >= 2]
    n_lat = min(len(candidates), int(round(latent_frac * n_nodes)))
    latent = (
        frozenset(int(v) for v in rng.choice(candidates, size=n_lat, replace=False)) if n_lat else frozenset()
    )
    return CausalInstance(graph=g, latent=latent, x=int(x), y=int(y))


def with_exogenous_parents(inst: CausalInstance, rng: np.random.Generator, k: int = 2) -> CausalInstance:
    """Add `k` observed root nodes pointing into X (a v-structure at X), e.g. randomised encouragements.

    Without such parents X's out-edges are rarely *visible* in the PAG, and then no CI-only method
    can identify an adjustment set; with them identifiability is common, so completeness is measurable.
    """
    if k < 1:
        raise ValueError(f"`k` must be >= 1, got {k}.")
    g = inst.graph.copy()
    d = g.number_of_nodes()
    new = list(range(d, d + k))
    g.add_nodes_from(new)
    g.add_edges_from((w, inst.x) for w in new)
    for w in new:  # an occasional extra child keeps the parents from being pure instruments
        if rng.random() < 0.3:
            others = [v for v in range(d) if v not in (inst.x, inst.y)]
            if others:
                g.add_edge(w, int(rng.choice(others)))
    return CausalInstance(graph=g, latent=inst.latent, x=inst.x, y=inst.y)


def trap_instance(rng: np.random.Generator, n_noise: int = 4, min_effect: float = 0.3) -> CausalInstance:
    """A linear SEM built to punish lazy adjustment: latent confounding, a mediator, traps.

    Nodes: W1, W2 -> X (a v-structure, so both are certifiable non-descendants); C confounds X and Y;
    L (latent) -> C and L -> Y; M mediates X -> M -> Y; D is a child of M (post-treatment, forbidden);
    K is a collider X -> K <- Y; plus `n_noise` random extra covariates wired in by topological order.
    """
    names = ["W1", "W2", "L", "C", "X", "M", "Y", "D", "K"] + [f"N{i}" for i in range(n_noise)]
    ix = {n: i for i, n in enumerate(names)}
    edges = [("W1", "X"), ("W2", "X"), ("L", "C"), ("L", "Y"), ("C", "X"), ("X", "M"), ("M", "Y")]
    edges += [("X", "Y"), ("M", "D"), ("X", "K"), ("Y", "K"), ("W1", "C")]
    g = nx.DiGraph()
    g.add_nodes_from(range(len(names)))
    g.add_edges_from((ix[a], ix[b]) for a, b in edges)
    pre = [ix[n] for n in ("W1", "W2", "C")]
    for i in range(n_noise):
        v = ix[f"N{i}"]
        # Noise covariates are either pretreatment causes of C / Y or descendants of Y, chosen at random.
        if rng.random() < 0.5:
            g.add_edge(v, int(rng.choice([ix["C"], ix["Y"], *pre])))
        else:
            g.add_edge(int(rng.choice([ix["Y"], ix["K"], ix["D"]])), v)
    assert nx.is_directed_acyclic_graph(g)
    inst = CausalInstance(graph=g, latent=frozenset({ix["L"]}), x=ix["X"], y=ix["Y"], names=names)
    for _ in range(100):  # redraw weights whose paths nearly cancel: that is near-unfaithful
        inst.weights = random_weights(g, rng)
        for a, b in [("L", "C"), ("C", "X"), ("L", "Y")]:  # strong confounding, so adjust-none is biased
            inst.weights[ix[a], ix[b]] *= 2.0
        if abs(true_ace(inst)) >= min_effect:
            break
    return inst


def random_weights(
    graph: nx.DiGraph, rng: np.random.Generator, low: float = 0.5, high: float = 1.0, signed: bool = False
) -> np.ndarray:
    """Edge weights with magnitude in [low, high]; random signs only when `signed`.

    Positive weights by default: with random signs, paths often nearly cancel (e.g. X -> K and
    X -> Y -> K), which is an almost-unfaithful distribution that no CI-based method can handle
    at finite n; the README states this choice.
    """
    d = graph.number_of_nodes()
    w = np.zeros((d, d))
    for i, j in graph.edges:
        sign = rng.choice([-1.0, 1.0]) if signed else 1.0
        w[i, j] = sign * rng.uniform(low, high)
    return w


def sample_sem(inst: CausalInstance, n: int, rng: np.random.Generator, nonlinear: bool = False) -> np.ndarray:
    """Sample all nodes (latents included) of the SEM in topological order; returns (n, d).

    `nonlinear=True` passes every parent that is not X or a descendant of X through a nonlinearity
    (tanh + 0.3 * (v^2 - 1)), so confounding becomes nonlinear while E[Y | do(x)] stays linear in x
    with the path-sum slope of `true_ace`.
    """
    if inst.weights is None:
        raise ValueError("`inst.weights` is None; call `random_weights` first.")
    if n < 10:
        raise ValueError(f"`n` must be >= 10, got {n}.")
    d = inst.graph.number_of_nodes()
    linear_parents = {inst.x} | nx.descendants(inst.graph, inst.x)
    data = np.zeros((n, d))
    for v in nx.topological_sort(inst.graph):
        total = rng.normal(size=n)
        for u in inst.graph.predecessors(v):
            val = data[:, u]
            if nonlinear and u not in linear_parents:
                val = np.tanh(val) + 0.3 * (val**2 - 1.0)
            total = total + inst.weights[u, v] * val
        data[:, v] = total
    return data


def true_ace(inst: CausalInstance) -> float:
    """Slope of E[Y | do(X = x)]: the sum over directed X -> Y paths of the edge-weight products."""
    if inst.weights is None:
        raise ValueError("`inst.weights` is None; call `random_weights` first.")
    d = inst.weights.shape[0]
    total = np.linalg.inv(np.eye(d) - inst.weights)  # sum_k W^k: all directed path products
    return float(total[inst.x, inst.y])
