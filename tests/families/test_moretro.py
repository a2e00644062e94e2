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


# --- rdkit environment: hand-written templates on real molecules -------------------------------

# template -> (product, expected reactant sets, written by hand here, canonicalised before comparing)
TEMPLATE_CASES = {
    "amide_coupling": ("CC(=O)Nc1ccc(O)cc1", [("CC(O)=O", "Nc1ccc(O)cc1")]),
    "amide_acyl_chloride": ("CC(=O)Nc1ccc(O)cc1", [("ClC(C)=O", "Nc1ccc(O)cc1")]),
    "ester_fischer": ("CCOC(=O)c1ccccc1", [("OCC", "OC(=O)c1ccccc1")]),
    "ester_acyl_chloride": ("CC(=O)Oc1ccccc1", [("CC(Cl)=O", "Oc1ccccc1")]),
    "acyl_chloride_formation": ("O=C(Cl)c1ccc(Br)cc1", [("OC(=O)c1ccc(Br)cc1",)]),
    "ester_hydrolysis": ("OC(=O)c1ccccc1", [("COC(=O)c1ccccc1",)]),
    "suzuki": (
        "COc1ccc(-c2ccccc2)cc1",
        [("Brc1ccc(OC)cc1", "OB(O)c1ccccc1"), ("COc1ccc(B(O)O)cc1", "Brc1ccccc1")],
    ),
    "reductive_amination": ("c1ccc(CN2CCOCC2)cc1", [("O=Cc1ccccc1", "C1COCCN1")]),
    "n_alkylation": ("c1ccc(CN2CCOCC2)cc1", [("BrCc1ccccc1", "C1COCCN1")]),
    "williamson_ether": ("c1ccc(COc2ccccc2)cc1", [("BrCc1ccccc1", "Oc1ccccc1")]),
    "snar": ("c1ccc(N2CCOCC2)nc1", [("Clc1ccccn1", "C1COCCN1")]),
    "buchwald_hartwig": ("c1ccc(N2CCOCC2)cc1", [("Brc1ccccc1", "C1COCCN1")]),
    "boc_deprotection": ("c1ccc(N2CCNCC2)nc1", [("CC(C)(C)OC(=O)N1CCN(c2ccccn2)CC1",)]),
    "nitro_reduction": ("Nc1ccc(O)cc1", [("[O-][N+](=O)c1ccc(O)cc1",)]),
    "sulfonamide": ("Cc1ccc(S(=O)(=O)N2CCOCC2)cc1", [("Cc1ccc(S(Cl)(=O)=O)cc1", "C1COCCN1")]),
    "ketone_reduction": ("C[C@H](O)c1ccccc1", [("CC(=O)c1ccccc1",)]),  # stereocentre is destroyed
}


def test_each_template_gives_the_expected_canonical_reactants():
    """Every template, applied retro to a known product, gives exactly the hand-written reactants."""
    pytest.importorskip("rdkit", reason="templates are rdkit reaction SMARTS")
    from families.moretro.chem import TEMPLATES, apply_template, canonical_smiles

    assert set(TEMPLATE_CASES) == {t.name for t in TEMPLATES}  # every template has a case
    for name, (product, expected) in TEMPLATE_CASES.items():
        want = sorted(tuple(sorted(canonical_smiles(s) for s in rs)) for rs in expected)
        assert sorted(apply_template(name, product)) == want, name
    # chemoselectivity: templates do not fire where the chemistry does not apply
    assert apply_template("snar", "c1ccc(N2CCOCC2)cc1") == []  # no ring nitrogen to activate
    assert apply_template("ester_fischer", "CC(=O)Oc1ccccc1") == []  # phenyl ester
    assert apply_template("amide_coupling", "O=C1CCCN1") == []  # lactam: ring bond
    assert apply_template("amide_coupling", "CC(C)(C)OC(=O)N1CCNCC1") == []  # carbamate
    assert apply_template("buchwald_hartwig", "CC(=O)Nc1ccccc1") == []  # amide N
    # an untouched stereocentre survives the disconnection
    assert ("CC(=O)O", "C[C@H](N)c1ccccc1") in apply_template("amide_coupling", "C[C@H](NC(C)=O)c1ccccc1")


