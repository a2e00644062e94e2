"""Demo: MORetro* vs Retro* per weight and weighted-sum restarts on syntheseus toy networks.

Each instance: a random C/O/S chain target, building blocks = chains of <= 2 atoms, hashed cost
vectors in [0, 1]^3, depth limit D; the true Pareto front comes from exhaustive enumeration.
Metrics: exact front recovery, hypervolume ratio HV(found) / HV(true) at several expansion budgets,
expansions MORetro* needs to certify exactness.

Run: python -m families.moretro.demo [--quick] [--seeds 3] [--out runs/moretro]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from .baselines import retro_star_per_weight, weighted_sum_restarts
from .config import MORetroConfig
from .data import exact_front, hypervolume, linear_molecules_expander, random_building_blocks, random_target
from .model import MORetroStar

METHODS = ["MORetro*", "Retro* per weight (5)", "weighted-sum restarts"]


def _simplex_weights(m: int) -> list[np.ndarray]:
    """Corners plus the centroid and two mid-points: 5 weights for m = 3."""
    eye = list(np.eye(m))
    return (eye + [np.full(m, 1.0 / m)] + [(eye[0] + eye[1]) / 2, (eye[1] + eye[2]) / 2])[:5]


def run_seed(seed: int, n_targets: int, lengths: tuple[int, int], depth: int, budgets: list[int]) -> dict:
    """One seed: several targets, every method at every budget."""
    rng = np.random.default_rng(seed)
    m = 3
    expand = linear_molecules_expander(m, salt=str(seed))
    bb = random_building_blocks(rng, max_len=2)
    rec = {meth: {b: {"exact": [], "hv": []} for b in budgets} for meth in METHODS}
    certify, sizes = [], []
    for _ in range(n_targets):
        target = random_target(rng, int(rng.integers(lengths[0], lengths[1] + 1)))
        true = exact_front(target, expand, bb, depth, m)
        if not true:
            continue
        sizes.append(len(true))
        ref = np.asarray(true).max(axis=0) * 1.1 + 1e-9  # reference point just beyond the true nadir
        hv_true = hypervolume(true, ref)
        full = MORetroStar(MORetroConfig(max_depth=depth, expansion_budget=10_000, seed=seed)).search(
            target, expand, bb
        )
        certify.append(full.n_expansions if full.exhausted else np.nan)
        for b in budgets:
            prefix = [f for n, f in full.trace if n <= b]
            fronts = {
                "MORetro*": prefix[-1] if prefix else [],
                "Retro* per weight (5)": retro_star_per_weight(
                    target, expand, bb, _simplex_weights(m), depth, b
                )[0],
                "weighted-sum restarts": weighted_sum_restarts(target, expand, bb, m, depth, b, rng)[0],
            }
            for meth, fr in fronts.items():
                rec[meth][b]["exact"].append(sorted(fr) == sorted(true))
                rec[meth][b]["hv"].append(hypervolume(fr, ref) / hv_true if hv_true > 0 else 1.0)
    out = {
        meth: {b: {k: float(np.mean(v)) for k, v in d.items()} for b, d in per.items()}
        for meth, per in rec.items()
    }
    out["certify_expansions"] = float(np.nanmean(certify)) if certify else float("nan")
    out["front_size"] = float(np.mean(sizes)) if sizes else float("nan")
    out["n_targets"] = len(sizes)
    return out


def _ms(vals: list[float]) -> str:
    return f"{np.mean(vals):.3f} +- {np.std(vals):.3f}"


def main(argv: list[str] | None = None) -> int:
    """Run all seeds, print the table, write results.json."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="seconds-long smoke run")
    p.add_argument("--seeds", type=int, default=3, help="number of seeds (mean +- std over seeds)")
    p.add_argument("--out", type=Path, default=Path("runs/moretro"), help="output directory")
    args = p.parse_args(argv)
    if args.seeds < 1:
        raise ValueError(f"`--seeds` must be >= 1, got {args.seeds}.")
    n_targets, lengths, depth, budgets = (
        (2, (4, 4), 2, [10, 50]) if args.quick else (6, (4, 6), 3, [10, 25, 50, 100])
    )
    t0 = time.time()
    runs = [run_seed(s, n_targets, lengths, depth, budgets) for s in range(args.seeds)]
    print(
        f"\n== MORetro* on syntheseus LinearMolecules, depth <= {depth}, {n_targets} targets/seed, {args.seeds} seeds =="
    )
    print(
        f"true front size: {_ms([r['front_size'] for r in runs])}; "
        f"expansions to certify exactness (MORetro*): {_ms([r['certify_expansions'] for r in runs])}"
    )
    header = f"{'method':24s} {'budget':>6s} {'exact front':>16s} {'HV / HV_true':>16s}"
    print(header)
    for meth in METHODS:
        for b in budgets:
            ex = _ms([r[meth][b]["exact"] for r in runs])
            hv = _ms([r[meth][b]["hv"] for r in runs])
            print(f"{meth:24s} {b:>6d} {ex:>16s} {hv:>16s}")
    wall = time.time() - t0
    print(f"\nwall time: {wall:.1f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(
        json.dumps({"runs": runs, "wall_s": wall, "quick": args.quick}, indent=2)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
