"""Demo: MORetro* vs Retro* per weight and weighted-sum restarts, on two search environments.

toy: syntheseus toy networks. Each instance has a random C/O/S chain target, building blocks =
chains of <= 2 atoms, hashed cost vectors in [0, 1]^3 and a depth limit D.
rdkit: real drug-like targets, 16 hand-written retro templates (chem.py), cost vectors
(step cost, hazard, material price) in [0, 1]^3, and a depth limit D.
In both, the true Pareto front comes from exhaustive enumeration of the AND-OR graph to depth D.
Metrics: exact front recovery, hypervolume ratio HV(found) / HV(true) at several expansion budgets,
and the expansions MORetro* needs to certify exactness.

Run: python -m families.moretro.demo [--quick] [--seeds 3] [--env all|toy|rdkit] [--out runs/moretro]
"""

from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..demo_cli import demo_config, finish_demo, run_demo
from .baselines import retro_star_per_weight, weighted_sum_restarts
from .config import MORetroConfig
from .data import (
    Expander,
    enumerate_route_trees,
    exact_front,
    hypervolume,
    linear_molecules_expander,
    pareto_filter,
    random_building_blocks,
    random_target,
)
from .model import MORetroStar

GIBBON, SAMPLER = "MORetro* (GP + GIBBON)", "MORetro* (simple sampler)"
SELECTIONS = {GIBBON: "gibbon", SAMPLER: "sampler"}
METHODS = [GIBBON, SAMPLER, "Retro* per weight (5)", "weighted-sum restarts"]


def _simplex_weights(m: int) -> list[np.ndarray]:
    """Corners plus the centroid and two mid-points: 5 weights for m = 3."""
    eye = list(np.eye(m))
    return (eye + [np.full(m, 1.0 / m)] + [(eye[0] + eye[1]) / 2, (eye[1] + eye[2]) / 2])[:5]


def _score_methods(
    target: str,
    expand: Expander,
    bb: frozenset,
    true: list,
    traces: dict[str, list],
    depth: int,
    budgets: list[int],
    rng: np.random.Generator,
    rec: dict,
) -> None:
    """Append exact-recovery and HV-ratio scores of every method at every budget to `rec`."""
    m = len(true[0])
    ref = np.asarray(true).max(axis=0) * 1.1 + 1e-9  # reference point just beyond the true nadir
    hv_true = hypervolume(true, ref)
    for b in budgets:
        fronts = {}
        for meth, trace in traces.items():  # MORetro*'s front after <= b expansions
            prefix = [f for n, f in trace if n <= b]
            fronts[meth] = prefix[-1] if prefix else []
        fronts |= {
            "Retro* per weight (5)": retro_star_per_weight(target, expand, bb, _simplex_weights(m), depth, b)[
                0
            ],
            "weighted-sum restarts": weighted_sum_restarts(target, expand, bb, m, depth, b, rng)[0],
        }
        for meth, fr in fronts.items():
            rec[meth][b]["exact"].append(sorted(fr) == sorted(true))
            rec[meth][b]["hv"].append(hypervolume(fr, ref) / hv_true if hv_true > 0 else 1.0)


def _mean_rec(rec: dict) -> dict:
    return {
        meth: {b: {k: float(np.mean(v)) for k, v in d.items()} for b, d in per.items()}
        for meth, per in rec.items()
    }


def run_seed(seed: int, n_targets: int, lengths: tuple[int, int], depth: int, budgets: list[int]) -> dict:
    """Toy environment, one seed: several random chain targets, every method at every budget."""
    rng = np.random.default_rng(seed)
    m = 3
    expand = linear_molecules_expander(m, salt=str(seed))
    bb = random_building_blocks(rng, max_len=2)
    rec = {meth: {b: {"exact": [], "hv": []} for b in budgets} for meth in METHODS}
    certify, sizes, exact = {k: [] for k in SELECTIONS}, [], {k: [] for k in SELECTIONS}
    for _ in range(n_targets):
        target = random_target(rng, int(rng.integers(lengths[0], lengths[1] + 1)))
        true = exact_front(target, expand, bb, depth, m)
        if not true:
            continue
        sizes.append(len(true))
        traces = {}
        for meth, sel in SELECTIONS.items():
            cfg = MORetroConfig(max_depth=depth, expansion_budget=10_000, seed=seed, weight_selection=sel)
            full = MORetroStar(cfg).search(target, expand, bb)
            certify[meth].append(full.n_expansions if full.exhausted else np.nan)
            exact[meth].append(full.exhausted and sorted(full.front) == sorted(true))
            traces[meth] = full.trace
        if budgets:
            _score_methods(target, expand, bb, true, traces, depth, budgets, rng, rec)
    out = _mean_rec(rec) if budgets else {}
    for meth in SELECTIONS:
        out[meth] = out.get(meth, {}) | {
            "certify_expansions": float(np.nanmean(certify[meth])) if sizes else float("nan"),
            "certified_exact": float(np.mean(exact[meth])) if sizes else float("nan"),
        }
    out["front_size"] = float(np.mean(sizes)) if sizes else float("nan")
    out["n_targets"] = len(sizes)
    return out


