"""CMRU demo: BMRU vs CMRU vs alpha-CMRU vs LRU vs minGRU on copy-first-input and sequential digits.

Run: `python -m families.cmru.demo` (full, a few minutes on 2 cores) or `--quick` (seconds).
Prints a table (mean +- std over seeds) and writes results.json and grad_through_time.png to --out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from latent.args import UsageError

from ..demo_cli import demo_config, finish_demo, run_demo
from ..parallel import run_jobs
from .config import UNITS, CMRUConfig
from .data import copy_first_input, sequential_digits
from .model import RecurrentClassifier, gradient_through_time

COPY_CLASSES = 4
LEARNING_RATES = {"copy": (1e-3, 3e-3, 1e-2), "digits": (3e-3, 1e-2, 3e-2)}  # swept per unit and task
CONVERGED = {"copy": 0.95, "digits": 0.80, "pdigits": 0.80}  # test accuracy that counts as "converged"


def _accuracy(
    model: RecurrentClassifier, x: torch.Tensor, y: torch.Tensor, state_noise: float = 0.0
) -> float:
    with torch.no_grad():
        return (model(x, state_noise=state_noise).argmax(-1) == y).float().mean().item()


def _train(model: RecurrentClassifier, batches, steps: int, lr: float) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    start = time.perf_counter()
    for step in range(steps):
        x, y = batches(step)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return time.perf_counter() - start


def run_one(job: dict) -> dict:
    """Train one (task, unit, seed) and evaluate it; runs in a worker process."""
    torch.set_num_threads(1)
    torch.manual_seed(job["seed"])
    task, unit, seed, steps = job["task"], job["unit"], job["seed"], job["steps"]
    out: dict = {"task": task, "unit": unit, "seed": seed, "lr": job["lr"]}
    if task == "copy":
        cfg = CMRUConfig(
            unit=unit, input_size=COPY_CLASSES + 1, num_classes=COPY_CLASSES, hidden_size=16, state_size=16
        )
        model = RecurrentClassifier(cfg)
        train_len = job["lengths"][0]
        out["train_time_s"] = _train(
            model,
            lambda s: copy_first_input(32, train_len, COPY_CLASSES, seed=10_000 * seed + s),
            steps,
            job["lr"],
        )
        out["val_acc"] = _accuracy(model, *copy_first_input(256, train_len, COPY_CLASSES, seed=555))
        for length in job["lengths"]:  # persistent memory: trained at the shortest length, tested at all
            x, y = copy_first_input(256, length, COPY_CLASSES, seed=999)
            out[f"acc_L{length}"] = _accuracy(model, x, y)
        x, y = copy_first_input(128, train_len, COPY_CLASSES, seed=999)
        for sigma in job["noise"]:
            torch.manual_seed(seed)
            out[f"acc_noise{sigma}"] = _accuracy(model, x, y, state_noise=sigma)
        xg, yg = copy_first_input(32, job["lengths"][-1], COPY_CLASSES, seed=7)
        grad = gradient_through_time(model, xg, yg)
        out["grad_first"] = grad[0].item()
        out["grad_last"] = grad[-1].item()
        out["acc"] = out[f"acc_L{train_len}"]
        if unit == "acmru":
            model.harden()
            out["acc_hardened"] = _accuracy(model, *copy_first_input(256, train_len, COPY_CLASSES, seed=999))
    else:
        xtr, ytr, xte, yte = sequential_digits(permuted=task == "pdigits", seed=seed)
        n_val = len(xtr) // 5  # the learning rate is chosen on this slice of the training split
        xval, yval, xtr, ytr = xtr[:n_val], ytr[:n_val], xtr[n_val:], ytr[n_val:]
        model = RecurrentClassifier(
            CMRUConfig(unit=unit, input_size=1, num_classes=10, hidden_size=16, state_size=16)
        )
        gen = torch.Generator().manual_seed(seed)

        def batches(_: int) -> tuple[torch.Tensor, torch.Tensor]:
            idx = torch.randint(0, len(xtr), (64,), generator=gen)
            return xtr[idx], ytr[idx]

        out["train_time_s"] = _train(model, batches, steps, job["lr"])
        out["val_acc"] = _accuracy(model, xval, yval)
        out["acc"] = _accuracy(model, xte, yte)
        torch.manual_seed(seed)
        out[f"acc_noise{job['noise'][-1]}"] = _accuracy(
            model, xte[:128], yte[:128], state_noise=job["noise"][-1]
        )
    out["converged"] = out["acc"] >= CONVERGED[task]
    return out


def select_learning_rates(runs: list[dict]) -> tuple[list[dict], str]:
    """Per (task, unit), keep the runs of the learning rate with the best mean validation accuracy over
    seeds; also return the sweep as a markdown table (mean validation accuracy % per learning rate)."""
    groups: dict[tuple[str, str], dict[float, list[dict]]] = {}
    for r in runs:
        groups.setdefault((r["task"], r["unit"]), {}).setdefault(r["lr"], []).append(r)
    kept, lines = [], ["### Learning-rate sweep (mean validation accuracy %, * = chosen)", ""]
    width = max(len(by_lr) for by_lr in groups.values())
    lines += [
        "| task | unit | " + " | ".join("lr: val acc" for _ in range(width)) + " |",
        "|---|---|" + "---|" * width,
    ]
    for (task, unit), by_lr in groups.items():
        val = {lr: float(np.mean([r["val_acc"] for r in rs])) for lr, rs in by_lr.items()}
        best = max(val, key=val.get)
        kept += by_lr[best]
        cells = [f"{lr:g}: {100 * v:.1f}{'*' if lr == best else ''}" for lr, v in val.items()]
        lines.append(f"| {task} | {unit} | " + " | ".join(cells) + " |")
    return kept, "\n".join(lines)


def _grad_curves(units: tuple[str, ...], length: int) -> dict[str, list[float]]:
    """||dL/du_t|| against t for freshly initialised models (seed 0), to show where gradients die."""
    curves = {}
    x, y = copy_first_input(32, length, COPY_CLASSES, seed=7)
    for unit in units:
        torch.manual_seed(0)
        cfg = CMRUConfig(
            unit=unit, input_size=COPY_CLASSES + 1, num_classes=COPY_CLASSES, hidden_size=16, state_size=16
        )
        curves[unit] = gradient_through_time(RecurrentClassifier(cfg), x, y).tolist()
    return curves


def _fmt(values: list[float], pct: bool = True) -> str:
    arr = np.asarray(values, dtype=float)
    scale = 100.0 if pct else 1.0
    return (
        f"{scale * arr.mean():.1f} +- {scale * arr.std():.1f}"
        if pct
        else f"{arr.mean():.1e} +- {arr.std():.1e}"
    )


def summarize(results: list[dict], units: tuple[str, ...], lengths: list[int], noise: list[float]) -> str:
    """Markdown tables of the per-seed results (mean +- std over seeds)."""
    lines = [f"### Copy-first-input (trained at L={lengths[0]}, accuracy %)", ""]
    head = ["unit"] + [f"L={n}" for n in lengths] + [f"noise {s}" for s in noise]
    head += ["converged", "|dL/du_0| (trained)"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for unit in units:
        rows = [r for r in results if r["task"] == "copy" and r["unit"] == unit]
        if not rows:
            continue
        cells = [unit] + [_fmt([r[f"acc_L{n}"] for r in rows]) for n in lengths]
        cells += [_fmt([r[f"acc_noise{s}"] for r in rows]) for s in noise]
        cells += [
            f"{sum(r['converged'] for r in rows)}/{len(rows)}",
            _fmt([r["grad_first"] for r in rows], False),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    hard = [r for r in results if r.get("acc_hardened") is not None]
    if hard:
        lines += [
            "",
            f"alpha-CMRU hardened to CMRU after training: {_fmt([r['acc_hardened'] for r in hard])} % "
            f"(relaxed: {_fmt([r['acc'] for r in hard])} %)",
        ]
    lines += ["", f"### Sequential digits (sklearn, L=64, accuracy %, state noise {noise[-1]})", ""]
    lines += [
        "| unit | digits | digits noisy | converged | permuted | permuted noisy | converged |",
        "|---|---|---|---|---|---|---|",
    ]
    for unit in units:
        cells = [unit]
        for task in ("digits", "pdigits"):
            rows = [r for r in results if r["task"] == task and r["unit"] == unit]
            if not rows:
                cells += ["-", "-", "-"]
                continue
            cells += [_fmt([r["acc"] for r in rows]), _fmt([r[f"acc_noise{noise[-1]}"] for r in rows])]
            cells.append(f"{sum(r['converged'] for r in rows)}/{len(rows)}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _plot(curves: dict[str, list[float]], path: Path) -> None:
    from latent.plotting import figure, save_figure

    fig, ax = figure(figsize=(6, 3.5), extra="families")
    for unit, curve in curves.items():
        ax.semilogy(np.maximum(np.asarray(curve), 1e-12), label=unit)
    ax.set_xlabel("time step t")
    ax.set_ylabel("||dL/du_t|| (init, loss at last step)")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


@dataclass
class CmruFlags:
    """The cmru demo's own flags (next to the shared --quick, --seeds, --out)."""

    units: str = field(default=",".join(UNITS), metadata={"help": f"comma list from {UNITS}"})
    noise: str = field(default="0.3,0.6", metadata={"help": "comma list of test-time state-noise sigmas"})
    tasks: str = field(
        default="copy,digits,pdigits", metadata={"help": "comma list of copy, digits, pdigits"}
    )
    steps_scale: float = field(default=1.0, metadata={"help": "multiplies the training steps of every run"})


