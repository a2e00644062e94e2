"""Demo: local covariate selection vs EHS, FCI + PAG adjustment, adjust-all/none and DoWhy.

Three parts, each over several seeds (mean +- std):
  1. oracle mode: random DAGs with latents, d-separation as the CI test, truth by the adjustment
     criterion; soundness, completeness and number of CI tests;
  2. finite samples: linear and nonlinear SEMs with a mediator, a post-treatment child, a collider
     and a latent confounder; absolute ACE error;
  3. real data: NSW treated + CPS controls (causaldata), experimental benchmark ATE = 1794.

Run: python -m families.covsel.demo [--quick] [--seeds 3] [--out runs/covsel]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from .baselines import dowhy_true_graph_ace, ehs_select, fci_select
from .citests import DSeparationOracle, FisherZTest
from .config import CovselConfig
from .data import (
    CausalInstance,
    has_effect,
    is_valid_adjustment,
    random_instance,
    sample_sem,
    trap_instance,
    true_ace,
    valid_set_exists,
)
from .model import ADJUST, ZERO, CovselResult, LocalCovariateSelector, estimate_ace

NSW_EXPERIMENTAL_ATE = 1794.34  # difference in means of the NSW experiment (Dehejia-Wahba sample)


def robust_config(alpha: float) -> CovselConfig:
    """Finite-sample settings: certify only through marginal v-structures at X, never certify Y."""
    return CovselConfig(alpha=alpha, certify_sep_size=0, certify_outcome=False, use_ancestor_rule=False)


def _correct(res: CovselResult, inst: CausalInstance) -> bool | None:
    """True/False for an answer, None for 'not identifiable' (no claim made)."""
    if res.verdict == ADJUST:
        return is_valid_adjustment(inst.graph, inst.x, inst.y, res.adjustment_set)
    if res.verdict == ZERO:
        return not has_effect(inst)
    return None


def oracle_part(seed: int, n_graphs: int, n_nodes: int, max_k: int, with_global: bool) -> dict:
    """Soundness / completeness / #tests on random DAGs with latents, d-separation oracle."""
    rng = np.random.default_rng(seed)
    methods = ["LCS (local)", "EHS (pretreatment assumed)", "FCI + PAG adjustment"]
    if with_global:
        methods.insert(1, "LCS (global search)")
    rec = {m: {"answers": 0, "wrong": 0, "found": 0, "zero_ok": 0, "tests": [], "sec": []} for m in methods}
    n_exists = n_zero = 0
    for _ in range(n_graphs):
        inst = random_instance(rng, n_nodes=n_nodes, expected_degree=2.5, latent_frac=0.2)
        exists_eff = has_effect(inst) and valid_set_exists(inst)
        n_exists += exists_eff
        n_zero += not has_effect(inst)
        for m in methods:
            t0 = time.perf_counter()
            if m.startswith("FCI"):
                res = fci_select(None, inst)
            else:
                ci = DSeparationOracle(inst.graph, inst.latent)
                if m.startswith("EHS"):
                    res = ehs_select(ci, inst.x, inst.y, inst.covariates, max_k)
                else:
                    cfg = CovselConfig(max_cond_size=max_k, local=m == "LCS (local)")
                    res = LocalCovariateSelector(cfg).select(ci, inst.x, inst.y, inst.covariates)
            r = rec[m]
            r["sec"].append(time.perf_counter() - t0)
            r["tests"].append(res.n_tests)
            ok = _correct(res, inst)
            if ok is not None:
                r["answers"] += 1
                r["wrong"] += not ok
            r["found"] += bool(ok and res.verdict == ADJUST and exists_eff)
            r["zero_ok"] += bool(ok and res.verdict == ZERO)
    out = {"n_graphs": n_graphs, "n_effect_with_valid_set": n_exists, "n_zero_effect": n_zero}
    for m, r in rec.items():
        out[m] = {
            "soundness": 1.0 - r["wrong"] / max(r["answers"], 1),
            "set_found_rate": r["found"] / max(n_exists, 1),
            "zero_found_rate": r["zero_ok"] / max(n_zero, 1),
            "ci_tests": float(np.mean(r["tests"])),
            "sec": float(np.mean(r["sec"])),
        }
    return out


