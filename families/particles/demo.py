"""Demo: clusters and their locations with / without the perceptron, beta and scale sweeps, HF block diagnostic.

Run: `python -m families.particles.demo [--quick] [--seeds 5] [--out runs/particles]`.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..demo_cli import demo_config, finish_demo, run_demo
from .baselines import simulate_dopri5, wasserstein2
from .config import ParticlesConfig
from .data import initial_clouds, tiny_hf_model
from .hf_block import block_particle_dynamics
from .model import Perceptron, find_clusters, geodesic, phi_critical_points, riemannian_grad_norm, simulate


def _ms(values: list[float], fmt: str = ".2f") -> str:
    a = np.asarray(values, dtype=float)
    return f"{a.mean():{fmt}} +- {a.std():{fmt}}"


def _pairwise_mean(items: list, fn) -> float:
    pairs = list(itertools.combinations(items, 2))
    return float(np.mean([fn(a, b) for a, b in pairs])) if pairs else 0.0


def run_config(
    cfg: ParticlesConfig, use_perceptron: bool, starts: int, weight_seed: int = 0, generic: bool = False
) -> dict:
    """Simulate `starts` random initial clouds under one fixed set of weights and summarise the atoms;
    `generic` uses untied perceptron output weights (a field that is not a gradient)."""
    gen = torch.Generator().manual_seed(10_000 + weight_seed)
    perc = (
        (Perceptron.generic(cfg, gen) if generic else Perceptron.random(cfg, gen)) if use_perceptron else None
    )
    crit = phi_critical_points(perc) if perc is not None and perc.is_gradient else None
    atoms, masses, grads, mono, finals, largest, to_crit = [], [], [], [], [], [], []
    for x0 in initial_clouds(starts, cfg.n_particles, cfg.dim, seed=weight_seed):
        tr = simulate(x0, cfg, perc)
        cl = find_clusters(tr.x, cfg.cluster_radius)
        atoms.append(cl.count)
        masses.append(float(cl.masses.max()))
        grads.append(riemannian_grad_norm(tr.x, cfg, perc))
        mono.append(bool((np.diff(tr.energies) >= -1e-10).all()) if np.isfinite(tr.energies).all() else None)
        finals.append(tr.x)
        largest.append(cl.largest)
        if crit is not None and cl.count <= 20:  # distance of each atom to the nearest local max of phi
            to_crit.append(max(min(geodesic(c, p) for p in crit) for c in cl.centers))
    return {
        "atoms": atoms,
        "largest_mass": masses,
        "location_spread_deg": float(np.degrees(_pairwise_mean(largest, geodesic))),
        "w2_between_starts": _pairwise_mean(finals, wasserstein2),
        "max_riem_grad": grads,
        "energy_monotone": None if None in mono else all(mono),
        "atom_to_phi_max_deg": float(np.degrees(max(to_crit))) if to_crit else None,
        "phi_local_maxima": None if crit is None else len(crit),
    }


@dataclass
class ParticlesFlags:
    """The particles demo's own flags (next to the shared --quick, --seeds, --out)."""

    no_hf: bool = field(
        default=False, metadata={"switch": True, "help": "skip the Hugging Face block diagnostic"}
    )


ParticlesDemo = demo_config("particles", ParticlesFlags, seeds=5, quick_seeds=2, min_seeds=2)


def main(argv: list[str] | None = None) -> int:
    """Print the particle tables and write results.json (+ energy.png) into --out."""
    return run_demo(ParticlesDemo, __doc__.splitlines()[0], _demo, argv)