def run_rdkit_seed(seed: int, depth: int, budgets: list[int]) -> dict:
    """rdkit environment, one seed: every drug-like target, brute-force check, every method and budget.

    The instance is deterministic; the seed drives MORetro*'s weight sampler and the restarts.
    """
    from .chem import N_OBJECTIVES, TARGETS, building_blocks, canonical_smiles, template_expander

    rng = np.random.default_rng(seed)
    bb = building_blocks()
    expand = template_expander(bb)
    rec = {meth: {b: {"exact": [], "hv": []} for b in budgets} for meth in METHODS}
    per_target = {}
    for name, smiles in TARGETS.items():
        target = canonical_smiles(smiles)
        true = exact_front(target, expand, bb, depth, N_OBJECTIVES)
        routes = enumerate_route_trees(target, expand, bb, depth, N_OBJECTIVES)
        traces, fulls = {}, {}
        for meth, sel in SELECTIONS.items():
            cfg = MORetroConfig(max_depth=depth, expansion_budget=10_000, seed=seed, weight_selection=sel)
            fulls[meth] = MORetroStar(cfg).search(target, expand, bb)
            traces[meth] = fulls[meth].trace
        full = fulls[GIBBON]
        n_dominated = sum(
            any(q != p and all(a <= b for a, b in zip(q, p)) for q in full.front) for p in full.front
        )
        per_target[name] = {
            "smiles": target,
            "n_routes": len(routes),
            "front_size": len(true),
            "brute_force_equals_dp": pareto_filter(c for c, _ in routes) == true,
            "moretro_exact": full.exhausted and sorted(full.front) == sorted(true),
            "moretro_dominated_returned": int(n_dominated),
            "certify_expansions": full.n_expansions,
            "sampler_exact": fulls[SAMPLER].exhausted and sorted(fulls[SAMPLER].front) == sorted(true),
            "sampler_certify_expansions": fulls[SAMPLER].n_expansions,
            "true_front": true,
        }
        if true:
            _score_methods(target, expand, bb, true, traces, depth, budgets, rng, rec)
    return {"methods": _mean_rec(rec), "targets": per_target}


def _example_routes(name: str, depth: int) -> list[str]:
    """One route (template names, top-down) per true Pareto point of a demo target."""
    from .chem import N_OBJECTIVES, TARGETS, building_blocks, canonical_smiles, template_expander

    bb = building_blocks()
    routes = enumerate_route_trees(
        canonical_smiles(TARGETS[name]), template_expander(bb), bb, depth, N_OBJECTIVES
    )
    front, lines = set(pareto_filter(c for c, _ in routes)), []
    for cost, steps in sorted(routes, key=lambda cr: cr[0]):
        if cost in front:
            front.discard(cost)
            lines.append(f"({', '.join(f'{v:.3f}' for v in cost)})  " + ", ".join(r.label for r in steps))
    return lines


def _ms(vals: list[float]) -> str:
    return f"{np.mean(vals):.3f} +- {np.std(vals):.3f}"


def _print_method_table(per_seed: list[dict], budgets: list[int]) -> None:
    print(f"{'method':28s} {'budget':>6s} {'exact front':>16s} {'HV / HV_true':>16s}")
    for meth in METHODS:
        for b in budgets:
            ex = _ms([r[meth][b]["exact"] for r in per_seed])
            hv = _ms([r[meth][b]["hv"] for r in per_seed])
            print(f"{meth:28s} {b:>6d} {ex:>16s} {hv:>16s}")