def finite_part(seed: int, n_inst: int, n: int, nonlinear: bool, alpha: float) -> dict:
    """Absolute ACE error on trap SEMs; methods that decline to answer are counted in `answer_rate`."""
    rng = np.random.default_rng(seed)
    errs: dict[str, list[float]] = {}
    answered: dict[str, int] = {}
    deg = 2 if nonlinear else 1
    for _ in range(n_inst):
        inst = trap_instance(rng, n_noise=4)
        data = sample_sem(inst, n, rng, nonlinear=nonlinear)
        truth = true_ace(inst)
        ests: dict[str, float | None] = {}
        obs = inst.observed
        for name, cfg in [
            ("LCS (local)", robust_config(alpha)),
            ("EHS (pretreatment assumed)", CovselConfig(alpha=alpha, assume_pretreatment=True)),
        ]:
            res = LocalCovariateSelector(cfg).select(
                FisherZTest(data, alpha), inst.x, inst.y, inst.covariates
            )
            ests[name] = _estimate(res, data, inst.x, inst.y, deg)
        # FCI sees only observed columns; map its set back to instance indices.
        res = fci_select(data[:, obs], inst, alpha)
        pos_set = None if res.adjustment_set is None else {obs[i] for i in res.adjustment_set}
        ests["FCI + PAG adjustment"] = _estimate(
            CovselResult(res.verdict, pos_set and frozenset(pos_set)), data, inst.x, inst.y, deg
        )
        ests["adjust-all"] = estimate_ace(data, inst.x, inst.y, inst.covariates, deg)
        ests["adjust-none"] = estimate_ace(data, inst.x, inst.y, [], deg)
        ests["DoWhy (true graph)"] = dowhy_true_graph_ace(data, inst)
        for k, v in ests.items():
            errs.setdefault(k, [])
            answered[k] = answered.get(k, 0) + (v is not None)
            if v is not None:
                errs[k].append(abs(v - truth))
    return {
        k: {"abs_err": float(np.mean(v)) if v else float("nan"), "answer_rate": answered[k] / n_inst}
        for k, v in errs.items()
    }


def _estimate(res: CovselResult, data: np.ndarray, x: int, y: int, deg: int) -> float | None:
    if res.verdict == ADJUST:
        return estimate_ace(data, x, y, res.adjustment_set, deg)
    return 0.0 if res.verdict == ZERO else None


def nsw_part(alpha: float) -> dict:
    """LaLonde NSW treated vs CPS controls; returns each method's ATE estimate and verdict."""
    from causaldata import cps_mixtape, nsw_mixtape

    nsw = nsw_mixtape.load_pandas().data
    cps = cps_mixtape.load_pandas().data
    cols = ["treat", "re78", "age", "educ", "black", "hisp", "marr", "nodegree", "re74", "re75"]
    df = np.vstack([nsw[nsw.treat == 1][cols].to_numpy(float), cps[cols].to_numpy(float)])
    x, y, cov = 0, 1, list(range(2, len(cols)))
    out = {}
    for name, cfg in [
        ("LCS (local)", robust_config(alpha)),
        ("EHS (pretreatment assumed)", CovselConfig(alpha=alpha, assume_pretreatment=True)),
    ]:
        res = LocalCovariateSelector(cfg).select(FisherZTest(df, alpha), x, y, cov)
        est = _estimate(res, df, x, y, 1)
        z = sorted(cols[i] for i in res.adjustment_set) if res.adjustment_set is not None else None
        out[name] = {"verdict": res.verdict, "set": z, "ate": est, "ci_tests": res.n_tests}
    out["adjust-all"] = {"verdict": ADJUST, "set": cols[2:], "ate": estimate_ace(df, x, y, cov)}
    out["adjust-none"] = {"verdict": ADJUST, "set": [], "ate": estimate_ace(df, x, y, [])}
    return out