def test_template_model_is_a_syntheseus_backward_model_with_labelled_reactions():
    """The template model plugs into syntheseus and its reactions carry their template name."""
    pytest.importorskip("syntheseus", reason="the template model is a syntheseus BackwardReactionModel")
    from syntheseus import Molecule
    from syntheseus.interface.models import BackwardReactionModel

    from families.moretro.chem import template_model

    model = template_model()
    assert isinstance(model, BackwardReactionModel)
    rxns = model([Molecule("CC(=O)Nc1ccc(O)cc1")])[0]
    assert {r.metadata["template"] for r in rxns} == {"amide_coupling", "amide_acyl_chloride"}


def test_rdkit_costs_are_on_the_grid_and_follow_molecule_properties():
    """Costs lie in [0, 1]^3 on the 1/256 grid; material = sum over bought reactants of (size/20)^2."""
    pytest.importorskip("rdkit", reason="material cost is computed with rdkit")
    from families.moretro.chem import building_blocks, material_cost, template_expander

    assert material_cost(["CCO", "CC(=O)Nc1ccc(O)cc1"], frozenset(["CCO"])) == (3 / 20) ** 2  # 2nd not bought
    assert material_cost(["CC(N)O"], frozenset(["CC(N)O"])) == ((4 + 4) / 20) ** 2  # 1 stereocentre
    bb = building_blocks()
    expand = template_expander(bb)
    rxns = expand("COc1ccc(-c2ccc(C(=O)NCc3ccccc3)cc2)cc1")
    assert rxns
    for r in rxns:
        assert len(r.cost) == 3 and all(0.0 <= c <= 1.0 and (c * 256).is_integer() for c in r.cost)


def test_rdkit_instance_front_equals_brute_force_and_no_route_is_dominated():
    """On real molecules, MORetro* certifies and returns exactly the brute-force front, undominated."""
    pytest.importorskip("rdkit", reason="templates are rdkit reaction SMARTS")
    pytest.importorskip("syntheseus", reason="the template model is a syntheseus BackwardReactionModel")
    from families.moretro.chem import TARGETS, building_blocks, canonical_smiles, template_expander

    bb = building_blocks()
    expand = template_expander(bb)
    sizes = []
    for name in ("N-benzoyl benzocaine (amide + ester)", "4-methoxybenzyl pyridyl piperazine (amine + SNAr)"):
        target = canonical_smiles(TARGETS[name])
        brute = pareto_filter(enumerate_routes(target, expand, bb, 3, 3))  # every route, no pruning
        assert exact_front(target, expand, bb, 3, 3) == brute
        res = MORetroStar(MORetroConfig(max_depth=3, expansion_budget=500)).search(target, expand, bb)
        assert res.exhausted and sorted(res.front) == brute
        for a, b in itertools.permutations(res.front, 2):
            assert not all(x <= y for x, y in zip(a, b))
        sizes.append(len(brute))
    assert max(sizes) >= 4  # genuine multi-point fronts


def test_bad_smiles_raise_clear_value_errors():
    """Unparsable or empty SMILES, unknown templates and non-canonical building blocks are rejected."""
    pytest.importorskip("rdkit", reason="SMILES are parsed with rdkit")
    from families.moretro.chem import apply_template, building_blocks, canonical_smiles, template_expander

    with pytest.raises(ValueError, match="Invalid SMILES"):
        canonical_smiles("C1CC(")
    with pytest.raises(ValueError, match="Invalid SMILES"):
        canonical_smiles("")
    with pytest.raises(ValueError, match="Invalid SMILES"):
        template_expander(building_blocks())("c1ccccc")  # unclosed aromatic ring
    with pytest.raises(ValueError, match="Unknown template"):
        apply_template("friedel_crafts", "CCO")
    with pytest.raises(ValueError, match="canonical"):
        template_expander(frozenset(["OCC"]))


