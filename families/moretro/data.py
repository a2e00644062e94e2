"""Search environments: reaction networks with cost vectors, exact Pareto fronts by enumeration.

The main environment wraps syntheseus' offline `LinearMoleculesToyModel` (C/O/S chains, string cuts
and end substitutions) and gives every reaction a deterministic pseudo-random cost vector in
[0, 1]^m (a hash of the reaction), so brute force can give the true Pareto front. The
real-molecule environment (rdkit templates, property-derived costs) lives in `chem.py`.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache

import numpy as np


@dataclass(frozen=True)
class Reaction:
    """A backward reaction: `product` <- `reactants`, with a cost vector (one entry per objective)."""

    product: str
    reactants: tuple[str, ...]
    cost: tuple[float, ...]
    label: str = ""  # e.g. the template name, to print routes; not used by the search


Expander = Callable[[str], list[Reaction]]


def hash_cost(product: str, reactants: Iterable[str], m: int, salt: str = "") -> tuple[float, ...]:
    """Deterministic cost vector in [0, 1]^m from a hash of the reaction string."""
    key = f"{salt}|{product}>>{'.'.join(sorted(reactants))}".encode()
    digest = hashlib.sha256(key).digest()
    return tuple(int.from_bytes(digest[4 * i : 4 * i + 4], "little") / 2**32 for i in range(m))


def linear_molecules_expander(m: int = 3, salt: str = "", allow_substitution: bool = True) -> Expander:
    """syntheseus `LinearMoleculesToyModel` as an expander with hashed cost vectors."""
    from syntheseus import Molecule
    from syntheseus.reaction_prediction.inference.toy_models import LinearMoleculesToyModel

    model = LinearMoleculesToyModel(allow_substitution=allow_substitution, use_cache=True)

    @cache
    def expand(smiles: str) -> tuple[Reaction, ...]:
        out = []
        for rxn in model([Molecule(smiles, make_rdkit_mol=False)])[0]:
            reactants = tuple(sorted(r.smiles for r in rxn.reactants))
            out.append(Reaction(smiles, reactants, hash_cost(smiles, reactants, m, salt)))
        return tuple(out)

    return lambda smiles: list(expand(smiles))


def random_building_blocks(rng: np.random.Generator, max_len: int = 2, keep: float = 1.0) -> frozenset:
    """All C/O/S chains up to `max_len` atoms, each kept with probability `keep`."""
    chains = ["".join(p) for n in range(1, max_len + 1) for p in itertools.product("COS", repeat=n)]
    return frozenset(c for c in chains if rng.random() < keep)


def random_target(rng: np.random.Generator, length: int) -> str:
    """A random C/O/S chain of the given length."""
    return "".join(rng.choice(list("COS"), size=length))


def pareto_filter(points: Iterable[tuple[float, ...]]) -> list[tuple[float, ...]]:
    """Non-dominated, de-duplicated cost vectors (minimisation), sorted."""
    pts = sorted(set(points))
    front: list[tuple[float, ...]] = []
    for p in pts:  # sorted lexicographically, so a dominator of p always comes before p
        if not any(all(a <= b for a, b in zip(q, p)) for q in front):
            front.append(p)
    return front


def _add(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(x + y for x, y in zip(a, b))


def exact_front(target: str, expand: Expander, building_blocks: frozenset, max_depth: int, m: int) -> list:
    """True Pareto front of route costs up to `max_depth` steps, by exhaustive dynamic programming.

    Dominated sub-routes can be dropped at every molecule because route costs add up: swapping a
    sub-route for one that dominates it gives a route that dominates the original.
    """
    zero = (0.0,) * m

    @cache
    def front(mol: str, depth: int) -> tuple:
        if mol in building_blocks:
            return (zero,)
        if depth >= max_depth:
            return ()
        pts = []
        for rxn in expand(mol):
            subs = [front(r, depth + 1) for r in rxn.reactants]
            for combo in itertools.product(*subs):
                total = rxn.cost
                for c in combo:
                    total = _add(total, c)
                pts.append(total)
        return tuple(pareto_filter(pts))

    return list(front(target, 0))


def enumerate_route_trees(
    target: str, expand: Expander, building_blocks: frozenset, max_depth: int, m: int
) -> list[tuple[tuple[float, ...], tuple[Reaction, ...]]]:
    """Every route as (cost vector, its reactions top-down), without any pruning.

    Exponential in depth: tiny instances, tests and printing example routes only.
    """
    zero = (0.0,) * m

    def routes(mol: str, depth: int) -> list:
        if mol in building_blocks:
            return [(zero, ())]
        if depth >= max_depth:
            return []
        out = []
        for rxn in expand(mol):
            for combo in itertools.product(*[routes(r, depth + 1) for r in rxn.reactants]):
                total, steps = rxn.cost, (rxn,)
                for c, sub in combo:
                    total, steps = _add(total, c), steps + sub
                out.append((total, steps))
        return out

    return routes(target, 0)


def enumerate_routes(
    target: str, expand: Expander, building_blocks: frozenset, max_depth: int, m: int
) -> list:
    """Every route's cost vector, without any pruning (exponential; tiny instances and tests only)."""
    return [cost for cost, _ in enumerate_route_trees(target, expand, building_blocks, max_depth, m)]


def hypervolume(front: list, ref: np.ndarray) -> float:
    """Dominated hypervolume (pymoo's exact HV indicator) with reference point `ref`."""
    from pymoo.indicators.hv import HV

    if not front:
        return 0.0
    pts = np.asarray(front, dtype=float)
    pts = pts[(pts < ref).all(axis=1)]
    return float(HV(ref_point=ref)(pts)) if len(pts) else 0.0