def _demo(args: Any) -> int:
    starts = args.seeds  # >= 2: the location spread compares starts
    torch.set_num_threads(1)  # the demo runs many small problems; threads only add contention
    t0 = time.time()
    lines: list[str] = []
    emit = lines.append
    base = ParticlesConfig(n_particles=32, t_final=8.0) if args.quick else ParticlesConfig()
    results: dict = {"config": vars(base) | {"starts": starts}, "main": {}, "sweep": {}, "hf": {}}

    emit(
        f"\n## Atoms after T={base.t_final} (n={base.n_particles}, d={base.dim}, beta={base.beta}, "
        f"K={base.num_units}, scale={base.perceptron_scale}; {starts} random starts, fixed weights)"
    )
    emit(
        "| interaction | perceptron | # atoms | largest atom mass | location spread (deg) | W2 between starts "
        "(POT) | max Riem. grad | energy monotone | atom to nearest phi max (deg) |"
    )
    emit("|---|---|---|---|---|---|---|---|---|")
    settings = [(False, False), (True, False), (True, True)]  # (perceptron, generic untied weights)
    for inter, (use_p, generic) in itertools.product((1.0, -1.0), settings):
        r = run_config(replace(base, interaction=inter), use_p, starts, generic=generic)
        kind = ("generic" if generic else "mlp") if use_p else "nomlp"
        results["main"][f"{'attr' if inter > 0 else 'rep'}_{kind}"] = r
        tc = "-" if r["atom_to_phi_max_deg"] is None else f"{r['atom_to_phi_max_deg']:.2f}"
        mono = "n/a (no energy)" if r["energy_monotone"] is None else r["energy_monotone"]
        label = ("generic W (not a gradient)" if generic else "yes (tied, gradient)") if use_p else "no"
        emit(
            f"| {'attractive' if inter > 0 else 'repulsive'} | {label} | {_ms(r['atoms'], '.1f')}"
            f" | {_ms(r['largest_mass'])} | {r['location_spread_deg']:.1f} | {r['w2_between_starts']:.3f} | "
            f"{max(r['max_riem_grad']):.1e} | {mono} | {tc} |"
        )

    big = replace(base, n_particles=64 if args.quick else 1024, t_final=min(base.t_final, 20.0))
    big_starts = 2 if args.quick else 3
    emit(f"\n## Larger n: n={big.n_particles}, T={big.t_final}, {big_starts} starts (same weights as above)")
    emit(
        "| interaction | perceptron | # atoms | largest atom mass | location spread (deg) | energy monotone |"
    )
    emit("|---|---|---|---|---|---|")
    for inter, use_p in itertools.product((1.0, -1.0), (False, True)):
        r = run_config(replace(big, interaction=inter), use_p, big_starts)
        results.setdefault("large_n", {})[
            f"{'attr' if inter > 0 else 'rep'}_{'mlp' if use_p else 'nomlp'}"
        ] = r
        emit(
            f"| {'attractive' if inter > 0 else 'repulsive'} | {'yes' if use_p else 'no'} | "
            f"{_ms(r['atoms'], '.1f')} | {_ms(r['largest_mass'])} | {r['location_spread_deg']:.1f} | "
            f"{r['energy_monotone']} |"
        )

    betas, scales = ((1.0, 4.0), (0.0, 5.0)) if args.quick else ((0.5, 1.0, 4.0), (0.0, 1.0, 5.0, 20.0))
    sweep_starts = 2 if args.quick else 3
    small = replace(base, n_particles=min(base.n_particles, 128), t_final=min(base.t_final, 30.0))
    emit(
        f"\n## Sweep: # atoms / location spread (deg) over {sweep_starts} starts, n={small.n_particles}, "
        f"T={small.t_final}"
    )
    emit("| interaction | beta | " + " | ".join(f"scale {s:g}" for s in scales) + " |")
    emit("|---|---|" + "---|" * len(scales))
    for inter, beta in itertools.product((1.0, -1.0), betas):
        cells = []
        for s in scales:
            cfg = replace(small, interaction=inter, beta=beta, perceptron_scale=s)
            r = run_config(cfg, s > 0, sweep_starts)
            results["sweep"][f"{inter:+g}_{beta:g}_{s:g}"] = r
            cells.append(f"{_ms(r['atoms'], '.1f')} / {r['location_spread_deg']:.0f}")
        emit(f"| {'attractive' if inter > 0 else 'repulsive'} | {beta:g} | " + " | ".join(cells) + " |")

    # Solver check: projected Euler against torchdiffeq's adaptive dopri5 on one setting.
    cfg = replace(small, t_final=min(small.t_final, 10.0))
    perc = Perceptron.random(cfg, torch.Generator().manual_seed(10_000))
    x0 = initial_clouds(1, cfg.n_particles, cfg.dim)[0]
    te, td = simulate(x0, cfg, perc), simulate_dopri5(x0, cfg, perc)
    results["solver"] = {
        "w2_euler_vs_dopri5": wasserstein2(te.x, td.x),
        "dopri5_sphere_drift": td.sphere_drift,
    }
    emit(
        f"\nSolver check (attractive, perceptron, T={cfg.t_final}): W2(Euler, dopri5) = "
        f"{results['solver']['w2_euler_vs_dopri5']:.2e}, dopri5 max |norm-1| = {td.sphere_drift:.1e}"
    )

    if not args.no_hf:
        inits = (0.02, 1.0) if args.quick else (0.02, 0.2, 1.0)
        t_hf = 5.0 if args.quick else 20.0
        emit(
            f"\n## HF block as particle dynamics (tiny random decoders, d=16, 32 tokens, layer 0, T={t_hf}, "
            f"{starts} starts)"
        )
        emit(
            "| model | init std | MLP | # atoms | largest atom mass | mean cos start -> end | final speed | t reached |"
        )
        emit("|---|---|---|---|---|---|---|---|")
        for kind, init in itertools.product(("llama", "gpt2"), inits):
            model = tiny_hf_model(kind, 16, init)
            for use_mlp in (False, True):
                diags = [
                    block_particle_dynamics(model, 0, 32, t_final=t_hf, mlp=use_mlp, seed=s)
                    for s in range(starts)
                ]
                key = f"{kind}_{init:g}_{'mlp' if use_mlp else 'attn'}"
                results["hf"][key] = {
                    "atoms": [d.n_atoms for d in diags], "largest_mass": [d.largest_mass for d in diags],
                    "cos_start": [float(d.mean_cosine[0]) for d in diags],
                    "cos_end": [float(d.mean_cosine[-1]) for d in diags], "final_speed": [d.final_speed for d in diags],
                    "t_reached": [float(d.times[-1]) for d in diags],
                }  # fmt: skip
                r = results["hf"][key]
                emit(
                    f"| {kind} | {init:g} | {'yes' if use_mlp else 'no'} | {_ms(r['atoms'], '.1f')} | "
                    f"{_ms(r['largest_mass'])} | {np.mean(r['cos_start']):.2f} -> {_ms(r['cos_end'])} | "
                    f"{np.mean(r['final_speed']):.1e} | {np.mean(r['t_reached']):.1f} |"
                )

    path = finish_demo(args, "\n".join(lines), results, time.time() - t0)
    _plot(base, path.parent)
    return 0


def _plot(cfg: ParticlesConfig, out: Path) -> None:
    """Energy along the flow for the four main settings (one start each)."""
    from latent.plotting import can_plot, figure, save_figure

    if not can_plot():
        return
    fig, ax = figure(1, 2, figsize=(9, 3.2), extra="families")
    x0 = initial_clouds(1, cfg.n_particles, cfg.dim)[0]
    for k, inter in enumerate((1.0, -1.0)):
        for use_p in (False, True):
            c = replace(cfg, interaction=inter)
            p = Perceptron.random(c, torch.Generator().manual_seed(10_000)) if use_p else None
            tr = simulate(x0, c, p)
            ax[k].plot(tr.times, tr.energies, label=f"perceptron={'on' if use_p else 'off'}")
        ax[k].set(title=f"{'attractive' if inter > 0 else 'repulsive'}", xlabel="t", ylabel="E(mu_t)")
        ax[k].legend()
    fig.tight_layout()
    save_figure(fig, out / "energy.png", dpi=100)


if __name__ == "__main__":
    raise SystemExit(main())
