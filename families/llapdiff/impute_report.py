"""Imputation as the paper evaluates it: hide 30% of the observed target-horizon entries and fill them.

The model is the demo's default LLapDiff (and its x0 variant), trained for forecasting on the default
data. To impute it samples the horizon conditioned on the history summary (with guidance, as configured)
and inpaints the horizon's visible 70%: after every DDIM step those points are reset to their values
noised to the next level. Linear interpolation joins the last history points to the visible horizon
points. Both are scored by MAE on the hidden entries; the history-window protocol of the demo (which must
sample unconditionally, since the summary describes the future of the history) is reported next to it.

Run: `python -m families.llapdiff.impute_report [--seeds 3] [--steps 400] [--out families/llapdiff/results]`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import torch

from latent.args import UsageError, add_config_arguments, config_from_args, run_script

from .baselines import interpolate_history
from .data import DT, regime_oscillators
from .demo import VARIANTS, train_llapdiff
from .impute import inpaint_history
from .latent import reconstruction_mae, train_latent
from .model import crps_ensemble

RATES = (0.0, 0.35, 0.7)


def horizon_case(test: dict, seed: int, share: float = 0.3) -> tuple[torch.Tensor, torch.Tensor]:
    """Hidden (N, H) entries of the horizon (all channels of a time step together) and the visible mask."""
    rng = np.random.default_rng(seed)
    hide = torch.from_numpy(rng.random(test["t_query"].shape) < share)
    return hide, (~hide).to(torch.float32)


def linear_horizon(test: dict, visible: torch.Tensor) -> torch.Tensor:
    """Linear interpolation in time over history and visible horizon points, read on the horizon."""
    vals = torch.cat([test["hist"], torch.where(visible.bool().unsqueeze(-1), test["target"], torch.nan)], 1)
    times = torch.cat([test["t_hist"], test["t_query"]], 1)
    return interpolate_history(vals, times)[:, test["hist"].shape[1] :]


MODELS = ("llapdiff", "llapdiff_x0", "latent", "latent_x0")


def run(
    missing: float,
    seed: int,
    steps: int,
    models: tuple[str, ...] = MODELS,
    eta: float | None = None,
    samples: int = 4,
    ema_decay: float | None = None,
) -> dict:
    """Train the `models` at one history-missing rate and seed; MAE of each imputer on hidden entries
    (`samples` draws averaged per imputation; `ema_decay`: evaluate the weights' moving average)."""
    train = regime_oscillators(256, missing_rate=missing, seed=seed)
    test = regime_oscillators(96, missing_rate=missing, seed=1000 + seed)
    hide, visible = horizon_case(test, seed)
    truth = test["target"][hide]
    out: dict = {"missing": missing, "seed": seed, "hidden": int(hide.sum())}
    out["linear"] = (linear_horizon(test, visible)[hide] - truth).abs().mean().item()
    out["forecast_only"] = {}
    # the demo's history protocol: 30% of observed history points hidden, unconditional windows
    rng = np.random.default_rng(seed)
    hh = torch.from_numpy((rng.random(test["mask"].shape[:2]) < 0.3) & (test["mask"][..., 0].numpy() > 0))
    hh[:, -1] = False
    mask2, hist2 = test["mask"].clone(), test["hist"].clone()
    mask2[hh], hist2[hh] = 0.0, float("nan")
    out["history_linear"] = (
        (interpolate_history(hist2, test["t_hist"])[hh] - test["hist_clean"][hh]).abs().mean().item()
    )
    clean = regime_oscillators(96, missing_rate=missing, noise=0.0, seed=1000 + seed)["target"]
    out["noise_floor"] = (clean[hide] - truth).abs().mean().item()  # the noise-free signal's error
    for name in (m for m in ("llapdiff", "llapdiff_x0") if m in models):
        print(f"rate {missing} seed {seed}: {name}", file=sys.stderr, flush=True)
        t0 = time.process_time()
        model = train_llapdiff(train, steps=steps, seed=seed, config=VARIANTS[name], ema_decay=ema_decay)
        torch.manual_seed(seed)
        s = model.sample(
            test["hist"], test["mask"], test["t_hist"], test["t_query"], num_samples=samples,
            y_obs=test["target"], obs_mask=visible, eta=eta,
        )  # fmt: skip
        out[name] = (s.mean(0)[hide] - truth).abs().mean().item()
        torch.manual_seed(seed)
        f = model.sample(test["hist"], test["mask"], test["t_hist"], test["t_query"], num_samples=samples)
        out["forecast_only"][name] = (f.mean(0)[hide] - truth).abs().mean().item()  # no visible points used
        out[f"{name}_forecast_crps"] = crps_ensemble(f, test["target"]).item()
        torch.manual_seed(seed)
        filled = inpaint_history(
            model, hist2, mask2, test["t_hist"], test["t_query"].shape[1], DT, num_samples=samples
        )
        out[f"history_{name}"] = (filled[hh] - test["hist_clean"][hh]).abs().mean().item()
        out[f"{name}_cpu_s"] = time.process_time() - t0
    for key, cfg in (("latent", VARIANTS["llapdiff"]), ("latent_x0", VARIANTS["llapdiff_x0"])):
        if key not in models:
            continue
        print(f"rate {missing} seed {seed}: {key}", file=sys.stderr, flush=True)
        t0 = time.process_time()
        # latent_dim 3: each series mixes its own plane
        model = train_latent(train, 600, steps, seed, cfg, latent_dim=3, ema_decay=ema_decay)
        out[f"{key}_recon_mae"] = reconstruction_mae(model, test["target"])
        torch.manual_seed(seed)
        s = model.sample(
            test["hist"], test["mask"], test["t_hist"], test["t_query"], samples, test["target"], visible
        )
        out[key] = (s.mean(0)[hide] - truth).abs().mean().item()
        torch.manual_seed(seed)
        f = model.sample(test["hist"], test["mask"], test["t_hist"], test["t_query"], samples)
        out["forecast_only"][key] = (f.mean(0)[hide] - truth).abs().mean().item()
        out[f"{key}_forecast_crps"] = crps_ensemble(f, test["target"]).item()
        out[f"{key}_cpu_s"] = time.process_time() - t0
    return out


def _cell(v: list[float]) -> str:
    return f"{np.mean(v):.3f} +- {np.std(v):.3f}"


@dataclass
class ImputeReportConfig:
    """Flags of the imputation report."""

    seeds: int = field(default=3, metadata={"help": "seeds per missing rate"})
    steps: int = field(default=400, metadata={"help": "training steps per model (the demo's default)"})
    rates: str = field(
        default="0.0",
        metadata={"help": f"history missing rates, comma-separated (default data: 0.0; demo: {RATES})"},
    )
    eta: float | None = field(
        default=None, metadata={"help": "DDIM eta of the inpainting (default: the config's, 0)"}
    )
    no_latent: bool = field(
        default=False, metadata={"switch": True, "help": "skip the VAE + LapFormer model (slowest)"}
    )
    models: str = field(
        default=",".join(MODELS), metadata={"help": f"comma-separated subset of {', '.join(MODELS)}"}
    )
    samples: int = field(
        default=4, metadata={"help": "draws averaged per imputation (the reference code evaluates 25)"}
    )
    ema: float | None = field(
        default=None,
        metadata={"help": "evaluate a moving average of the weights with this decay (reference: 0.999)"},
    )
    out: str = field(default="families/llapdiff/results", metadata={"help": "folder of the reports"})

    def __post_init__(self) -> None:
        if self.seeds < 1 or self.steps < 1 or self.samples < 1:
            raise UsageError("--seeds, --steps and --samples must be >= 1")
        bad = set(self.models.split(",")) - set(MODELS)
        if bad:
            raise UsageError(f"--models: unknown {', '.join(sorted(bad))}; choose from {', '.join(MODELS)}")
        if self.ema is not None and not 0.0 < self.ema < 1.0:
            raise UsageError(f"--ema must lie in (0, 1), got {self.ema}")


def main(argv: list[str] | None = None) -> int:
    """Run every rate and seed, print and write the markdown and JSON reports."""
    return run_script(
        "python -m families.llapdiff.impute_report",
        __doc__.splitlines()[0],
        partial(add_config_arguments, cls=ImputeReportConfig),
        _report,
        argv,
    )


def _report(ns: argparse.Namespace) -> int:
    args = config_from_args(ImputeReportConfig, ns)
    rates = [float(r) for r in args.rates.split(",")]
    torch.set_num_threads(1)
    t0 = time.time()
    models = tuple(m for m in args.models.split(",") if not (args.no_latent and m.startswith("latent")))
    res = [
        run(r, s, args.steps, models, args.eta, args.samples, args.ema)
        for r in rates
        for s in range(args.seeds)
    ]
    wall = time.time() - t0
    rows = [
        ("llapdiff: horizon inpainting, history-conditioned", "llapdiff"),
        ("llapdiff_x0: horizon inpainting, history-conditioned", "llapdiff_x0"),
        ("llapdiff_latent (SetVAE + LapFormer, v): latent horizon inpainting", "latent"),
        ("llapdiff_latent_x0 (SetVAE + LapFormer, x0): latent horizon inpainting", "latent_x0"),
        ("linear interpolation (history + visible horizon)", "linear"),
        ("noise-free signal (floor: the observation noise)", "noise_floor"),
        ("llapdiff forecast mean (visible horizon unused)", ("forecast_only", "llapdiff")),
        ("llapdiff_latent_x0 forecast mean (visible horizon unused)", ("forecast_only", "latent_x0")),
        ("forecast CRPS over the whole horizon: llapdiff", "llapdiff_forecast_crps"),
        ("forecast CRPS over the whole horizon: llapdiff_x0", "llapdiff_x0_forecast_crps"),
        ("forecast CRPS over the whole horizon: llapdiff_latent", "latent_forecast_crps"),
        ("forecast CRPS over the whole horizon: llapdiff_latent_x0", "latent_x0_forecast_crps"),
        ("llapdiff: history windows, unconditional (demo protocol)", "history_llapdiff"),
        ("llapdiff_x0: history windows, unconditional (demo protocol)", "history_llapdiff_x0"),
        ("linear interpolation, history (demo protocol)", "history_linear"),
    ]
    has = lambda x, k: k[1] in x[k[0]] if isinstance(k, tuple) else k in x  # noqa: E731
    rows = [(lab, k) for lab, k in rows if all(has(x, k) for x in res)]
    get = lambda r, k: r[k[0]][k[1]] if isinstance(k, tuple) else r[k]  # noqa: E731
    lines = [
        "| imputer (MAE on hidden entries) | "
        + " | ".join(f"{int(r * 100)}% history missing" for r in rates)
        + " |",
        "|---" * (len(rates) + 1) + "|",
    ]
    for label, key in rows:
        cells = [_cell([get(x, key) for x in res if x["missing"] == r]) for r in rates]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    keys = [k for k in MODELS if k in res[0]]
    wins = {k: sum(x[k] <= x["linear"] for x in res) for k in keys}
    best = sum(min(x[k] for k in keys) <= x["linear"] for x in res)
    text = (
        "# LLapDiff imputation against linear interpolation\n\n"
        f"Command: `python -m families.llapdiff.impute_report --seeds {args.seeds} --steps {args.steps} --rates {args.rates}"
        + (f" --eta {args.eta}" if args.eta is not None else "")
        + (" --no-latent" if args.no_latent else "")
        + (f" --models {args.models}" if args.models != ",".join(MODELS) else "")
        + (f" --samples {args.samples}" if args.samples != 4 else "")
        + (f" --ema {args.ema}" if args.ema is not None else "")
        + (f" --out {args.out}" if str(args.out) != "families/llapdiff/results" else "")
        + "`; "
        f"wall {wall:.0f} s (2-core shared CPU, contended).\n"
        f"Default data (`regime_oscillators`, 256 train / 96 test series, horizon 48); 30% of the horizon's "
        f"time steps hidden; mean +- std over {args.seeds} seeds; {args.samples} samples per imputation"
        + (f"; weights: moving average, decay {args.ema}" if args.ema is not None else "")
        + ".\n\n"
        + "\n".join(lines)
        + "\n\nAt or below linear interpolation (runs): "
        + ", ".join(f"{k} {n} of {len(res)}" for k, n in wins.items())
        + f"; best diffusion imputer {best} of {len(res)}.\n"
    )
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "imputation.md").write_text(text)
    (out / "imputation.json").write_text(json.dumps({"runs": res, "wall_s": wall}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
