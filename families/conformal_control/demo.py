"""Conformal policy control demo: safe exploration in sequence design, and non-monotone risk control.

Run: `python -m families.conformal_control.demo [--quick] [--seeds N] [--trials N] [--out DIR]`
(or `latentworks family conformal_control`). Prints tables (mean +- std over problem seeds) and
writes results.json and cpc_tradeoff.png into --out.
"""

from __future__ import annotations

import contextlib
import io
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from latent.args import UsageError

from ..demo_cli import demo_config, finish_demo, run_demo
from .baselines import crc_bounds, crc_mapie, crc_textbook, ltt_mapie, mixture_risk_and_value
from .boundary import (
    fallback_excess,
    make_boundary_problem,
    quiet_model_logger,
    run_boundary,
    safe_risk_upper_bound,
)
from .data import EhrlichLikeProblem, configuration_losses, fdp_losses, kept_true, selective_claims
from .model import ConstrainedPolicy, calibrate_beta, estimate_psi, fixed_sequence_select

ALPHAS = (0.05, 0.1, 0.2)


def _ms(values: list[float], fmt: str = ".3f") -> str:
    arr = np.asarray(values, dtype=float)
    return f"{arr.mean():{fmt}} +- {(arr.std(ddof=1) if arr.size > 1 else 0.0):{fmt}}"


class PoolEvaluator:
    """Risk and objective of pi_beta for any beta, from a large pool drawn from (pi_0 + pi_t) / 2.

    Balance-heuristic weights min(r, beta) / ((1 + r) / 2) are bounded by 2, so the self-normalized
    estimates have small, stable error for every beta (unlike weights from either policy alone).
    """

    def __init__(self, problem: EhrlichLikeProblem, safe, opt, size: int, rng: np.random.Generator) -> None:  # noqa: ANN001
        x = np.concatenate([safe.sample(size, rng), opt.sample(size, rng)])
        self.log_r = opt.log_prob(x) - safe.log_prob(x)
        self.loss = problem.infeasible(x).astype(float)
        self.value = problem.objective(x)
        self.log_mix = np.logaddexp(0.0, self.log_r) - math.log(2.0)  # log((1 + r) / 2)

    def __call__(self, beta: float) -> tuple[float, float]:
        if beta == 0.0:  # pi_0 itself: weight 1 / ((1 + r) / 2)
            log_w = -self.log_mix
        else:
            log_w = np.minimum(self.log_r, math.log(beta) if math.isfinite(beta) else np.inf) - self.log_mix
        w = np.exp(log_w - log_w.max())
        return float(w @ self.loss / w.sum()), float(w @ self.value / w.sum())


