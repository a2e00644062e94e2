"""ConFlux demo: shuffled latent-factor series (N=32), zero-shot to a held-out family with a different N,
and statsmodels macrodata. Run `python -m families.conflux.demo` or `--quick`."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from ..parallel import run_jobs
from .config import ConFluxConfig
from .data import latent_factor_series, macrodata, windows
from .model import ConFlux, seriation_order


def _standardize(series: np.ndarray, train_end: int) -> np.ndarray:
    mu, sd = series[:train_end].mean(0), series[:train_end].std(0) + 1e-6
    return (series - mu) / sd


def train_conflux(
    config: ConFluxConfig, datasets: list[np.ndarray], epochs: int, seed: int
) -> tuple[ConFlux, float]:
    """Train on one or more (T, N) training segments (any N each); returns the model and seconds per epoch.

    Each dataset gets its own stored variable order, fitted on its training segment (for inference the
    model re-fits the order on the target dataset's training data, or uses identity when zero-shot).
    """
    torch.manual_seed(seed)
    model = ConFlux(config)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    data = []
    for series in datasets:
        x, y = windows(series, config.context_length, config.horizon, stride=4)
        perm = torch.as_tensor(seriation_order(series, config.reorder))
        data.append((torch.from_numpy(x), torch.from_numpy(y), perm))
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


def run_synthetic(seed: int, quick: bool, heavy: bool) -> dict:
    """N=32 shuffled latent-factor variables: ConFlux with/without reordering vs neuralforecast models."""
    steps = 800 if quick else 3000
    series = _standardize(latent_factor_series(steps, 32, 4, seed=seed)[0], int(0.8 * steps))
    train_end = int(0.8 * steps)
    cfg = dict(context_length=96, horizon=48, patch_vars=4, patch_len=8)
    xt, yt = windows(series[train_end - 96 :], 96, 48, stride=48)
    out: dict = {"seed": seed}
    for name, reorder in (("conflux", "spectral"), ("conflux_noreorder", "none")):
        model, sec = train_conflux(
            ConFluxConfig(reorder=reorder, **cfg), [series[:train_end]], 1 if quick else 12, seed
        )
        model.fit_order(series[:train_end])
        out[name] = {**_score(_predict(model, xt), yt), "sec_per_epoch": sec, "tokens": model.num_tokens(32)}
    out["naive_last"] = _score(np.repeat(xt[..., -1:], 48, -1), yt)
    if heavy:
        from .baselines import neuralforecast_forecasts

        for name in ("DLinear", "PatchTST", "iTransformer"):
            start = time.perf_counter()
            pred = neuralforecast_forecasts(name, series[:train_end], xt, 48, 5 if quick else 300, seed)
            tokens = {"DLinear": 0, "PatchTST": 32 * 12, "iTransformer": 32}[name]  # per sample, as attended
            out[name] = {**_score(pred, yt), "fit_s": time.perf_counter() - start, "tokens": tokens}
    return out


def run_zero_shot(seed: int, quick: bool) -> dict:
    """Pretrain on families A-C (N = 16, 24, 32), test zero-shot on family D (N = 20) vs from scratch."""
    steps = 600 if quick else 2000
    cfg = ConFluxConfig(context_length=96, horizon=48, patch_vars=4, patch_len=8, reorder="spectral")
    fams = [
        _standardize(latent_factor_series(steps, n, k, seed=100 * seed + i)[0], int(0.8 * steps))
        for i, (n, k) in enumerate([(16, 2), (24, 3), (32, 4)])
    ]
    target = _standardize(latent_factor_series(steps, 20, 3, seed=100 * seed + 9)[0], int(0.8 * steps))
    train_end = int(0.8 * steps)
    xt, yt = windows(target[train_end - 96 :], 96, 48, stride=48)
    epochs = 1 if quick else 6
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


def run_macro(seed: int, quick: bool) -> dict:
    """statsmodels macrodata growth rates (N = 12), context 24, horizon 8."""
    series = macrodata()
    train_end = 150
    series = _standardize(series, train_end)
    cfg = dict(context_length=24, horizon=8, patch_vars=4, patch_len=4)
    xt, yt = windows(series[train_end - 24 :], 24, 8, stride=8)
    out: dict = {"seed": seed}
    for name, reorder in (("conflux", "spectral"), ("conflux_noreorder", "none")):
        model, _ = train_conflux(
            ConFluxConfig(reorder=reorder, **cfg), [series[:train_end]], 2 if quick else 60, seed
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
        "| method | MSE | MAE | tokens / sample | train s / epoch (ConFlux) or fit s |",
        "|---|---|---|---|---|",
    ]
    for key in ("conflux", "conflux_noreorder", "DLinear", "PatchTST", "iTransformer", "naive_last"):
        if key not in syn[0]:
            continue
        extra = syn[0][key]
        timing = (
            f"{np.mean([r[key].get('sec_per_epoch', r[key].get('fit_s', float('nan'))) for r in syn]):.1f}"
        )
        lines.append(
            f"| {key} | {_cell(syn, key, 'mse')} | {_cell(syn, key, 'mae')} | {extra.get('tokens', '-')} | "
            f"{timing if key != 'naive_last' else '-'} |"
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


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (`latentworks family conflux`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seconds-long smoke run")
    parser.add_argument("--seeds", type=int, default=None, help="seeds (default 3, quick 1)")
    parser.add_argument("--out", type=str, default="runs/conflux", help="output directory")
    parser.add_argument("--no-heavy", action="store_true", help="skip the neuralforecast baselines")
    parser.add_argument("--workers", type=int, default=2, help="parallel worker processes (1 thread each)")
    args = parser.parse_args(argv)
    seeds = args.seeds if args.seeds is not None else (1 if args.quick else 3)
    if seeds < 1 or args.workers < 1:
        raise ValueError(f"`--seeds` and `--workers` must be >= 1, got {seeds} and {args.workers}.")
    torch.set_num_threads(1)
    start = time.perf_counter()
    # every (experiment, seed) is independent; the heavy synthetic runs go first so the pool stays balanced
    jobs = [(run_synthetic, (s, args.quick, not args.no_heavy)) for s in range(seeds)]
    jobs += [(run_zero_shot, (s, args.quick)) for s in range(seeds)]
    jobs += [(run_macro, (s, args.quick)) for s in range(seeds)]
    results = run_jobs(jobs, args.workers)
    syn, zs, macro = results[:seeds], results[seeds : 2 * seeds], results[2 * seeds :]
    wall = time.perf_counter() - start
    table = summarize(syn, zs, macro)
    print(table)
    print(f"\nwall time {wall:.0f} s, {seeds} seed(s)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "synthetic": syn,
        "zero_shot": zs,
        "macro": macro,
        "wall_time_s": wall,
        "table": table,
        "args": vars(args),
    }
    (out / "results.json").write_text(json.dumps(payload, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
