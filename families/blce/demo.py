"""BLCE demo: regret, number of parameter updates and runtime against LinUCB-type peers.

Run: `python -m families.blce.demo [--quick] [--seeds N] [--out DIR]` (or `latentworks family blce`).
Prints tables (mean +- std over seeds) and writes results.json and blce_regret.png into --out.
"""

from __future__ import annotations

import contextlib
import io
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from latent.args import UsageError

from ..demo_cli import demo_config, finish_demo, run_demo
from .baselines import LinUCB, MabwiserDisjointLinUCB, kron_arms
from .config import BLCEConfig
from .data import LinearContextualEnv, run_bandit
from .model import BLCE, static_grid

PRACTICAL = {"width_scale": 0.1, "explore_frac": 0.1}  # our tuned setting; theory widths are conservative


def _ms(values: list[float], fmt: str = ".1f") -> str:
    arr = np.asarray(values, dtype=float)
    return f"{arr.mean():{fmt}} +- {(arr.std(ddof=1) if arr.size > 1 else 0.0):{fmt}}"


def methods(T: int, d: int, glm: bool = False) -> dict[str, Callable[[], object]]:
    batch = math.ceil(T / len(static_grid(T)))  # as many updates as BLCE's grid
    return {
        "BLCE (theory widths, c=0.5)": lambda: BLCE(d, BLCEConfig(horizon=T, glm=glm)),
        "BLCE (widths x0.1, c=0.1)": lambda: BLCE(d, BLCEConfig(horizon=T, glm=glm, **PRACTICAL)),
        "BLCE-G (widths x0.1, c=0.1)": lambda: BLCE(
            d, BLCEConfig(horizon=T, glm=glm, design="g_optimal", fw_iters=20, **PRACTICAL)
        ),
        "strictly batched G-design (widths x0.1, c=0.1)": lambda: BLCE(
            d, BLCEConfig(horizon=T, glm=glm, design="strict_g", fw_iters=20, **PRACTICAL)
        ),
        "LinUCB (every round)": lambda: LinUCB(d, T),
        "RS-OFUL (det doubling)": lambda: LinUCB(d, T, refresh="det"),
        f"LinUCB, fixed batches of {batch}": lambda: LinUCB(d, T, refresh=batch),
    }


def _run(make: Callable[[], object], env: LinearContextualEnv, T: int) -> tuple[np.ndarray, int, float]:
    agent = make()
    start = time.process_time()
    regret = run_bandit(agent, env, T)
    return regret, int(agent.num_updates), time.process_time() - start