def policy_part(seeds: list[int], trials: int, n_cal: int, n_prop: int, pool: int) -> dict:
    """Repeat calibration `trials` times per problem seed; record realised risk and objective."""
    methods = ("CPC (exact test weight)", "CPC (empirical test weight)", "weighted CRC, aggressive-first")
    per_seed: dict[str, dict[str, dict[str, list[float]]]] = {}
    sampler_check, assumption = [], []
    for seed in seeds:
        rng = np.random.default_rng(1000 + seed)
        prob = EhrlichLikeProblem(seed=seed)
        safe = prob.safe_policy(seed=seed)
        opt = prob.optimized_policy(safe, seed=seed)
        evaluate = PoolEvaluator(prob, safe, opt, pool, rng)
        sup_lr = opt.max_log_ratio_over(safe)
        r0, v0 = evaluate(0.0)
        rt, vt = evaluate(math.inf)
        acc: dict[str, dict[str, list[float]]] = {}
        for _ in range(trials):
            cal = safe.sample(n_cal, rng)
            lc = prob.infeasible(cal).astype(float)
            cal_lp0, cal_lpt = safe.log_prob(cal), opt.log_prob(cal)
            ps, po = safe.sample(n_prop, rng), opt.sample(n_prop, rng)
            lr_s = opt.log_prob(ps) - safe.log_prob(ps)
            lr_o = opt.log_prob(po) - safe.log_prob(po)
            for alpha in ALPHAS:
                setups = {
                    methods[0]: {"max_log_ratio": sup_lr, "direction": "safe_first"},
                    methods[1]: {"max_log_ratio": None, "direction": "safe_first"},
                    methods[2]: {"max_log_ratio": sup_lr, "direction": "aggressive_first"},
                }
                for name, kw in setups.items():
                    res = calibrate_beta(cal_lp0, cal_lpt, lc, lr_s, lr_o, alpha=alpha, **kw)
                    risk, value = evaluate(res.beta)
                    d = acc.setdefault(
                        f"{alpha}|{name}", {"risk": [], "value": [], "beta": [], "certified": []}
                    )
                    d["certified"].append(float(res.certified))
                    d["risk"].append(risk)
                    d["value"].append(value)
                    d["beta"].append(res.beta)
        # the rejection sampler realises the risk the pool predicts (one calibration, alpha = 0.1)
        beta = float(np.median(acc[f"0.1|{methods[0]}"]["beta"]))
        props = opt.sample(20000, rng)
        lr_o = opt.log_prob(props) - safe.log_prob(props)
        psi = estimate_psi(beta, np.zeros(1), lr_o)
        drawn = ConstrainedPolicy(safe, opt, beta, psi).sample(4000, rng)
        # the assumption behind the guarantee: pi_0 itself is certified (else abstain, or accept delta_n)
        ucb = safe_risk_upper_bound(lc)
        assumption.append(
            {
                "seed": seed,
                "safe_risk_ucb95": ucb,
                "delta_n_at_ucb": {str(a): fallback_excess(n_cal, min(ucb, 1.0), a) for a in ALPHAS},
            }
        )
        sampler_check.append(
            {
                "beta": beta,
                "sampled_risk": float(prob.infeasible(drawn).mean()),
                "pool_risk": evaluate(beta)[0],
            }
        )
        summary: dict[str, dict[str, list[float]]] = {}
        for key, d in acc.items():
            alpha = float(key.split("|")[0])
            risk = np.array(d["risk"])
            summary[key] = {
                "mean_risk": [float(risk.mean())],
                "p90_risk": [float(np.quantile(risk, 0.9))],
                "frac_above_alpha": [float((risk > alpha).mean())],
                "mean_value": [float(np.mean(d["value"]))],
                "median_beta": [float(np.median(d["beta"]))],
                "frac_certified": [float(np.mean(d["certified"]))],
            }
        for lam in (0.0, 0.25, 0.5, 0.75, 1.0):
            risk, value = mixture_risk_and_value(lam, r0, rt, v0, vt)
            label = {0.0: "optimized pi_t (unconstrained)", 1.0: "safe pi_0"}.get(
                lam, f"mixture {lam:g} pi_0"
            )
            summary[f"any|{label}"] = {"mean_risk": [risk], "mean_value": [value]}
        for key, d in summary.items():
            tgt = per_seed.setdefault(key, {})
            for k, v in d.items():
                tgt.setdefault(k, []).extend(v)
    return {"rows": per_seed, "sampler_check": sampler_check, "assumption": assumption}


def boundary_part(problems: int, n_list: tuple[int, ...], trials: int) -> list[dict]:
    """Safe risk = 0.9 alpha on enumerable chains: uncertified runs deploy pi_0 vs abstain."""
    rows = []
    for s in range(problems):
        prob = make_boundary_problem(s)
        for n in n_list:
            rows.append({"problem": s, **run_boundary(prob, n_cal=n, trials=trials, seed=1000 * s + n)})
    return rows


