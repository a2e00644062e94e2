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

import contextlib
import io
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eval.report import wilson
from latent.args import UsageError

from ..demo_cli import demo_config, finish_demo, run_demo
from .baselines import dowhy_true_graph_ace, ehs_select, fci_select, run_fci
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
    with_exogenous_parents,
)
from .model import ADJUST, ZERO, CovselResult, LocalCovariateSelector, estimate_ace
from .pag import PAG, pag_verdict

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


def oracle_part(
    seed: int, n_graphs: int, n_nodes: int, max_k: int, with_global: bool, exogenous_parents: int = 0
) -> dict:
    """Soundness / completeness / #tests on random DAGs with latents, d-separation oracle.

    Two completeness targets: the true DAG (a valid set exists) and the true PAG (a set valid in every
    DAG with the same independences exists), the most any CI-only method can find.
    """
    rng = np.random.default_rng(seed)
    methods = [
        "LCS (local)", "EHS (pretreatment assumed)", "FCI + PAG adjustment", "FCI + exact PAG criterion"
    ]  # fmt: skip
    if with_global:
        methods.insert(1, "LCS (global search)")
    keys = ("answers", "wrong", "found", "found_pag", "zero_ok", "zero_pag")
    rec = {m: {**dict.fromkeys(keys, 0), "tests": [], "sec": []} for m in methods}
    n_exists = n_zero = n_pag_adjust = n_pag_zero = 0
    for _ in range(n_graphs):
        inst = random_instance(rng, n_nodes=n_nodes, expected_degree=2.5, latent_frac=0.2)
        if exogenous_parents:
            inst = with_exogenous_parents(inst, rng, exogenous_parents)
        exists_eff = has_effect(inst) and valid_set_exists(inst)
        pos = {v: i for i, v in enumerate(inst.observed)}
        pag_says, _ = pag_verdict(PAG(run_fci(None, inst)[0]), pos[inst.x], pos[inst.y])
        n_exists += exists_eff
        n_zero += not has_effect(inst)
        n_pag_adjust += pag_says == ADJUST
        n_pag_zero += pag_says == ZERO
        for m in methods:
            t0 = time.perf_counter()
            if m.startswith("FCI"):
                res = fci_select(None, inst, exact="exact" in m)
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
            r["found_pag"] += bool(ok and res.verdict == ADJUST and pag_says == ADJUST)
            r["zero_ok"] += bool(ok and res.verdict == ZERO)
            r["zero_pag"] += bool(ok and res.verdict == ZERO and pag_says == ZERO)
    out = {
        "n_graphs": n_graphs,
        "n_effect_with_valid_set": n_exists,
        "n_zero_effect": n_zero,
        "n_pag_adjust": n_pag_adjust,
        "n_pag_zero": n_pag_zero,
        "exogenous_parents": exogenous_parents,
    }
    for m, r in rec.items():
        out[m] = {
            "soundness": 1.0 - r["wrong"] / max(r["answers"], 1),
            "set_found_rate": r["found"] / max(n_exists, 1),
            "pag_completeness": r["found_pag"] / n_pag_adjust if n_pag_adjust else float("nan"),
            "zero_found_rate": r["zero_ok"] / max(n_zero, 1),
            "pag_zero_completeness": r["zero_pag"] / n_pag_zero if n_pag_zero else float("nan"),
            "found": r["found_pag"],
            "found_zero": r["zero_pag"],
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
        for name, exact in (("FCI + PAG adjustment", False), ("FCI + exact PAG criterion", True)):
            res = fci_select(data[:, obs], inst, alpha, exact=exact)  # sets come back as instance indices
            ests[name] = _estimate(res, data, inst.x, inst.y, deg)
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


def _wilson(k: int, n: int, z: float = 1.96) -> str:
    """A pooled rate k / n with its 95% Wilson interval (`eval.report.wilson`), as the tables print it."""
    if n == 0:
        return "n/a"
    lo, hi = wilson(k, n, z)
    return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}]"


