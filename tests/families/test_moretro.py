"""Tests of MORetro* (families/moretro): exact fronts, no dominated routes, baselines, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from families.moretro import MORetroConfig, MORetroStar, Reaction, exact_front, pareto_filter
from families.moretro.baselines import retro_star_per_weight, retro_star_scalar
from families.moretro.data import enumerate_routes, hash_cost


def _random_network(rng: np.random.Generator, n_mol: int = 7, m: int = 2):
    """A random acyclic-by-index reaction network: molecule i makes from molecules > i."""
    rx: dict[str, list[Reaction]] = {}
    for i in range(n_mol):
        out = []
        for _ in range(int(rng.integers(1, 4))):
            k = int(rng.integers(1, 3))
            reac = tuple(sorted({f"M{j}" for j in rng.integers(i + 1, n_mol + 3, size=k)}))
            out.append(Reaction(f"M{i}", reac, tuple(float(c) for c in rng.random(m))))
        rx[f"M{i}"] = out
    bb = frozenset(f"M{j}" for j in range(n_mol, n_mol + 3))
    return (lambda s: rx.get(s, [])), bb


def test_pareto_filter_keeps_exactly_the_non_dominated():
    """pareto_filter drops dominated and duplicate points and keeps all others."""
    pts = [(1, 2), (2, 1), (2, 2), (1, 2), (0.5, 3), (3, 3)]
    assert pareto_filter(pts) == [(0.5, 3), (1, 2), (2, 1)]


def test_dynamic_programming_front_equals_route_enumeration():
    """exact_front (with sub-route pruning) equals the Pareto filter of all enumerated routes."""
    rng = np.random.default_rng(0)
    for _ in range(10):
        expand, bb = _random_network(rng)
        for depth in (2, 3, 4):
            brute = pareto_filter(enumerate_routes("M0", expand, bb, depth, 2))
            assert exact_front("M0", expand, bb, depth, 2) == brute


def test_search_front_equals_brute_force_and_is_undominated():
    """On small instances MORetro* certifies exhaustion and returns exactly the brute-force front."""
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(12):
        expand, bb = _random_network(rng, m=3)
        true = exact_front("M0", expand, bb, 4, 3)
        res = MORetroStar(MORetroConfig(n_objectives=3, max_depth=4, expansion_budget=500)).search(
            "M0", expand, bb
        )
        assert res.exhausted
        assert sorted(res.front) == sorted(true)
        for a, b in itertools.permutations(res.front, 2):  # no returned route dominates another
            assert not all(x <= y for x, y in zip(a, b))
        checked += bool(true)
    assert checked >= 6  # most instances have routes, so the check is not vacuous


def test_search_on_syntheseus_linear_molecules_matches_brute_force():
    """The syntheseus toy model as environment: exact recovery on chain targets."""
    pytest.importorskip("syntheseus", reason="environment uses syntheseus' LinearMoleculesToyModel")
    from families.moretro.data import linear_molecules_expander

    expand = linear_molecules_expander(3)
    bb = frozenset(["C", "O", "S", "CC", "CO", "OC", "CS", "SC", "OO", "SS", "OS", "SO"])
    sizes = []
    for target in ("CCOS", "SCOCO"):
        true = exact_front(target, expand, bb, 3, 3)
        res = MORetroStar(MORetroConfig(max_depth=3, expansion_budget=300)).search(target, expand, bb)
        assert res.exhausted and sorted(res.front) == sorted(true)
        sizes.append(len(true))
    assert max(sizes) >= 2  # at least one genuinely multi-point front


def test_pruning_saves_expansions_and_scalar_retro_star_misses_unsupported_points():
    """Dominance pruning expands fewer nodes; Retro* per weight only finds supported points."""
    # Three routes: (0, 1), (1, 0) and (0.6, 0.6), which no linear weight makes optimal.
    rx = {
        "T": [
            Reaction("T", ("A",), (0.0, 1.0)),
            Reaction("T", ("B",), (1.0, 0.0)),
            Reaction("T", ("C",), (0.6, 0.6)),
        ],
        "A": [Reaction("A", ("BB",), (0.0, 0.0))],
        "B": [Reaction("B", ("BB",), (0.0, 0.0))],
        "C": [Reaction("C", ("BB",), (0.0, 0.0))],
    }
    expand, bb = (lambda s: rx.get(s, [])), frozenset(["BB"])
    res = MORetroStar(MORetroConfig(n_objectives=2, max_depth=3)).search("T", expand, bb)
    assert sorted(res.front) == [(0.0, 1.0), (0.6, 0.6), (1.0, 0.0)]
    weights = [np.array([1.0, 0.0]), np.array([0.0, 1.0]), np.array([0.5, 0.5])]
    front, _ = retro_star_per_weight("T", expand, bb, weights, 3, 100)
    assert (0.6, 0.6) not in front


def test_hash_cost_deterministic_and_in_unit_cube():
    """Cost vectors are reproducible and lie in [0, 1]^m."""
    a = hash_cost("CCO", ["CC", "O"], 3)
    assert a == hash_cost("CCO", ["O", "CC"], 3)
    assert all(0.0 <= v < 1.0 for v in a) and len(a) == 3


def test_bad_inputs_raise():
    """Clear errors for invalid configs, weights and mismatched cost lengths."""
    with pytest.raises(ValueError, match="n_weights"):
        MORetroConfig(n_weights=0)
    with pytest.raises(ValueError, match="max_depth"):
        MORetroConfig(max_depth=-2)
    with pytest.raises(ValueError, match="target"):
        MORetroStar().search("", lambda s: [], frozenset())
    rx = {"T": [Reaction("T", ("A",), (0.1, 0.2))]}
    with pytest.raises(ValueError, match="n_objectives"):
        MORetroStar(MORetroConfig(n_objectives=3)).search("T", lambda s: rx.get(s, []), frozenset("A"))
    with pytest.raises(ValueError, match="weight"):
        retro_star_scalar("T", lambda s: rx.get(s, []), frozenset("A"), np.array([-1.0, 0.0]), 2, 10)


def test_demo_quick_smoke(tmp_path):
    """The --quick demo runs end to end and writes its JSON."""
    pytest.importorskip("syntheseus", reason="demo environment uses syntheseus")
    pytest.importorskip("pymoo", reason="hypervolume uses pymoo")
    from families.moretro.demo import main

    assert main(["--quick", "--seeds", "1", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "results.json").exists()