def nonmonotone_part(seeds: list[int], trials: int, n_cal: int, alpha: float = 0.1) -> dict:
    """Threshold selection for non-monotone losses: gCRC vs standard CRC vs mapie CRC/LTT."""
    rules = {
        "gCRC (CPC's fixed-sequence rule)": lambda L: fixed_sequence_select(crc_bounds(L), alpha),
        "CRC, textbook inf rule": lambda L: crc_textbook(L, alpha),
        "CRC (mapie)": lambda L: crc_mapie(L, alpha),
        "LTT (mapie, delta=0.1)": lambda L: ltt_mapie(L, alpha, delta=0.1),
    }
    tau = np.linspace(1.0, 0.0, 101)  # safe (keep nothing) -> aggressive (keep everything)
    out: dict[str, dict[str, dict[str, list[float]]]] = {"claims": {}, "configurations": {}}
    for seed in seeds:
        scores, is_false = selective_claims(20000, seed=10_000 + seed)
        true_risk = fdp_losses(scores, is_false, tau).mean(axis=0)
        power = kept_true(scores, is_false, tau).mean(axis=0)
        cfg_risk = np.concatenate([[0.0], np.full(200, 0.12)])  # 200 configurations, all err 12%
        acc: dict[str, dict[str, dict[str, list[float]]]] = {"claims": {}, "configurations": {}}
        for t in range(trials):
            sc, fl = selective_claims(n_cal, seed=seed * 100_000 + t)
            l_claims = fdp_losses(sc, fl, tau)
            l_cfg = configuration_losses(n_cal, 200, 0.12, seed=seed * 100_000 + t)
            for name, rule in rules.items():
                for part, losses, risk, pw in (
                    ("claims", l_claims, true_risk, power),
                    ("configurations", l_cfg, cfg_risk, None),
                ):
                    i = max(rule(losses), 0)  # -1 (nothing certified) falls back to the safe column
                    d = acc[part].setdefault(name, {"risk": [], "power": []})
                    d["risk"].append(float(risk[i]))
                    d["power"].append(float(pw[i]) if pw is not None else float(i > 0))
        for part, rows in acc.items():
            for name, d in rows.items():
                risk = np.array(d["risk"])
                tgt = out[part].setdefault(name, {})
                for k, v in {
                    "mean_risk": risk.mean(),
                    "frac_above_alpha": (risk > alpha).mean(),
                    "power": np.mean(d["power"]),
                }.items():
                    tgt.setdefault(k, []).append(float(v))
    out["true_fdp_curve"] = [float(v) for v in true_risk]
    out["alpha"] = alpha
    return out


def _plot(policy: dict, path: Path) -> None:
    from latent.plotting import figure, save_figure

    fig, ax = figure(figsize=(6, 4), extra="families")
    rows = policy["rows"]
    for key, d in rows.items():
        alpha, name = key.split("|")
        if alpha == "any":
            ax.scatter(np.mean(d["mean_risk"]), np.mean(d["mean_value"]), marker="s", color="gray")
            ax.annotate(name, (np.mean(d["mean_risk"]), np.mean(d["mean_value"])), fontsize=7)
        elif name.startswith("CPC (exact"):
            ax.scatter(np.mean(d["mean_risk"]), np.mean(d["mean_value"]), color="tab:blue")
            ax.annotate(f"CPC a={alpha}", (np.mean(d["mean_risk"]), np.mean(d["mean_value"])), fontsize=7)
    ax.set_xlabel("realised infeasibility rate")
    ax.set_ylabel("mean Ehrlich-style objective")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


@dataclass
class ConformalControlFlags:
    """The conformal_control demo's own flags (next to the shared --quick, --seeds, --out)."""

    trials: int | None = field(default=None, metadata={"help": "calibration trials per seed (default 500)"})


