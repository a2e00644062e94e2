"""MIRA demo: Gaussian candidate cases and Bayesian model comparison with exact evidence.

Run: `python -m families.mira.demo [--quick] [--seeds N] [--out DIR]` (or `latentworks family mira`).
Prints tables (mean +- std over seeds) and writes results.json and mira_scores.png into --out.
"""

from __future__ import annotations

import contextlib
import io
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy import stats

from latent.args import UsageError

from ..demo_cli import demo_config, finish_demo, run_demo
from .baselines import joint_c2st, official_mira, sbc_ks, tarp_atc
from .config import MiraConfig
from .data import RegressionModel, gaussian_problem, regression_problem
from .model import compare_models, mira, mira_reference


def _ms(values: list[float], fmt: str = ".4f") -> str:
    arr = np.asarray(values, dtype=float)
    return f"{arr.mean():{fmt}} +- {arr.std(ddof=1) if arr.size > 1 else 0.0:{fmt}}"


def gaussian_part(
    seeds: list[int], cfg: MiraConfig, T: int, S: int, with_c2st: bool, with_sbi: bool = True
) -> dict:
    """Five candidates (correct, too wide, too narrow, biased, prior) against MIRA and its peers."""
    rows: dict[str, dict[str, list[float]]] = {}
    # "mira raw score" ranks higher-is-better; kept as a row to show why the ranking must be two-sided
    rank_hits = {"mira raw score": 0, "mira": 0, "mira+sharpness": 0}
    for seed in seeds:
        prob = gaussian_problem(num_truths=T, num_samples=S, dim=2, seed=seed)
        truth = torch.as_tensor(prob.truth, dtype=torch.float32)
        samples = torch.as_tensor(prob.samples, dtype=torch.float32)
        gen = torch.Generator().manual_seed(seed)
        comp = compare_models(truth, samples, prob.names, cfg.num_runs, cfg.normalize, cfg.z_crit, gen)
        off_score, _ = official_mira(
            truth, samples, num_runs=cfg.num_runs, normalize=cfg.normalize, seed=seed
        )
        rank_hits["mira raw score"] += prob.names[int(comp.result.score.argmax())] == "correct"
        rank_hits["mira"] += comp.ranking_mira[0] == "correct"
        rank_hits["mira+sharpness"] += comp.ranking_with_sharpness[0] == "correct"
        for i, name in enumerate(prob.names):
            r = rows.setdefault(name, {})
            ks, _ = sbc_ks(prob.truth, prob.samples[i]) if with_sbi else (float("nan"), float("nan"))
            atc, _ = (
                tarp_atc(prob.truth, prob.samples[i], seed=seed) if with_sbi else (float("nan"), float("nan"))
            )
            vals = {
                "mira": float(comp.result.score[i]),
                "z": float(comp.result.z[i]),
                "official": float(off_score[i]),
                "abs_diff_official": abs(float(comp.result.score[i]) - float(off_score[i])),
                "energy": float(comp.energy[i]),
                "sbc_ks": ks,
                "tarp_atc": atc,
            }
            if with_c2st and with_sbi:
                vals["joint_c2st"] = joint_c2st(prob.x, prob.truth, prob.samples[i], seed=seed)
            for k, v in vals.items():
                r.setdefault(k, []).append(v)
    ref, _ = mira_reference(S)
    return {"rows": rows, "reference": ref, "top1_correct": rank_hits, "num_seeds": len(seeds)}