CmruDemo = demo_config("cmru", CmruFlags, seeds=5, workers=2)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (`latentworks family cmru`)."""
    return run_demo(CmruDemo, __doc__.splitlines()[0], _demo, argv)


def _demo(args: Any) -> int:
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if not tasks or not set(tasks) <= set(CONVERGED):
        raise UsageError(f"--tasks must be a comma list of {tuple(CONVERGED)}, got {args.tasks!r}")
    if not args.steps_scale > 0:
        raise UsageError(f"--steps-scale must be > 0, got {args.steps_scale}")
    units = tuple(u.strip() for u in args.units.split(",") if u.strip())
    bad = [u for u in units if u not in UNITS]
    if bad or not units:
        raise UsageError(f"--units must be a comma list from {UNITS}, got {args.units!r}")
    seeds = args.seeds
    lengths = [20, 60] if args.quick else [100, 300, 1000]
    try:
        noise = [float(v) for v in args.noise.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"--noise must be a comma list of numbers, got {args.noise!r}") from None
    if not noise or min(noise) < 0:
        raise UsageError(f"--noise needs at least one sigma >= 0, got {args.noise!r}")
    steps = {k: max(1, round(v * args.steps_scale)) for k, v in (("copy", 15 if args.quick else 300),
                                                                  ("digits", 10 if args.quick else 150))}  # fmt: skip
    lrs = {"copy": (3e-3,), "digits": (1e-2,)} if args.quick else LEARNING_RATES
    jobs = [
        {
            "task": "copy",
            "unit": u,
            "seed": s,
            "steps": steps["copy"],
            "lengths": lengths,
            "noise": noise,
            "lr": lr,
        }
        for u in units
        for lr in lrs["copy"]
        for s in range(seeds)
        if "copy" in tasks
    ]
    for task in [t for t in ("digits", "pdigits") if t in tasks]:
        jobs += [
            {"task": task, "unit": u, "seed": s, "steps": steps["digits"], "noise": noise, "lr": lr}
            for u in units
            for lr in lrs["digits"]
            for s in range(seeds)
        ]
    start = time.perf_counter()
    runs = run_jobs([(run_one, (j,)) for j in jobs], args.workers)
    torch.set_num_threads(1)
    results, sweep = select_learning_rates(runs)
    curves = _grad_curves(units, lengths[-1])
    table = summarize(results, units, lengths, noise) + "\n\n" + sweep + f"\n\n{len(jobs)} training runs"
    payload = {"results": results, "all_runs": runs, "grad_curves_init": curves}
    path = finish_demo(args, table, payload, time.perf_counter() - start)
    _plot(curves, path.parent / "grad_through_time.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
