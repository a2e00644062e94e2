"""ConFlux demo: shuffled latent-factor series (N=32), zero-shot to a held-out family with a different N,
and statsmodels macrodata. Run `python -m families.conflux.demo` or `--quick`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from latent.args import UsageError

from ..demo_cli import demo_config, finish_demo, run_demo
from ..parallel import run_jobs
from .config import ConFluxConfig
from .data import latent_factor_series, macrodata, windows
from .model import ConFlux, seriation_order


def _standardize(series: np.ndarray, train_end: int) -> np.ndarray:
    mu, sd = series[:train_end].mean(0), series[:train_end].std(0) + 1e-6
    return (series - mu) / sd


LEARNING_RATES = (1e-3, 3e-3)  # the small sweep every trained method gets, selected on validation MSE


def train_conflux(
    config: ConFluxConfig,
    datasets: list[np.ndarray],
    epochs: int,
    seed: int,
    lr: float = 1e-3,
    orders: list[np.ndarray] | None = None,
) -> tuple[ConFlux, float]:
    """Train on one or more (T, N) training segments (any N each); returns the model and seconds per epoch.

    Each dataset gets its own stored variable order, fitted on its training segment unless `orders` gives
    them (for inference the model re-fits the order on the target dataset's training data, or uses
    identity when zero-shot).
    """
    torch.manual_seed(seed)
    model = ConFlux(config)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    data = []
    for k, series in enumerate(datasets):
        x, y = windows(series, config.context_length, config.horizon, stride=4)
        order = orders[k] if orders is not None else seriation_order(series, config.reorder)
        data.append((torch.from_numpy(x), torch.from_numpy(y), torch.as_tensor(order, dtype=torch.long)))
    gen = torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    for _ in range(epochs):
        for x, y, perm in data:
            model.perm = perm
            for idx in torch.randperm(len(x), generator=gen).split(32):
                loss = (model(x[idx]) - y[idx]).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
    return model, (time.perf_counter() - start) / max(epochs, 1)


def _score(pred: np.ndarray, target: np.ndarray) -> dict[str, float]:
    return {"mse": float(((pred - target) ** 2).mean()), "mae": float(np.abs(pred - target).mean())}


def _predict(model: ConFlux, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.from_numpy(x)).numpy()


def optimizer_steps(num_windows: int, epochs: int, batch: int = 32) -> int:
    """Adam steps of `train_conflux` on one dataset: the budget every baseline gets too."""
    return epochs * -(-num_windows // batch)


def run_synthetic(seed: int, quick: bool, heavy: bool, epochs: int = 12) -> dict:
    """N=32 shuffled latent-factor variables: ConFlux with spectral / no / oracle (true factor) order vs
    neuralforecast models, all with the same optimizer-step budget and the same learning-rate sweep
    (chosen on a validation split at the end of the training segment)."""
    steps = 800 if quick else 3000
    raw, group = latent_factor_series(steps, 32, 4, seed=seed)
    train_end = int(0.8 * steps)
    fit_end = int(0.8 * train_end)  # models are fitted on [0, fit_end) and selected on [fit_end, train_end)
    series = _standardize(raw, train_end)
    cfg = dict(context_length=96, horizon=48, patch_vars=4, patch_len=8)
    xv, yv = windows(series[fit_end - 96 : train_end], 96, 48, stride=24)
    xt, yt = windows(series[train_end - 96 :], 96, 48, stride=48)
    budget = optimizer_steps(len(windows(series[:fit_end], 96, 48, stride=4)[0]), epochs)
    lrs = LEARNING_RATES[:1] if quick else LEARNING_RATES
    out: dict = {"seed": seed, "budget_steps": budget}

    def select(name: str, fits: dict[float, tuple[np.ndarray, np.ndarray]], extra: dict) -> None:
        val = {lr: _score(pv, yv)["mse"] for lr, (pv, _) in fits.items()}
        best = min(val, key=val.get)
        out[name] = {**_score(fits[best][1], yt), "lr": best, "val_mse": val, **extra}

    oracle = np.argsort(group, kind="stable")  # the true factor grouping, unknown to a real user
    for name, reorder in (("conflux", "spectral"), ("conflux_noreorder", "none"), ("conflux_oracle", "none")):
        fits, sec = {}, 0.0
        for lr in lrs:
            orders = [oracle] if name == "conflux_oracle" else None
            model, sec = train_conflux(ConFluxConfig(reorder=reorder, **cfg), [series[:fit_end]], epochs, seed,
                                       lr, orders)  # fmt: skip
            if name == "conflux_oracle":
                model.perm = torch.as_tensor(oracle)
            else:
                model.fit_order(series[:fit_end])
            fits[lr] = (_predict(model, xv), _predict(model, xt))
        select(name, fits, {"sec_per_epoch": sec, "tokens": model.num_tokens(32)})
    out["naive_last"] = _score(np.repeat(xt[..., -1:], 48, -1), yt)
    if heavy:
        from .baselines import neuralforecast_forecasts

        for name in ("DLinear", "PatchTST", "iTransformer"):
            start, fits = time.perf_counter(), {}
            for lr in lrs:
                pv, pt = neuralforecast_forecasts(name, series[:fit_end], [xv, xt], 48, budget, seed, lr)
                fits[lr] = (pv, pt)
            tokens = {"DLinear": 0, "PatchTST": 32 * 12, "iTransformer": 32}[name]  # per sample, as attended
            select(name, fits, {"fit_s": (time.perf_counter() - start) / len(lrs), "tokens": tokens})
    return out


def run_zero_shot(seed: int, quick: bool, epochs: int = 12) -> dict:
    """Pretrain on families A-C (N = 16, 24, 32), test zero-shot on family D (N = 20) vs from scratch
    (`epochs` / 2 epochs of pretraining, 3x that from scratch)."""
    steps = 600 if quick else 2000
    cfg = ConFluxConfig(context_length=96, horizon=48, patch_vars=4, patch_len=8, reorder="spectral")
    fams = [
        _standardize(latent_factor_series(steps, n, k, seed=100 * seed + i)[0], int(0.8 * steps))
        for i, (n, k) in enumerate([(16, 2), (24, 3), (32, 4)])
    ]
    target = _standardize(latent_factor_series(steps, 20, 3, seed=100 * seed + 9)[0], int(0.8 * steps))
    train_end = int(0.8 * steps)
    xt, yt = windows(target[train_end - 96 :], 96, 48, stride=48)
    epochs = max(1, epochs // 2)
    pre, _ = train_conflux(cfg, [f[:train_end] for f in fams], epochs, seed)
    pre.fit_order(target[:train_end])  # order from unlabeled target history only; no target training
    scratch, _ = train_conflux(cfg, [target[:train_end]], epochs * 3, seed)
    scratch.fit_order(target[:train_end])
    return {
        "seed": seed,
        "zero_shot": _score(_predict(pre, xt), yt),
        "from_scratch": _score(_predict(scratch, xt), yt),
        "naive_last": _score(np.repeat(xt[..., -1:], 48, -1), yt),
    }


def run_macro(seed: int, quick: bool, epochs: int = 12) -> dict:
    """statsmodels macrodata growth rates (N = 12), context 24, horizon 8 (5 x `epochs` epochs)."""
    series = macrodata()
    train_end = 150
    series = _standardize(series, train_end)
    cfg = dict(context_length=24, horizon=8, patch_vars=4, patch_len=4)
    xt, yt = windows(series[train_end - 24 :], 24, 8, stride=8)
    out: dict = {"seed": seed}
    for name, reorder in (("conflux", "spectral"), ("conflux_noreorder", "none")):
        model, _ = train_conflux(
            ConFluxConfig(reorder=reorder, **cfg), [series[:train_end]], 2 if quick else 5 * epochs, seed
        )
        model.fit_order(series[:train_end])
        out[name] = _score(_predict(model, xt), yt)
    out["mean_forecast"] = _score(np.zeros_like(yt), yt)  # the training mean, after standardising
    return out


def _cell(rows: list[dict], key: str, metric: str) -> str:
    vals = [r[key][metric] for r in rows if key in r]
    return f"{np.mean(vals):.3f} +- {np.std(vals):.3f}" if vals else "-"


def summarize(syn: list[dict], zs: list[dict], macro: list[dict]) -> str:
    """Markdown tables (mean +- std over seeds)."""
    lines = [
        "### Synthetic, 32 shuffled variables (4 latent factors), context 96, horizon 48",
        "",
        f"Every trained method: {syn[0]['budget_steps']} optimizer steps, learning rate chosen from "
        f"{', '.join(f'{lr:g}' for lr in LEARNING_RATES)} on validation MSE (quick mode: the first only).",
        "",
        "| method | MSE | MAE | tokens / sample | train s / epoch (ConFlux) or fit s | chosen lr (per seed) |",
        "|---|---|---|---|---|---|",
    ]
    keys = (
        "conflux",
        "conflux_noreorder",
        "conflux_oracle",
        "DLinear",
        "PatchTST",
        "iTransformer",
        "naive_last",
    )
    for key in keys:
        if key not in syn[0]:
            continue
        extra = syn[0][key]
        timing = (
            f"{np.mean([r[key].get('sec_per_epoch', r[key].get('fit_s', float('nan'))) for r in syn]):.1f}"
        )
        lrs = " ".join(f"{r[key]['lr']:g}" for r in syn) if "lr" in extra else "-"
        lines.append(
            f"| {key} | {_cell(syn, key, 'mse')} | {_cell(syn, key, 'mae')} | {extra.get('tokens', '-')} | "
            f"{timing if key != 'naive_last' else '-'} | {lrs} |"
        )
    lines += [
        "",
        "### Zero-shot to a held-out family with N = 20 (pretrained on N = 16, 24, 32)",
        "",
        "| method | MSE | MAE |",
        "|---|---|---|",
    ]
    for key in ("zero_shot", "from_scratch", "naive_last"):
        lines.append(f"| {key} | {_cell(zs, key, 'mse')} | {_cell(zs, key, 'mae')} |")
    lines += [
        "",
        "### statsmodels macrodata (12 growth-rate variables), context 24, horizon 8",
        "",
        "| method | MSE | MAE |",
        "|---|---|---|",
    ]
    for key in ("conflux", "conflux_noreorder", "mean_forecast"):
        lines.append(f"| {key} | {_cell(macro, key, 'mse')} | {_cell(macro, key, 'mae')} |")
    return "\n".join(lines)


@dataclass
class ConfluxFlags:
    """The conflux demo's own flags (next to the shared --quick, --seeds, --out)."""

    no_heavy: bool = field(
        default=False, metadata={"switch": True, "help": "skip the neuralforecast baselines"}
    )
    epochs: int | None = field(
        default=None, metadata={"help": "synthetic training epochs (default 12, quick 1)"}
    )


ConfluxDemo = demo_config("conflux", ConfluxFlags, seeds=5, workers=2)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (`latentworks family conflux`)."""
    return run_demo(ConfluxDemo, __doc__.splitlines()[0], _demo, argv)


def _demo(args: Any) -> int:
    if args.epochs is not None and args.epochs < 1:
        raise UsageError(f"--epochs must be >= 1, got {args.epochs}")
    epochs = args.epochs if args.epochs is not None else (1 if args.quick else 12)
    seeds = args.seeds
    torch.set_num_threads(1)
    start = time.perf_counter()
    # every (experiment, seed) is independent; the heavy synthetic runs go first so the pool stays balanced
    jobs = [(run_synthetic, (s, args.quick, not args.no_heavy, epochs)) for s in range(seeds)]
    jobs += [(run_zero_shot, (s, args.quick, epochs)) for s in range(seeds)]
    jobs += [(run_macro, (s, args.quick, epochs)) for s in range(seeds)]
    results = run_jobs(jobs, args.workers)
    syn, zs, macro = results[:seeds], results[seeds : 2 * seeds], results[2 * seeds :]
    payload = {"synthetic": syn, "zero_shot": zs, "macro": macro}
    finish_demo(args, summarize(syn, zs, macro), payload, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
