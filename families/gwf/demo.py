"""Demo: JKO step tau in {0, 0.01, 0.1, 1} x objectives x 2-D targets, several seeds; tau = 0 is the plain GAN.

Run: `python -m families.gwf.demo [--quick] [--seeds 5] [--out runs/gwf]`.
Metrics: sliced W2 and exact W2 (POT), Gaussian MMD (geomloss), modes covered, wall time.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from latent.args import UsageError

from ..demo_cli import demo_config, finish_demo, run_demo
from .baselines import GAN_NAMES, mmd_geomloss, sliced_w2_pot, w2_pot
from .config import OBJECTIVES, GWFConfig
from .data import TARGETS, modes_covered, sample_target
from .model import WassersteinFlowTrainer


def run_one(
    target: str, objective: str, tau: float, seed: int, steps: int, cfg: GWFConfig, n_eval: int
) -> dict:
    """Train one generator with the same budget for every tau: the GAN (tau = 0) takes inner_steps
    generator steps per JKO step of the others, and each JKO step fits the critic inner_steps times as
    often, so both see steps * inner_steps generator steps and steps * inner_steps * critic_steps critic
    updates."""
    t0 = time.time()
    if tau > 0:
        cfg = replace(cfg, critic_steps=cfg.critic_steps * cfg.inner_steps)
    tr = WassersteinFlowTrainer(objective, tau, cfg, seed=seed)
    data_gen = torch.Generator().manual_seed(1000 + seed)
    n_outer = steps * cfg.inner_steps if tau == 0 else steps  # same number of generator gradient steps
    tr.train(lambda n: sample_target(target, n, data_gen), n_outer)
    x = tr.sample(n_eval)
    test = sample_target(target, n_eval, torch.Generator().manual_seed(99_999))
    if not torch.isfinite(x).all():
        return {"diverged": True, "wall_s": time.time() - t0}
    covered, k, on_mode = modes_covered(target, x)
    return {"sw2": sliced_w2_pot(x, test), "w2": w2_pot(x, test), "mmd": mmd_geomloss(x, test), "modes": covered,
            "n_modes": k, "on_mode": on_mode, "wall_s": time.time() - t0, "diverged": False}  # fmt: skip


def _ms(rows: list[dict], key: str, fmt: str = ".3f") -> str:
    a = np.array([r[key] for r in rows if not r["diverged"]], dtype=float)
    return "diverged" if len(a) == 0 else f"{a.mean():{fmt}} +- {a.std():{fmt}}"


@dataclass
class GwfFlags:
    """The gwf demo's own flags (next to the shared --quick, --seeds, --out)."""

    targets: str | None = field(default=None, metadata={"help": f"comma list from {TARGETS}"})
    objectives: str | None = field(default=None, metadata={"help": f"comma list from {OBJECTIVES}"})
    taus: str = field(default="0,0.01,0.1,1", metadata={"help": "comma list of tau values"})
    steps: int | None = field(default=None, metadata={"help": "JKO steps per run (default 100, quick 10)"})


GwfDemo = demo_config("gwf", GwfFlags, seeds=5)


def main(argv: list[str] | None = None) -> int:
    """Print the tau x objective table per target and write results.json (+ samples.png) into --out."""
    return run_demo(GwfDemo, __doc__.splitlines()[0], _demo, argv)


def _demo(args: Any) -> int:
    seeds = args.seeds
    steps = args.steps if args.steps is not None else (10 if args.quick else 100)
    targets = (args.targets or "ring8").split(",")  # moons / checkerboard: pass --targets
    objectives = (args.objectives or ("mmd,js" if args.quick else "js,w1,mmd")).split(",")
    taus = [float(t) for t in args.taus.split(",")]
    for name, vals, allowed in (("targets", targets, TARGETS), ("objectives", objectives, OBJECTIVES)):
        if bad := [v for v in vals if v not in allowed]:
            raise UsageError(f"unknown {name} {bad}; choose from {allowed}")
    if steps < 1:
        raise UsageError("--steps must be >= 1")
    torch.set_num_threads(1)  # many small networks: threads only add contention
    cfg = GWFConfig(batch_size=64 if args.quick else 128)
    n_eval = 256 if args.quick else 1000
    t0 = time.time()
    lines: list[str] = []
    emit = lines.append
    results: dict = {"config": {**cfg.__dict__, "steps": steps, "seeds": seeds}, "runs": {}}
    for target in targets:
        emit(
            f"\n## {target}: {steps} JKO steps x {cfg.inner_steps} generator steps (tau=0: the GAN with the same "
            f"{steps * cfg.inner_steps} generator steps); every run {steps * cfg.inner_steps * cfg.critic_steps} "
            f"critic updates; {seeds} seeds, batch {cfg.batch_size}"
        )
        emit(
            "| objective | tau | sliced W2 | W2 (POT) | MMD (geomloss) | modes covered | on-mode share | s/run |"
        )
        emit("|---|---|---|---|---|---|---|---|")
        for objective, tau in itertools.product(objectives, taus):
            rows = [run_one(target, objective, tau, s, steps, cfg, n_eval) for s in range(seeds)]
            results["runs"][f"{target}/{objective}/{tau:g}"] = rows
            name = f"{objective} ({GAN_NAMES[objective]})" if tau == 0 else objective
            ok = [r for r in rows if not r["diverged"]]
            modes = f"{_ms(rows, 'modes', '.1f')} / {ok[0]['n_modes']}" if ok else "-"
            emit(
                f"| {name} | {tau:g} | {_ms(rows, 'sw2')} | {_ms(rows, 'w2')} | {_ms(rows, 'mmd', '.4f')} | {modes} "
                f"| {_ms(rows, 'on_mode', '.2f')} | {np.mean([r['wall_s'] for r in rows]):.1f} |"
            )
    finish_demo(args, "\n".join(lines), results, time.time() - t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
