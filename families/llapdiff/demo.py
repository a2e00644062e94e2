"""LLapDiff demo: irregular damped oscillators with regime shifts; forecast MSE/MAE/CRPS vs missing rate,
imputation error, and pole recovery. Run `python -m families.llapdiff.demo` or `--quick`.

`llapdiff` uses the reference code's diffusion settings (the config defaults) and imputes by inpainting;
`llapdiff_x0` changes only the prediction target to x0; `llapdiff_lite` is the ablation with the earlier
settings (`LLapDiffConfig.lite()`) and the residue fit at historical times."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..demo_cli import demo_config, finish_demo, run_demo
from ..parallel import run_jobs
from .baselines import (
    GRUDelta,
    NeuralCDE,
    deepar_forecast,
    dlinear_forecast,
    interpolate_history,
    saits_impute,
    train_direct,
)
from .config import LLapDiffConfig
from .data import DT, regime_oscillators
from .diffusion import WeightAverage
from .impute import inpaint_history, residue_fit_history
from .model import LLapDiff, crps_ensemble, fit_poles

VARIANTS = {
    "llapdiff": LLapDiffConfig(),
    "llapdiff_x0": LLapDiffConfig(prediction="x0"),
    "llapdiff_lite": LLapDiffConfig.lite(),
}
FORECASTERS = (*VARIANTS, "gru_dt", "ncde", "dlinear", "deepar")
IMPUTERS = {
    "impute_llapdiff_mae": "llapdiff (inpainting, times >= 0)",
    "impute_llapdiff_x0_mae": "llapdiff_x0 (inpainting, times >= 0)",
    "impute_llapdiff_lite_mae": "llapdiff_lite (residue fit at negative times)",
    "impute_linear_mae": "linear",
    "impute_saits_mae": "saits",
}

logger = logging.getLogger(__name__)


def _scores(samples: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
    point = samples.mean(0)
    return {
        "mse": (point - target).pow(2).mean().item(),
        "mae": (point - target).abs().mean().item(),
        "crps": crps_ensemble(samples, target).item(),
    }


def train_llapdiff(
    train: dict, *, steps: int, seed: int, config: LLapDiffConfig, ema_decay: float | None = None
) -> LLapDiff:
    """A fresh `LLapDiff` trained for `steps` on the `train` split, seeded (the demo and the imputation report).

    `ema_decay` returns the moving average of the weights (the reference code evaluates that) instead of
    the last step's weights."""
    torch.manual_seed(seed)
    model = LLapDiff(config)
    avg = WeightAverage(model, ema_decay) if ema_decay else None
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        idx = torch.randint(0, train["hist"].shape[0], (32,), generator=gen)
        loss = model.loss(
            train["hist"][idx],
            train["mask"][idx],
            train["t_hist"][idx],
            train["target"][idx],
            train["t_query"][idx],
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        if avg:
            avg.update(model)
    if avg:
        avg.copy_to(model)
    return model


def run(missing: float, seed: int, quick: bool, heavy: bool) -> dict:
    """All methods at one missing rate and seed."""
    n_train, n_test = (32, 16) if quick else (256, 96)
    steps = 10 if quick else 400
    train = regime_oscillators(n_train, missing_rate=missing, seed=seed)
    test = regime_oscillators(n_test, missing_rate=missing, seed=1000 + seed)
    out: dict = {"missing": missing, "seed": seed, "seconds": {}}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        out["seconds"][name] = round(now - clock, 2)
        clock = now

    members = 4 if quick else 8
    models = {}
    for name, config in VARIANTS.items():
        models[name] = train_llapdiff(train, steps=steps, seed=seed, config=config)
        torch.manual_seed(seed)
        samples = models[name].sample(
            test["hist"], test["mask"], test["t_hist"], test["t_query"], num_samples=members
        )
        out[name] = _scores(samples, test["target"])
        lap(name)
    torch.manual_seed(seed)
    gru = train_direct(GRUDelta(3, test["target"].shape[1]), train, steps, seed=seed)
    with torch.no_grad():
        out["gru_dt"] = _scores(gru(test["hist"], test["mask"], test["t_hist"]).unsqueeze(0), test["target"])
    lap("gru_dt")
    if heavy:
        torch.manual_seed(seed)
        # A Neural CDE step costs ~6x a GRU step (an RK4 solve per batch), so it gets fewer steps.
        ncde_steps = 4 if quick else 60
        ncde = train_direct(NeuralCDE(3, test["target"].shape[1]), train, ncde_steps, seed=seed)
        with torch.no_grad():
            out["ncde"] = _scores(
                ncde(test["hist"], test["mask"], test["t_hist"]).unsqueeze(0), test["target"]
            )
        lap("ncde")
        out["dlinear"] = _scores(
            dlinear_forecast(train, test, 5 if quick else 200, seed).unsqueeze(0), test["target"]
        )
        lap("dlinear")
        out["deepar"] = _scores(
            deepar_forecast(train, test, 5 if quick else 200, num_members=members, seed=seed), test["target"]
        )
        lap("deepar")
    # imputation: hide 30% of the observed history points (never the last one) and query them
    rng = np.random.default_rng(seed)
    hide = (rng.random(test["mask"].shape[:2]) < 0.3) & (test["mask"][..., 0].numpy() > 0)
    hide[:, -1] = False
    hide_t = torch.from_numpy(hide)
    mask2 = test["mask"].clone()
    mask2[hide_t] = 0.0
    hist2 = test["hist"].clone()
    hist2[hide_t] = float("nan")
    truth = test["hist_clean"][hide_t]

    def err(filled: torch.Tensor) -> float:
        return (filled[hide_t] - truth).abs().mean().item()

    torch.manual_seed(seed)
    horizon = test["t_query"].shape[1]
    for name in ("llapdiff", "llapdiff_x0"):
        out[f"impute_{name}_mae"] = err(
            inpaint_history(models[name], hist2, mask2, test["t_hist"], horizon, DT, num_samples=4)
        )
    out["impute_llapdiff_lite_mae"] = err(
        residue_fit_history(models["llapdiff_lite"], hist2, mask2, test["t_hist"])
    )
    out["impute_linear_mae"] = err(interpolate_history(hist2, test["t_hist"]))
    if heavy:
        train2 = train["hist"].clone()
        out["impute_saits_mae"] = err(saits_impute(train2, hist2, epochs=2 if quick else 30, seed=seed))
    lap("imputation")
    logger.info("missing %.1f seed %d done: %s", missing, seed, out["seconds"])
    return out


def pole_recovery(quick: bool) -> list[dict]:
    """Fit K=2 modes to noiseless post-shift segments of single latents; compare with the true (rho, omega)."""
    rows = []
    for n in range(2 if quick else 4):
        d = regime_oscillators(1, missing_rate=0.0, noise=0.0, seed=50 + n, num_channels=1)
        true = d["true_poles"][0]  # (2 oscillators, [rho, omega]) after the shift
        y = (
            torch.cat([d["hist_clean"][0], d["target"][0]])[-56:] - d["zero_level"][0]
        )  # post-shift tail, no offset
        t = torch.arange(56, dtype=torch.float32) * DT
        rho, omega, mse = fit_poles(
            t, y, num_poles=2, steps=150 if quick else 400, restarts=3 if quick else 6
        )
        order = torch.argsort(omega)
        true_sorted = true[torch.argsort(true[:, 1])]
        rows.append(
            {
                "true": true_sorted.tolist(),
                "fit": torch.stack([rho[order], omega[order]], -1).tolist(),
                "mse": mse,
            }
        )
    return rows


def _cell(values: list[float]) -> str:
    return f"{np.mean(values):.3f} +- {np.std(values):.3f}"


def summarize(results: list[dict], rates: list[float]) -> str:
    """Markdown tables (mean +- std over seeds)."""
    methods = [m for m in FORECASTERS if m in results[0]]
    lines = []
    for metric in ("mse", "mae", "crps"):
        lines += [f"### Forecast {metric.upper()} at horizon 48 vs missing rate", ""]
        lines += [
            "| method | " + " | ".join(f"{int(r * 100)}% missing" for r in rates) + " |",
            "|---" * (len(rates) + 1) + "|",
        ]
        for m in methods:
            cells = [_cell([x[m][metric] for x in results if x["missing"] == r]) for r in rates]
            lines.append(f"| {m} | " + " | ".join(cells) + " |")
        lines.append("")
    imp = [k for k in IMPUTERS if k in results[0]]
    lines += ["### Imputation MAE (30% of observed history hidden)", ""]
    lines += [
        "| method | " + " | ".join(f"{int(r * 100)}% missing" for r in rates) + " |",
        "|---" * (len(rates) + 1) + "|",
    ]
    for k in imp:
        lines.append(
            f"| {IMPUTERS[k]} | "
            + " | ".join(_cell([x[k] for x in results if x["missing"] == r]) for r in rates)
            + " |"
        )
    return "\n".join(lines)


@dataclass
class LlapdiffFlags:
    """The llapdiff demo's own flags (next to the shared --quick, --seeds, --out)."""

    no_heavy: bool = field(
        default=False,
        metadata={
            "switch": True,
            "help": "skip the torchcde / neuralforecast (DLinear, DeepAR) / pypots baselines",
        },
    )


LlapdiffDemo = demo_config("llapdiff", LlapdiffFlags, seeds=3, workers=2)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (`latentworks family llapdiff`)."""
    return run_demo(LlapdiffDemo, __doc__.splitlines()[0], _demo, argv)


def _demo(args: Any) -> int:
    torch.set_num_threads(1)
    rates = [0.0, 0.5] if args.quick else [0.0, 0.35, 0.7]
    start = time.perf_counter()
    jobs = [(run, (r, s, args.quick, not args.no_heavy)) for r in rates for s in range(args.seeds)]
    results = run_jobs(jobs, args.workers)
    poles = pole_recovery(args.quick)
    table = summarize(results, rates)
    table += "\n\n### Pole recovery (K=2 fit, noiseless post-shift segment): true vs fitted (rho, omega)\n"
    for row in poles:
        table += f"\n- true {np.round(row['true'], 3).tolist()} fit {np.round(row['fit'], 3).tolist()} (mse {row['mse']:.1e})"
    finish_demo(args, table, {"results": results, "poles": poles}, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