ConformalControlDemo = demo_config("conformal_control", ConformalControlFlags, seeds=3, quick_seeds=2)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (`latentworks family conformal_control`)."""
    return run_demo(ConformalControlDemo, __doc__, _demo, argv)


def _demo(args: Any) -> int:
    trials = args.trials if args.trials is not None else (20 if args.quick else 500)
    if trials < 1:
        raise UsageError(f"--trials must be >= 1, got {trials}")
    seeds = list(range(args.seeds))
    start, cpu_start = time.time(), time.process_time()
    with quiet_model_logger():  # uncertified calibrations are counted in the tables instead
        policy, nonmono, boundary = _run_parts(args.quick, seeds, trials)
    wall, cpu = time.time() - start, time.process_time() - cpu_start
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        _print_tables(policy, nonmono, boundary, args.seeds, trials)
        print(f"\nCPU time {cpu:.1f} s")
    payload = {"policy": policy, "nonmonotone": nonmono, "boundary": boundary, "cpu_s": cpu, "trials": trials}
    finish_demo(args, table.getvalue(), payload, wall)
    _plot(policy, Path(args.out) / "cpc_tradeoff.png")
    return 0


def _run_parts(quick: bool, seeds: list[int], trials: int) -> tuple[dict, dict, list[dict]]:
    if quick:
        policy = policy_part(seeds, trials, n_cal=200, n_prop=500, pool=5000)
        nonmono = nonmonotone_part(seeds, trials, n_cal=100)
        boundary = boundary_part(2, (100,), max(trials, 20))
    else:
        policy = policy_part(seeds, trials, n_cal=500, n_prop=2000, pool=50_000)
        nonmono = nonmonotone_part(seeds, trials, n_cal=100)
        boundary = boundary_part(4, (100, 400), 2000)
    return policy, nonmono, boundary


def _print_tables(policy: dict, nonmono: dict, boundary: list[dict], n_seeds: int, trials: int) -> None:

    print(f"\n== (a) Ehrlich-style sequence design, {n_seeds} problem seeds x {trials} calibration trials ==")
    print(
        "| alpha | method | mean realised risk | 90th pct risk | P(risk > alpha) | mean objective | median beta |"
    )
    print("|---|---|---|---|---|---|---|")
    for key, d in policy["rows"].items():
        alpha, name = key.split("|")
        cells = [
            _ms(d[c]) if c in d else "-" for c in ("mean_risk", "p90_risk", "frac_above_alpha", "mean_value")
        ]
        beta = _ms(d["median_beta"], ".3g") if "median_beta" in d else "-"
        print(f"| {alpha} | {name} | " + " | ".join(cells) + f" | {beta} |")
    for chk in policy["sampler_check"]:
        print(
            f"rejection sampler at beta={chk['beta']:.3g}: sampled infeasibility {chk['sampled_risk']:.3f} "
            f"vs pool estimate {chk['pool_risk']:.3f}"
        )
    for chk in policy["assumption"]:
        deltas = ", ".join(f"alpha={a}: {d:.4f}" for a, d in chk["delta_n_at_ucb"].items())
        print(
            f"assumption check, seed {chk['seed']}: R(pi_0) <= {chk['safe_risk_ucb95']:.4f} (95% upper bound); "
            f"fallback excess delta_n at that bound: {deltas}"
        )
    a = nonmono["alpha"]
    for part, title in (
        ("claims", "selective claims, FDP of kept claims (non-monotone)"),
        ("configurations", "200 unrelated configurations, all with 12% error"),
    ):
        print(f"\n== (b) {title}, alpha={a}, n_cal=100, {trials} trials x {n_seeds} seeds ==")
        power = "true claims kept" if part == "claims" else "P(some configuration deployed)"
        print(f"| rule | mean realised risk | P(risk > alpha) | {power} |")
        print("|---|---|---|---|")
        for name, d in nonmono[part].items():
            print(f"| {name} | {_ms(d['mean_risk'])} | {_ms(d['frac_above_alpha'])} | {_ms(d['power'])} |")
    n_b = len({r["problem"] for r in boundary})
    print(
        f"\n== (c) boundary: R(pi_0) = 0.9 alpha, exact risk by enumeration, {n_b} problems x "
        f"{boundary[0]['trials']} calibrations =="
    )
    print(
        "| problem | n_cal | R(pi_0) | alpha | R(pi_t) | P(pi_0 certified) | uncertified -> deploy pi_0: "
        "mean risk +- SE | alpha + delta_n | uncertified -> abstain: mean risk +- SE |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in boundary:
        print(
            f"| {r['problem']} | {r['n_cal']} | {r['safe_risk']:.4f} | {r['alpha']:.4f} | "
            f"{r['optimized_risk']:.3f} | {r['certified']:.2f} | {r['fallback_mean']:.4f} +- "
            f"{r['fallback_se']:.4f} | {r['alpha_plus_delta']:.4f} | {r['abstain_mean']:.4f} +- "
            f"{r['abstain_se']:.4f} |"
        )


if __name__ == "__main__":
    raise SystemExit(main())