def _toy_section(seeds: int, quick: bool) -> list[dict]:
    n_targets, lengths, depth, budgets = (
        (2, (4, 4), 2, [10, 50]) if quick else (6, (4, 6), 3, [10, 25, 50, 100])
    )
    runs = [run_seed(s, n_targets, lengths, depth, budgets) for s in range(seeds)]
    print(
        f"\n== MORetro* on syntheseus LinearMolecules, depth <= {depth}, {n_targets} targets/seed, {seeds} seeds =="
    )
    print(f"true front size: {_ms([r['front_size'] for r in runs])}")
    _print_certify(runs)
    _print_method_table(runs, budgets)
    return runs


def _print_certify(runs: list[dict]) -> None:
    for meth in SELECTIONS:
        print(
            f"{meth}: certified and equal to brute force {_ms([r[meth]['certified_exact'] for r in runs])}, "
            f"expansions to certify {_ms([r[meth]['certify_expansions'] for r in runs])}"
        )


def _large_section(seeds: int, quick: bool) -> list[dict]:
    """Larger toy instances (deeper routes, longer chains): certification only, no budget sweep."""
    n_targets, lengths, depth = (1, (5, 5), 3) if quick else (4, (6, 8), 4)
    runs = [run_seed(100 + s, n_targets, lengths, depth, []) for s in range(seeds)]
    print(
        f"\n== Larger LinearMolecules instances: depth <= {depth}, chains of {lengths[0]}-{lengths[1]} atoms, "
        f"{n_targets} targets/seed, {seeds} seeds =="
    )
    print(f"true front size: {_ms([r['front_size'] for r in runs])}")
    _print_certify(runs)
    return runs


def _rdkit_section(seeds: int, quick: bool) -> list[dict]:
    depth, budgets = (3, [2, 10]) if quick else (4, [2, 5, 10, 20, 40])
    runs = [run_rdkit_seed(s, depth, budgets) for s in range(seeds)]
    targets = runs[0]["targets"]
    print(
        f"\n== MORetro* on rdkit templates (real molecules), depth <= {depth}, {len(targets)} targets, {seeds} seeds =="
    )
    print(
        f"{'target':54s} {'routes':>6s} {'|front|':>7s} {'brute=DP':>8s} {'exact,all seeds':>15s} "
        f"{'certify GIBBON':>15s} {'certify sampler':>16s}"
    )
    for name, t in targets.items():
        cert = _ms([r["targets"][name]["certify_expansions"] for r in runs])
        cert_s = _ms([r["targets"][name]["sampler_certify_expansions"] for r in runs])
        exact = all(r["targets"][name]["moretro_exact"] for r in runs)
        exact = exact and all(r["targets"][name]["moretro_dominated_returned"] == 0 for r in runs)
        exact = exact and all(r["targets"][name]["sampler_exact"] for r in runs)
        print(
            f"{name:54s} {t['n_routes']:>6d} {t['front_size']:>7d} {t['brute_force_equals_dp']!s:>8s} "
            f"{exact!s:>15s} {cert:>15s} {cert_s:>16s}"
        )
    _print_method_table([r["methods"] for r in runs], budgets)
    example = "biaryl benzylamide (Suzuki + amide)"
    print(f"\nPareto routes of the {example}, cost (step, hazard, material), steps top-down:")
    for line in _example_routes(example, depth):
        print("  " + line)
    return runs


@dataclass
class MoretroFlags:
    """The moretro demo's own flags (next to the shared --quick, --seeds, --out)."""

    env: str = field(default="all", metadata={"help": "which environments to run"})


MoretroDemo = demo_config("moretro", MoretroFlags, seeds=3, quick_seeds=1)


def main(argv: list[str] | None = None) -> int:
    """Run the chosen environments over all seeds, print the tables, write results.json."""
    return run_demo(MoretroDemo, __doc__, _demo, argv)


def _demo(args: Any) -> int:
    import torch

    torch.set_num_threads(1)  # the GP has a handful of points: one thread avoids contention
    t0 = time.time()
    results: dict = {"quick": args.quick}
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        if args.env in ("all", "toy"):
            results["toy"] = _toy_section(args.seeds, args.quick)
        if args.env in ("all", "rdkit"):
            results["rdkit"] = _rdkit_section(args.seeds, args.quick)
        if args.env in ("all", "large"):
            results["large"] = _large_section(args.seeds, args.quick)
    finish_demo(args, table.getvalue(), results, time.time() - t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