def regression_part(seeds: list[int], cfg: MiraConfig, T: int, S: int, with_sbi: bool = True) -> dict:
    """Polynomial Bayesian linear regressions: MIRA rankings vs exact log-evidence rankings."""
    true_model = RegressionModel(3, 1.0)
    models = [RegressionModel(d, 1.0) for d in range(1, 6)] + [RegressionModel(3, 10.0)]
    names = [m.name for m in models]
    per_model: dict[str, dict[str, list[float]]] = {n: {} for n in names}
    agree: dict[str, dict[str, list[float]]] = {}
    for seed in seeds:
        prob = regression_problem(models, true_model, num_datasets=T, num_samples=S, seed=seed)
        gen = torch.Generator().manual_seed(seed)
        truth = torch.as_tensor(prob.truth, dtype=torch.float32)
        samples = torch.as_tensor(prob.samples, dtype=torch.float32)
        comp = compare_models(truth, samples, names, cfg.num_runs, cfg.normalize, cfg.z_crit, gen)
        logev = prob.log_evidence.mean(axis=1)  # (M,) mean log evidence per dataset
        nan = np.full(len(names), np.nan)
        atc = np.array([tarp_atc(prob.truth, s, seed=seed)[0] for s in prob.samples]) if with_sbi else nan
        ks = np.array([sbc_ks(prob.truth, s)[0] for s in prob.samples]) if with_sbi else nan
        absz = comp.result.z.abs().numpy()
        # "badness" per method, lower = better model; evidence is the ground-truth ranking
        badness = {
            "MIRA raw score (higher = better)": -comp.result.score.numpy(),
            "MIRA abs(z)": absz,
            "MIRA + sharpness": np.array([comp.ranking_with_sharpness.index(n) for n in names], dtype=float),
            "energy score": comp.energy.numpy(),
            "TARP abs(ATC)": np.abs(atc),
            "SBC KS": ks,
        }
        best_ev = int(np.argmax(logev))
        for method, bad in badness.items():
            rho = stats.spearmanr(-logev, bad).statistic
            a = agree.setdefault(method, {"spearman": [], "top1": []})
            a["spearman"].append(float(rho))
            a["top1"].append(float(int(np.argmin(bad)) == best_ev))
        for i, n in enumerate(names):
            for k, v in {
                "mira": float(comp.result.score[i]),
                "z": float(comp.result.z[i]),
                "energy": float(comp.energy[i]),
                "log_evidence": float(logev[i]),
                "tarp_atc": float(atc[i]),
                "sbc_ks": float(ks[i]),
            }.items():
                per_model[n].setdefault(k, []).append(v)
    return {"models": per_model, "agreement": agree, "true_model": true_model.name}


def dimension_part(seeds: list[int], cfg: MiraConfig, dims: list[int], T: int, S: int) -> dict:
    """Sensitivity against the parameter dimension q: correct vs prior vs too-narrow z-scores."""
    out: dict[str, dict[str, list[float]]] = {}
    for q in dims:
        for seed in seeds:
            prob = gaussian_problem(num_truths=T, num_samples=S, dim=q, seed=seed)
            gen = torch.Generator().manual_seed(seed)
            keep = [prob.names.index(n) for n in ("correct", "too_narrow", "prior_only")]
            samples = torch.as_tensor(prob.samples[keep], dtype=torch.float32)
            res = mira(
                torch.as_tensor(prob.truth, dtype=torch.float32),
                samples,
                cfg.num_runs,
                cfg.normalize,
                generator=gen,
            )
            for j, n in enumerate(("correct", "too_narrow", "prior_only")):
                out.setdefault(f"q={q}", {}).setdefault(n, []).append(float(res.z[j]))
    return out


def _plot(gauss: dict, path: Path) -> None:
    from latent.plotting import figure, save_figure

    names = list(gauss["rows"])
    means = [np.mean(gauss["rows"][n]["mira"]) for n in names]
    stds = [np.std(gauss["rows"][n]["mira"]) for n in names]
    fig, ax = figure(figsize=(6, 3.5), extra="families")
    ax.bar(names, means, yerr=stds, color="tab:blue")
    ax.axhline(gauss["reference"], color="k", ls="--", label="reference (correct candidate)")
    ax.set_ylim(0.5, 0.75)
    ax.set_ylabel("MIRA score")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


@dataclass
class MiraFlags:
    """The mira demo's own flags (next to the shared --quick, --seeds, --out)."""

    num_runs: int | None = field(default=None, metadata={"help": "Monte Carlo runs (default 30, quick 10)"})
    no_sbi: bool = field(
        default=False, metadata={"switch": True, "help": "skip the sbi peers (SBC, TARP, C2ST)"}
    )