def _ms(vals: list[float], fmt: str = "{:.3f}") -> str:
    vals = [v for v in vals if v == v]
    if not vals:
        return "n/a"
    return (fmt + " +- " + fmt).format(float(np.mean(vals)), float(np.std(vals)))


def main(argv: list[str] | None = None) -> int:
    """Run the three parts and print / save the tables."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="seconds-long smoke run")
    p.add_argument("--seeds", type=int, default=3, help="number of seeds (mean +- std over them)")
    p.add_argument("--out", type=Path, default=Path("runs/covsel"), help="output directory")
    p.add_argument("--alpha", type=float, default=0.05, help="Fisher-z level in the finite-sample parts")
    p.add_argument("--skip-nsw", action="store_true", help="skip the causaldata NSW part")
    args = p.parse_args(argv)
    if args.seeds < 1:
        raise ValueError(f"`--seeds` must be >= 1, got {args.seeds}.")
    q = args.quick
    n_graphs, n_nodes, n_inst, n = (3, 8, 1, 600) if q else (20, 12, 5, 3000)
    t0 = time.time()
    seeds = list(range(args.seeds))
    oracle = [oracle_part(s, n_graphs, n_nodes, max_k=3, with_global=True) for s in seeds]
    methods = [k for k in oracle[0] if isinstance(oracle[0][k], dict)]
    print(
        f"\n== Oracle mode: {n_graphs} random DAGs/seed, {n_nodes} nodes, 20% latent, {len(seeds)} seeds =="
    )
    print(
        f"effect cases with a valid set / seed: {_ms([o['n_effect_with_valid_set'] for o in oracle], '{:.1f}')}"
    )
    print(
        f"{'method':30s} {'soundness':>14s} {'set found':>14s} {'zero found':>14s} {'CI tests':>16s} {'sec':>12s}"
    )
    for m in methods:
        row = [_ms([o[m][k] for o in oracle]) for k in ("soundness", "set_found_rate", "zero_found_rate")]
        row += [_ms([o[m]["ci_tests"] for o in oracle], "{:.0f}"), _ms([o[m]["sec"] for o in oracle])]
        print(f"{m:30s} {row[0]:>14s} {row[1]:>14s} {row[2]:>14s} {row[3]:>16s} {row[4]:>12s}")
    finite = {}
    for nonlinear in (False, True):
        tag = "nonlinear" if nonlinear else "linear"
        runs = [finite_part(s, n_inst, n, nonlinear, args.alpha) for s in seeds]
        finite[tag] = runs
        print(
            f"\n== Finite samples ({tag} SEM, n={n}, {n_inst} trap instances/seed, Fisher-z alpha={args.alpha}) =="
        )
        print(f"{'method':30s} {'|ACE error|':>16s} {'answer rate':>16s}")
        for m in runs[0]:
            print(
                f"{m:30s} {_ms([r[m]['abs_err'] for r in runs]):>16s} {_ms([r[m]['answer_rate'] for r in runs]):>16s}"
            )
    nsw = None
    if not args.skip_nsw:
        nsw = nsw_part(args.alpha)
        print(f"\n== NSW treated + CPS controls (causaldata); experimental ATE = {NSW_EXPERIMENTAL_ATE} ==")
        for m, r in nsw.items():
            ate = "n/a" if r["ate"] is None else f"{r['ate']:.0f}"
            print(f"{m:30s} verdict={r['verdict']:17s} ATE={ate:>7s} set={r['set']}")
    wall = time.time() - t0
    print(f"\nwall time: {wall:.1f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"oracle": oracle, "finite": finite, "nsw": nsw, "wall_s": wall, "quick": q, "seeds": seeds}
    (args.out / "results.json").write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
