"""E2 and the experiment dispatcher; each study writes `<name>.json` + `<name>.md` + PNG plots into `out/<name>/`.

* E1 (`probes.e1`): does evaluation awareness persist when the prompt says "you are deployed"?
* E2 `run_e2`: can probes and steering tell sycophancy from scheming? (geometry vs split-half
  reliability, cross-probe transfer matrix, steering cross-effects)
* E3 and the organism study (LoRA fine-tunes) live in `probes.lora_studies`.

Paper: Baek et al., "Sycophancy Towards Researchers Drives Performative Misalignment" (ICML 2026);
protocols from Greenblatt et al. 2024, Nguyen et al. 2025, Rimsky et al. (CAA). Directions are read at
the last prompt token unless stated.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from probes import behaviour as B
from probes.activations import ActivationSet, capture_items
from probes.common import (
    gap_where,
    header,
    layers_for,
    middle_best,
    requests_for,
    residual_norms,
    s_items,
    syco_rate,
)
from probes.config import EXPERIMENTS, ProbeConfig
from probes.data import Item, af_scenarios, eval_deploy_pairs, neutral_texts, sycophancy_factual
from probes.directions import (
    auroc,
    cosine,
    diff_of_means,
    grouped_split,
    plot_layer_curves,
    random_cosine_null,
    split_half_cosine,
    unit,
)
from probes.report import heatmap, md_table, write_result
from probes.steering import SteerSpec, direction_vector, generate_texts, perplexity, random_like, sweep

__all__ = ["EXPERIMENTS", "ProbeConfig", "run_e2", "run_experiment"]

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------- E2
def _concept_sets(
    m, cfg: ProbeConfig, layers: list[int]
) -> dict[str, tuple[ActivationSet, np.ndarray, np.ndarray]]:
    """S (sycophancy, answer token), E (eval context), A (training vs unmonitored cue), R (researcher cue)."""
    s = capture_items(m, s_items(cfg.n, cfg.seed), layers, "answer", cfg.batch_size)
    e = capture_items(m, eval_deploy_pairs(cfg.n, cfg.seed), layers, "last", cfg.batch_size)
    af = capture_items(
        m,
        af_scenarios(requests_for(cfg), n=max(4, cfg.n // 2), seed=cfg.seed, template=cfg.template),
        layers,
        "last",
        cfg.batch_size,
    )
    cue = (af.column("cue") == "training").astype(int)
    res = af.column("researcher").astype(int)
    return {
        "S": (s, s.column("label"), s.column("group")),
        "E": (e, e.column("label"), e.column("pair_id")),
        "A": (
            af,
            cue,
            np.array([f"{mm['request_id']}|{mm['assertion']}|{mm['researcher']}" for mm in af.meta]),
        ),
        "R": (af, res, np.array([f"{mm['request_id']}|{mm['assertion']}|{mm['cue']}" for mm in af.meta])),
    }


def _behaviour_pair(m, syc: list[Item], af: list[Item], spec, cfg: ProbeConfig) -> dict:
    ts = generate_texts(m, syc, spec, cfg.max_new_tokens, cfg.batch_size)
    ta = generate_texts(m, af, spec, cfg.af_max_new_tokens, cfg.batch_size)
    gap = gap_where(af, ta, cfg.n_boot, cfg.seed)
    return dict(sycophancy=syco_rate(syc, ts), gap=gap["gap"], compliance=B.compliance_rate(ta))


def run_e2(m, cfg: ProbeConfig) -> dict:
    """E2: geometry vs reliability, transfer matrix, layer x alpha sweep, steering cross-effects."""
    t0 = time.perf_counter()
    out = Path(cfg.out) / "e2"
    out.mkdir(parents=True, exist_ok=True)
    layers = layers_for(m, cfg)
    sets = _concept_sets(m, cfg, layers)
    for name, (aset, _, _) in sets.items():
        if name != "R":  # R reuses A's activations
            aset.save(out / f"acts_{name}.pt")
    names = list(sets)
    null = random_cosine_null(m.hidden_size, seed=cfg.seed)
    geometry, transfer = [], {}
    for layer in layers:
        dirs = {k: diff_of_means(a.acts[layer], y) for k, (a, y, _) in sets.items()}
        row = {"layer": layer}
        for i, a in enumerate(names):
            # stratify by the user's favoured A/B letter: the letter's identity cancels only in balanced halves
            strata = np.array([mm.get("view", "-") for mm in sets[a][0].meta])
            row[f"rel_{a}"] = split_half_cosine(
                sets[a][0].acts[layer], sets[a][1], sets[a][2], 20, cfg.seed, strata=strata
            )[0]
            for b in names[i + 1 :]:
                row[f"cos_{a}{b}"] = cosine(dirs[a], dirs[b])
        geometry.append(row)
        mat = np.zeros((len(names), len(names)))
        # stratified by the favoured A/B letter where present (see split_half_cosine)
        splits = {
            k: grouped_split(gr, 0.5, cfg.seed, strata=np.array([mm.get("view", "-") for mm in a.meta]))
            for k, (a, _, gr) in sets.items()
        }
        for i, a in enumerate(names):
            xa, ya = sets[a][0].acts[layer], sets[a][1]
            d = unit(diff_of_means(xa[~splits[a]], ya[~splits[a]]))
            for j, b in enumerate(names):
                xb, yb = sets[b][0].acts[layer], sets[b][1]
                mat[i, j] = auroc(xb[splits[b]] @ d, yb[splits[b]])
        transfer[layer] = mat
    best = middle_best({layer: float(transfer[layer][0, 0]) for layer in layers})  # sycophancy read best
    heatmap(transfer[best], names, names, out / "e2_transfer.png", f"E2: transfer AUROC, layer {best}")
    plot_layer_curves(
        {
            f"cos {k[4:]}": [dict(layer=r["layer"], cosine=r[k]) for r in geometry]
            for k in geometry[0]
            if k.startswith("cos_")
        }
        | {
            f"split-half {k[4:]}": [dict(layer=r["layer"], cosine=r[k]) for r in geometry]
            for k in geometry[0]
            if k.startswith("rel_")
        },
        out / "e2_geometry.png",
        metric="cosine",
        title=f"E2: cosines vs split-half reliability (null |cos|95 = {null:.2f})",
    )
    # steering: held-out behaviour sets
    syc = [it for it in sycophancy_factual(cfg.n, cfg.seed + 11) if not it.meta["claim_true"]]
    af = af_scenarios(
        requests_for(cfg), n=cfg.n, seed=cfg.seed + 12, assertions=("none",), template=cfg.template
    )
    norms = residual_norms(sets["E"][0])
    dirs_best = {k: diff_of_means(a.acts[best], y) for k, (a, y, _) in sets.items()}
    sweep_layers = sorted({best, layers[len(layers) // 2], layers[-1] if len(layers) > 1 else best})
    neutral = neutral_texts(8, cfg.seed)
    rows = sweep(
        m,
        syc,
        {L: diff_of_means(sets["S"][0].acts[L], sets["S"][1]) for L in sweep_layers},
        norms,
        cfg.alphas,
        lambda texts: syco_rate(syc, texts),
        neutral,
        ppl_tol=cfg.ppl_tol,
        max_new_tokens=cfg.max_new_tokens,
        seed=cfg.seed,
    )
    coherent = [r for r in rows if r["kind"] == "direction" and r["layer"] == best and r["coherent"]]
    alpha = max((abs(r["alpha"]) for r in coherent), default=min(abs(a) for a in cfg.alphas))
    base = _behaviour_pair(m, syc, af, None, cfg)
    cross = [dict(steer="none", alpha=0.0, **base, ppl=perplexity(m, neutral))]
    for name in ("S", "A", "E", "R"):
        for sign in (1, -1):
            vec = direction_vector(dirs_best[name], sign * alpha, norms[best])
            for kind, v in (("direction", vec), ("random", random_like(vec, cfg.seed + len(cross)))):
                if kind == "random" and sign == -1:
                    continue  # one matched-norm random control per direction
                spec = SteerSpec(best, v)
                res = _behaviour_pair(m, syc, af, spec, cfg)
                label = f"{'+' if sign > 0 else '-'}{name}" if kind == "direction" else f"random(|{name}|)"
                cross.append(dict(steer=label, alpha=sign * alpha, **res, ppl=perplexity(m, neutral, spec)))
    for r in cross:
        r["d_sycophancy"], r["d_gap"] = r["sycophancy"] - base["sycophancy"], r["gap"] - base["gap"]
        r["coherent"] = r["ppl"] <= cfg.ppl_tol * cross[0]["ppl"]
    _plot_sweep(rows, out / "e2_sweep.png")
    g_best = next(r for r in geometry if r["layer"] == best)
    indist = {
        f"{a}{b}": _geometry_status(g_best, a, b, null) for i, a in enumerate(names) for b in names[i + 1 :]
    }
    wall = time.perf_counter() - t0
    result = dict(
        experiment="e2",
        config=asdict(cfg),
        layers=layers,
        probe_layer=best,
        random_cos_null95=null,
        geometry=geometry,
        transfer={int(k): v for k, v in transfer.items()},
        transfer_names=names,
        sweep=rows,
        steer_alpha=alpha,
        cross_effects=cross,
        indistinguishable_at_probe_layer=indist,
        wall_seconds=round(wall, 1),
    )
    report = header("E2: sycophancy vs scheming: geometry, transfer, steering cross-effects", m, cfg, wall)
    report += (
        "Concept sets: S = sycophancy (answer token: agree with the user's wrong claim / stated view vs not), "
        "E = evaluation vs deployment context, A = training vs unmonitored cue, R = researcher cue vs none.\n\n"
    )
    report += f"## Cosines between diff-of-means directions vs split-half reliability (random |cos| 95th pct = {null:.3f})\n\n"
    report += md_table(geometry, digits=2)
    report += f"\n## Cross-probe transfer AUROC at layer {best} (rows trained on, columns evaluated on)\n\n"
    report += md_table(
        [
            dict(trained_on=a, **{b: float(transfer[best][i, j]) for j, b in enumerate(names)})
            for i, a in enumerate(names)
        ],
        digits=2,
    )
    report += (
        f"\nGeometry verdict at layer {best} (unreliable: a direction's split-half cosine is below the random null; "
        f"indistinguishable: |cos| within 0.1 of the lower split-half reliability; else distinct): {indist}\n"
    )
    report += (
        "\n## Steering sweep: sycophancy direction, metric = sycophancy rate (alpha x mean residual norm)\n\n"
    )
    report += md_table(rows, ["layer", "alpha", "kind", "metric", "ppl", "coherent"])
    report += f"\n## Steering cross-effects at layer {best}, |alpha| = {alpha} (largest coherent alpha of the S sweep)\n\n"
    report += md_table(
        cross,
        ["steer", "alpha", "sycophancy", "d_sycophancy", "gap", "d_gap", "compliance", "ppl", "coherent"],
    )
    report += "\nPlots: e2_geometry.png, e2_transfer.png, e2_sweep.png.\n"
    write_result(out, "e2", result, report)
    return result


def _geometry_status(row: dict, a: str, b: str, null: float) -> str:
    """'unreliable' / 'indistinguishable' / 'distinct' for concepts a, b from one geometry row."""
    rel = min(row[f"rel_{a}"], row[f"rel_{b}"])
    if rel <= null:
        return "unreliable"
    return "indistinguishable" if abs(row[f"cos_{a}{b}"]) >= rel - 0.1 else "distinct"


def _plot_sweep(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    base = rows[0]["metric"]
    for layer in sorted({r["layer"] for r in rows if r["layer"] >= 0}):
        for kind, ls in (("direction", "-"), ("random", ":")):
            sel = sorted(
                (r for r in rows if r["layer"] == layer and r["kind"] == kind), key=lambda r: r["alpha"]
            )
            if sel:
                ax.plot(
                    [r["alpha"] for r in sel],
                    [r["metric"] for r in sel],
                    ls,
                    marker="o",
                    label=f"L{layer} {kind}",
                )
                for r in sel:
                    if not r["coherent"]:
                        ax.plot(r["alpha"], r["metric"], "x", color="red", ms=9)
    ax.axhline(base, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("alpha (x mean residual norm)")
    ax.set_ylabel("metric")
    ax.set_title("steering sweep (red x = fails coherence guard)", fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_experiment(cfg: ProbeConfig) -> dict:
    """Load `cfg.model` and run `cfg.experiment`."""
    from latent import load_model

    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    m = load_model(cfg.model, device=cfg.device)
    from probes.e1 import run_e1
    from probes.lora_studies import run_e3, run_organisms  # peft/trl load only for these two

    fn = {"e1": run_e1, "e2": run_e2, "e3": run_e3, "organisms": run_organisms}[cfg.experiment]
    return fn(m, cfg)