def _print_oracle(tag: str, runs: list[dict], n_graphs: int, n_nodes: int) -> None:
    n_pag = sum(o["n_pag_adjust"] for o in runs)
    print(
        f"\n== Oracle mode, {tag}: {n_graphs} graphs/seed, {n_nodes} nodes, 20% latent, {len(runs)} seeds =="
    )
    print(
        "effect cases with a valid set (true DAG) / seed: "
        f"{_ms([o['n_effect_with_valid_set'] for o in runs], '{:.1f}')};"
        f" identifiable from the PAG (pooled): {n_pag}; zero effect (true DAG) / seed: "
        f"{_ms([o['n_zero_effect'] for o in runs], '{:.1f}')}"
    )
    n_pz = sum(o["n_pag_zero"] for o in runs)
    print(
        "| method | soundness | set found (true DAG) | set found / PAG-identifiable (pooled, Wilson 95%) "
        f"| zero found (true DAG) | zero found / PAG-zero (pooled, n={n_pz}) | CI tests | sec |"
    )
    print("|---|---|---|---|---|---|---|---|")
    methods = [k for k in runs[0] if isinstance(runs[0][k], dict)]
    for m in methods:
        found = sum(o[m]["found"] for o in runs)
        cells = [_ms([o[m][k] for o in runs]) for k in ("soundness", "set_found_rate")]
        cells.append(_wilson(found, n_pag))
        cells.append(_ms([o[m]["zero_found_rate"] for o in runs]))
        cells.append(_wilson(sum(o[m]["found_zero"] for o in runs), n_pz))
        cells += [_ms([o[m]["ci_tests"] for o in runs], "{:.0f}"), _ms([o[m]["sec"] for o in runs])]
        print(f"| {m} | " + " | ".join(cells) + " |")


def _ms(vals: list[float], fmt: str = "{:.3f}") -> str:
    vals = [v for v in vals if v == v]
    if not vals:
        return "n/a"
    return (fmt + " +- " + fmt).format(float(np.mean(vals)), float(np.std(vals)))


@dataclass
class CovselFlags:
    """The covsel demo's own flags (next to the shared --quick, --seeds, --out)."""

    alpha: float = field(default=0.05, metadata={"help": "Fisher-z level in the finite-sample parts"})
    skip_nsw: bool = field(default=False, metadata={"switch": True, "help": "skip the causaldata NSW part"})


CovselDemo = demo_config("covsel", CovselFlags, seeds=3, quick_seeds=1)


def main(argv: list[str] | None = None) -> int:
    """Run the three parts and print / save the tables."""
    return run_demo(CovselDemo, __doc__, _demo, argv)


def _demo(args: Any) -> int:
    if not 0.0 < args.alpha < 1.0:
        raise UsageError(f"--alpha must lie in (0, 1), got {args.alpha}")
    table = io.StringIO()
    with contextlib.redirect_stdout(table):  # the tables are printed once, by finish_demo
        payload, wall = _run_all(args)
    finish_demo(args, table.getvalue(), payload, wall)
    return 0


def _run_all(args: Any) -> tuple[dict, float]:
    q = args.quick
    n_graphs, n_nodes, n_inst, n = (3, 8, 1, 600) if q else (20, 12, 5, 3000)
    t0 = time.time()
    seeds = list(range(args.seeds))
    oracle = {}
    for tag, k_exo in (("random DAGs", 0), ("random DAGs + 2 exogenous parents of X", 2)):
        runs = [
            oracle_part(s, n_graphs, n_nodes, max_k=3, with_global=True, exogenous_parents=k_exo)
            for s in seeds
        ]
        oracle[tag] = runs
        _print_oracle(tag, runs, n_graphs, n_nodes)
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
    return {"oracle": oracle, "finite": finite, "nsw": nsw, "quick": q}, wall


if __name__ == "__main__":
    raise SystemExit(main())