def regret_part(configs: list[tuple[int, int]], T: int, seeds: list[int]) -> dict:
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    curves: dict[str, list[float]] = {}
    for K, d in configs:
        rows = out.setdefault(f"K={K}, d={d}", {})
        for name, make in methods(T, d).items():
            r = rows.setdefault(name, {"regret": [], "updates": [], "cpu_s": []})
            for seed in seeds:
                regret, updates, cpu = _run(make, LinearContextualEnv(K, d, seed=seed), T)
                r["regret"].append(float(regret.sum()))
                r["updates"].append(updates)
                r["cpu_s"].append(cpu)
                if (K, d) == configs[0] and seed == seeds[0]:
                    curves[name] = np.cumsum(regret)[:: max(T // 200, 1)].tolist()
    return {"tables": out, "curves": curves, "horizon": T}


def slope_part(horizons: list[int], seeds: list[int], K: int = 100, d: int = 5) -> dict:
    """Log-log slope of cumulative regret against T (about 0.5 for sqrt(T) regret)."""
    out: dict[str, dict[str, list[float]]] = {}
    for name in ("BLCE (widths x0.1, c=0.1)", "LinUCB (every round)"):
        means = []
        for T in horizons:
            make = methods(T, d)[name]
            means.append(np.mean([_run(make, LinearContextualEnv(K, d, seed=s), T)[0].sum() for s in seeds]))
        slope = float(np.polyfit(np.log(horizons), np.log(means), 1)[0])
        out[name] = {"horizons": horizons, "regret": [float(m) for m in means], "slope": slope}
    return out


def glm_part(T: int, seeds: list[int], K: int = 100, d: int = 5) -> dict:
    """Logistic rewards with a saturated ||theta*|| = 3: BGLE vs the linear algorithms (misspecified)."""
    rows: dict[str, dict[str, list[float]]] = {}
    makers = {
        "BGLE (GLM BLCE, widths x0.1, c=0.1)": lambda: BLCE(d, BLCEConfig(horizon=T, glm=True, **PRACTICAL)),
        "BLCE, linear model (widths x0.1, c=0.1)": lambda: BLCE(d, BLCEConfig(horizon=T, **PRACTICAL)),
        "LinUCB (every round)": lambda: LinUCB(d, T, noise_std=0.5),
    }
    for name, make in makers.items():
        r = rows.setdefault(name, {"regret": [], "updates": [], "cpu_s": []})
        for seed in seeds:
            regret, updates, cpu = _run(
                make, LinearContextualEnv(K, d, glm=True, theta_norm=3.0, seed=seed), T
            )
            r["regret"].append(float(regret.sum()))
            r["updates"].append(updates)
            r["cpu_s"].append(cpu)
    return rows


def disjoint_part(T: int, seeds: list[int], K: int = 10, d: int = 5) -> dict:
    """mabwiser's per-arm LinUCB vs ours on block features e_a (x) c_t (the one case where they coincide)."""
    rows: dict[str, dict[str, list[float]]] = {}
    for seed in seeds:
        rng = np.random.default_rng(seed)
        theta = rng.standard_normal((K, d)) / math.sqrt(d)
        contexts = rng.standard_normal((T, d))
        noise = 0.1 * rng.standard_normal(T)
        agents = {
            "mabwiser LinUCB (alpha=1)": MabwiserDisjointLinUCB(K, d, alpha=1.0, seed=seed),
            "our LinUCB (fixed width 1)": LinUCB(K * d, T, width=1.0),
            "BLCE (widths x0.1, c=0.1)": BLCE(K * d, BLCEConfig(horizon=T, **PRACTICAL)),
        }
        for name, agent in agents.items():
            start, regret = time.process_time(), 0.0
            for t in range(T):
                arms = kron_arms(contexts[t], K)
                a = t if (t < K and name != "BLCE (widths x0.1, c=0.1)") else agent.select(arms)
                means = theta @ contexts[t]
                regret += float(means.max() - means[a])
                agent.observe(arms[a], float(means[a] + noise[t]))
            r = rows.setdefault(name, {"regret": [], "updates": [], "cpu_s": []})
            r["regret"].append(regret)
            r["updates"].append(int(agent.num_updates))
            r["cpu_s"].append(time.process_time() - start)
    return rows


def _table(rows: dict[str, dict[str, list[float]]]) -> None:
    print("| method | cumulative regret | parameter updates | CPU s |")
    print("|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {_ms(r['regret'])} | {_ms(r['updates'], '.0f')} | {_ms(r['cpu_s'], '.2f')} |")


def _plot(curves: dict[str, list[float]], T: int, path: Path) -> None:
    from latent.plotting import figure, save_figure

    fig, ax = figure(figsize=(6, 4), extra="families")
    for name, c in curves.items():
        ax.plot(np.linspace(0, T, len(c)), c, label=name)
    for end in static_grid(T)[:-1]:
        ax.axvline(end, color="gray", lw=0.5, ls=":")
    ax.set_xlabel("round t (dotted: BLCE update times)")
    ax.set_ylabel("cumulative regret")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


@dataclass
class BlceFlags:
    """The blce demo's own flags (next to the shared --quick, --seeds, --out)."""

    configs: str | None = field(
        default=None, metadata={"help": "regret-part arm sets as KxD,KxD (default 10x5,100x5,1000x5,100x10)"}
    )
    regret_only: bool = field(
        default=False, metadata={"switch": True, "help": "skip the slope, logistic and disjoint parts"}
    )


BlceDemo = demo_config("blce", BlceFlags, seeds=3, quick_seeds=2)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (`latentworks family blce`)."""
    return run_demo(BlceDemo, __doc__, _demo, argv)


def _demo(args: Any) -> int:
    try:
        configs = (
            [tuple(int(v) for v in c.split("x")) for c in args.configs.split(",")] if args.configs else None
        )
    except ValueError:
        raise UsageError(f"--configs must look like 1000x5,100x10, got {args.configs!r}") from None
    if configs is not None and any(len(c) != 2 or min(c) < 1 for c in configs):
        raise UsageError(f"--configs must look like 1000x5,100x10, got {args.configs!r}")
    n_seeds = args.seeds
    seeds = list(range(n_seeds))
    wall0, cpu0 = time.time(), time.process_time()
    slope = glm = disjoint = None
    if args.quick:
        reg = regret_part(configs or [(10, 5), (100, 5)], 600, seeds)
        if not args.regret_only:
            slope = slope_part([300, 1000], seeds[:1])
            glm = glm_part(400, seeds[:1])
            disjoint = disjoint_part(200, seeds[:1])
    else:
        reg = regret_part(configs or [(10, 5), (100, 5), (1000, 5), (100, 10)], 10_000, seeds)
        if not args.regret_only:
            slope = slope_part([1000, 3000, 10_000, 30_000], seeds[:2])
            glm = glm_part(5000, seeds)
            disjoint = disjoint_part(2000, seeds)
    wall, cpu = time.time() - wall0, time.process_time() - cpu0
    table = io.StringIO()
    with contextlib.redirect_stdout(table):
        _print_tables(reg, slope, glm, disjoint, n_seeds, wall, cpu)
    payload = {"regret": reg, "slope": slope, "glm": glm, "disjoint": disjoint, "cpu_s": cpu}
    finish_demo(args, table.getvalue(), payload, wall)
    _plot(reg["curves"], reg["horizon"], Path(args.out) / "blce_regret.png")
    return 0


def _print_tables(
    reg: dict,
    slope: dict | None,
    glm: dict | None,
    disjoint: dict | None,
    n_seeds: int,
    wall: float,
    cpu: float,
) -> None:
    T = reg["horizon"]
    print(f"\nstatic grid for T={T}: {static_grid(T)}")
    for cfg, rows in reg["tables"].items():
        print(f"\n== linear contexts, T={T}, {cfg}, {n_seeds} seeds ==")
        _table(rows)
    if slope is None:
        print(f"\nwall time {wall:.1f} s, CPU time {cpu:.1f} s (regret part only)")
        return
    print("\n== log-log regret slope (K=100, d=5) ==")
    print("| method | T values | mean regret | slope |")
    print("|---|---|---|---|")
    for name, s in slope.items():
        print(f"| {name} | {s['horizons']} | {[round(v, 1) for v in s['regret']]} | {s['slope']:.2f} |")
    print("\n== logistic rewards (||theta*|| = 3), K=100, d=5 ==")
    _table(glm)
    print("\n== disjoint arms (K=10, context d=5, block features d=50) vs mabwiser ==")
    _table(disjoint)
    print(f"\nwall time {wall:.1f} s, CPU time {cpu:.1f} s")


if __name__ == "__main__":
    raise SystemExit(main())