MiraDemo = demo_config("mira", MiraFlags, seeds=3, quick_seeds=2)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (`latentworks family mira`)."""
    return run_demo(MiraDemo, __doc__, _demo, argv)


def _demo(args: Any) -> int:
    if args.num_runs is not None and args.num_runs < 1:
        raise UsageError(f"--num-runs must be >= 1, got {args.num_runs}")
    n_seeds = args.seeds
    cfg = MiraConfig(num_runs=args.num_runs or (10 if args.quick else 30), normalize=True)
    seeds = list(range(n_seeds))
    start, cpu_start = time.time(), time.process_time()
    if args.quick:
        gauss = gaussian_part(seeds, cfg, T=200, S=60, with_c2st=False, with_sbi=not args.no_sbi)
        reg = regression_part(seeds, cfg, T=150, S=60, with_sbi=not args.no_sbi)
        dims = dimension_part(seeds[:1], cfg, [2, 5], T=150, S=60)
    else:
        gauss = gaussian_part(seeds, cfg, T=1000, S=300, with_c2st=True, with_sbi=not args.no_sbi)
        reg = regression_part(list(range(max(n_seeds, 10))), cfg, T=400, S=200, with_sbi=not args.no_sbi)
        dims = dimension_part(seeds, cfg, [2, 5, 10, 20], T=300, S=100)
    wall, cpu = time.time() - start, time.process_time() - cpu_start
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        _print_tables(gauss, reg, dims, seeds, args.quick, wall, cpu)
    payload = {
        "gaussian": gauss,
        "regression": reg,
        "dimension": dims,
        "cpu_s": cpu,
        "num_runs": cfg.num_runs,
    }
    finish_demo(args, table.getvalue(), payload, wall)
    _plot(gauss, Path(args.out) / "mira_scores.png")
    return 0


def _print_tables(
    gauss: dict, reg: dict, dims: dict, seeds: list[int], quick: bool, wall: float, cpu: float
) -> None:
    print(f"\n== Gaussian cases (q=2), {len(seeds)} seeds, reference {gauss['reference']:.4f} ==")
    cols = ["mira", "z", "official", "abs_diff_official", "energy", "sbc_ks", "tarp_atc", "joint_c2st"]
    print("| case | " + " | ".join(cols) + " |")
    print("|" + "---|" * (len(cols) + 1))
    for name, r in gauss["rows"].items():
        cells = [_ms(r[c], ".2e" if c == "abs_diff_official" else ".4f") if c in r else "-" for c in cols]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"top-1 = correct: {gauss['top1_correct']} of {len(seeds)} seeds")
    ref = gauss["reference"]
    order = sorted(gauss["rows"], key=lambda n: -np.mean(gauss["rows"][n]["mira"]))
    print(
        f"raw-score order (higher first): {order}; by |score - {ref:.4f}|: "
        f"{sorted(gauss['rows'], key=lambda n: abs(np.mean(gauss['rows'][n]['mira']) - ref))}"
    )

    print(
        f"\n== Bayesian linear regression, true model {reg['true_model']}, {len(reg['agreement']['SBC KS']['top1'])} seeds =="
    )
    print("| model | mira | z | energy | mean log evidence | tarp_atc | sbc_ks |")
    print("|---|---|---|---|---|---|---|")
    for name, r in reg["models"].items():
        cells = [
            _ms(r[c], ".4f" if c != "log_evidence" else ".2f")
            for c in ("mira", "z", "energy", "log_evidence", "tarp_atc", "sbc_ks")
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\n| ranking method | Spearman vs evidence | top-1 = evidence top-1 |")
    print("|---|---|---|")
    for method, a in reg["agreement"].items():
        print(f"| {method} | {_ms(a['spearman'], '.3f')} | {100 * np.mean(a['top1']):.0f}% |")

    print("\n== z-score vs dimension (T=300, S=100) ==" if not quick else "\n== z-score vs dimension ==")
    print("| q | correct | too_narrow | prior_only |")
    print("|---|---|---|---|")
    for q, r in dims.items():
        print(
            f"| {q} | " + " | ".join(_ms(r[n], ".2f") for n in ("correct", "too_narrow", "prior_only")) + " |"
        )
    print(f"\nwall time {wall:.1f} s, CPU time {cpu:.1f} s")


if __name__ == "__main__":
    raise SystemExit(main())