def test_demo_quick_smoke(tmp_path):
    """The --quick demo runs end to end and writes its JSON."""
    pytest.importorskip("syntheseus", reason="demo environment uses syntheseus")
    pytest.importorskip("pymoo", reason="hypervolume uses pymoo")
    pytest.importorskip("rdkit", reason="demo's second environment uses rdkit templates")
    from families.moretro.demo import main

    assert main(["--quick", "--seeds", "1", "--out", str(tmp_path)]) == 0
    from families.demo_cli import load_results

    results = load_results(tmp_path)
    assert set(results) >= {"toy", "rdkit", "large"}
    toy = results["toy"][0]
    for name in ("MORetro* (GP + GIBBON)", "MORetro* (simple sampler)"):  # known answer: the whole toy front
        assert toy[name]["10"] == {"exact": 1.0, "hv": 1.0} and toy[name]["certified_exact"] == 1.0
    assert toy["Retro* per weight (5)"]["10"]["exact"] == 0.0  # scalarised search misses part of that front
    assert results["large"][0]["MORetro* (GP + GIBBON)"]["certified_exact"] == 1.0
    rd = results["rdkit"][0]["methods"]
    hv = {b: rd["MORetro* (GP + GIBBON)"][b]["hv"] for b in ("2", "10")}  # normalised by the true front's HV
    assert 0.0 < hv["2"] <= hv["10"] <= 1.0 + 1e-9  # more expansions never lose found routes
    assert hv["10"] >= 0.9 and hv["10"] > rd["Retro* per weight (5)"]["10"]["hv"] + 0.1
    assert all(
        t["moretro_exact"] and t["sampler_exact"] and t["brute_force_equals_dp"]
        for t in results["rdkit"][0]["targets"].values()
    )


def test_hv_improvement_is_positive_only_for_a_new_pareto_point():
    """The GP's training signal: a new non-dominated route adds hypervolume, a dominated one adds none."""
    from families.moretro.gibbon import hv_improvement

    before = [(0.2, 0.8), (0.8, 0.2)]
    assert hv_improvement(before, before + [(0.4, 0.4)]) > 0
    assert hv_improvement(before, before) == 0.0
    assert hv_improvement([], [(0.5, 0.5)]) > 0


def test_gibbon_proposes_simplex_weights_near_the_high_improvement_corner():
    """With HV improvement growing along w_0, GIBBON's first pick lies in the w_0-heavy part of the simplex."""
    pytest.importorskip("botorch", reason="GP + GIBBON weight selection needs botorch (families extra)")
    from families.moretro.gibbon import GibbonWeightSelector

    sel = GibbonWeightSelector(n_objectives=3, seed=0)
    rng = np.random.default_rng(3)
    for w in rng.dirichlet(np.ones(3), size=20):
        sel.observe(w, float(w[0] ** 2))
    picks = sel.propose(3)
    assert sel.n_gp_fits == 1
    for w in picks:
        assert w.min() >= 0 and abs(w.sum() - 1) < 1e-9
    assert picks[0][0] > 0.6


def test_gibbon_search_uses_the_gp_and_still_certifies_the_brute_force_front():
    """Weight choice only orders expansions: with GP + GIBBON the certified front equals brute force."""
    pytest.importorskip("botorch", reason="GP + GIBBON weight selection needs botorch (families extra)")
    rng = np.random.default_rng(5)
    used_gp = 0
    for _ in range(3):
        expand, bb = _random_network(rng, n_mol=14, m=3)
        true = exact_front("M0", expand, bb, 6, 3)
        cfg = MORetroConfig(n_objectives=3, max_depth=6, expansion_budget=500, resample_every=1)
        res = MORetroStar(cfg).search("M0", expand, bb)
        assert res.exhausted and len(res.front) == len(true)  # sums of random floats: compare to 1e-12
        np.testing.assert_allclose(sorted(res.front), sorted(true), rtol=0, atol=1e-12)
        used_gp += res.gp_proposals
    assert used_gp > 0  # the GP path ran, so the equality above is not the simple sampler's
