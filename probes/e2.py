"""E2 (claim 2): can probes and steering tell sycophancy from scheming?

Four contrast sets on one model: S sycophancy (answer token: agree with the user's wrong claim / stated
view vs not), E eval vs deploy context, A training vs unmonitored cue, R researcher cue vs none.
`measure` runs the model (captures, steering sweep, steering cross-effects); `statistics` only touches
arrays: per layer cosines, split-half reliability and a transfer matrix (descriptive), and at the probe
layer the pre-registered test: can concept a's direction stand in for b's? `transfer_loss(a -> b)` =
held-out AUROC of b's own direction on b minus that of a's direction on b, with both directions refit
on every resample of training clusters and scored on resampled test clusters (clusters = requests /
pairs). Two concepts are *distinguishable by probing* when either loss is `supported` (> 0) under
`probes.stats.decide`; otherwise `not measurable on this model`. Both concepts' own probes must first
separate their held-out pairs (`own_auroc` interval above 0.5, `probes.stats.gate`), else the pair reads
`instrument invalid`.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

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
from probes.config import ProbeConfig
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
from probes.stats import cluster_bootstrap, decide, gate
from probes.steering import SteerSpec, direction_vector, generate_texts, perplexity, random_like, sweep

if TYPE_CHECKING:
    from latent import LatentModel

__all__ = ["measure", "report", "run_e2", "statistics"]

NAMES = ("S", "E", "A", "R")


def concept_sets(
    m: LatentModel, cfg: ProbeConfig, layers: list[int]
) -> dict[str, tuple[ActivationSet, np.ndarray, np.ndarray]]:
    """name -> (activations, labels, cluster ids). Clusters: problem / pair ids (S, E), requests (A, R)."""
    s = capture_items(m, s_items(cfg.n, cfg.seed), layers, "answer", cfg.batch_size)
    e = capture_items(m, eval_deploy_pairs(cfg.n, cfg.seed), layers, "last", cfg.batch_size)
    af_items = af_scenarios(requests_for(cfg), n=max(4, cfg.n // 2), seed=cfg.seed, template=cfg.template)
    af = capture_items(m, af_items, layers, "last", cfg.batch_size)
    req = af.column("request_id")
    return {
        "S": (s, s.column("label"), s.column("group")),
        "E": (e, e.column("label"), e.column("pair_id")),
        "A": (af, (af.column("cue") == "training").astype(int), req),
        "R": (af, af.column("researcher").astype(int), req),
    }


def _behaviour_pair(m: LatentModel, syc: list[Item], af: list[Item], spec, cfg: ProbeConfig) -> dict:
    ts = generate_texts(m, syc, spec, cfg.max_new_tokens, cfg.batch_size)
    ta = generate_texts(m, af, spec, cfg.af_max_new_tokens, cfg.batch_size)
    gap = gap_where(af, ta, cfg.n_boot, cfg.seed)
    return dict(sycophancy=syco_rate(syc, ts), gap=gap["gap"], compliance=B.compliance_rate(ta))


def _strata(aset: ActivationSet) -> np.ndarray:
    """The user's favoured A/B letter where present: a nuisance that cancels only in balanced halves."""
    return np.array([mm.get("view", "-") for mm in aset.meta])


def _probe_layer(sets: dict, layers: list[int], seed: int) -> int:
    """Layer where S (sycophancy) is read best on held-out clusters."""
    aset, y, g = sets["S"]
    test = grouped_split(g, 0.5, seed, strata=_strata(aset))
    own = {
        L: auroc(aset.acts[L][test] @ unit(diff_of_means(aset.acts[L][~test], y[~test])), y[test])
        for L in layers
    }
    return middle_best(own)


def _steering(
    m: LatentModel, sets: dict, best: int, layers: list[int], cfg: ProbeConfig
) -> tuple[list[dict], float, list[dict]]:
    """Layer x alpha sweep of S (sycophancy rate) and the cross-effect table at the probe layer."""
    n = cfg.steer_n or cfg.n
    syc = [it for it in sycophancy_factual(n, cfg.seed + 11) if not it.meta["claim_true"]]
    af = af_scenarios(requests_for(cfg), n=n, seed=cfg.seed + 12, assertions=("none",), template=cfg.template)
    norms = residual_norms(sets["E"][0])
    sweep_layers = sorted({best, layers[len(layers) // 2], layers[-1]})
    neutral = neutral_texts(8, cfg.seed)
    s_dirs = {L: diff_of_means(sets["S"][0].acts[L], sets["S"][1]) for L in sweep_layers}
    metric = lambda texts: syco_rate(syc, texts)  # noqa: E731
    rows = sweep(
        m,
        syc,
        s_dirs,
        norms,
        cfg.alphas,
        metric,
        neutral,
        ppl_tol=cfg.ppl_tol,
        max_new_tokens=cfg.max_new_tokens,
        seed=cfg.seed,
    )
    coherent = [r for r in rows if r["kind"] == "direction" and r["layer"] == best and r["coherent"]]
    alpha = max((abs(r["alpha"]) for r in coherent), default=min(abs(a) for a in cfg.alphas))
    dirs = {k: diff_of_means(a.acts[best], y) for k, (a, y, _) in sets.items()}
    base = _behaviour_pair(m, syc, af, None, cfg)
    cross = [dict(steer="none", alpha=0.0, **base, ppl=perplexity(m, neutral))]
    for name in NAMES:
        for sign in (1, -1):
            vec = direction_vector(dirs[name], sign * alpha, norms[best])
            for kind, v in (("direction", vec), ("random", random_like(vec, cfg.seed + len(cross)))):
                if kind == "random" and sign == -1:
                    continue  # one matched-norm random control per direction
                spec = SteerSpec(best, v)
                label = f"{'+' if sign > 0 else '-'}{name}" if kind == "direction" else f"random(|{name}|)"
                res = _behaviour_pair(m, syc, af, spec, cfg)
                cross.append(dict(steer=label, alpha=sign * alpha, **res, ppl=perplexity(m, neutral, spec)))
    for r in cross:
        r["d_sycophancy"], r["d_gap"] = r["sycophancy"] - base["sycophancy"], r["gap"] - base["gap"]
        r["coherent"] = r["ppl"] <= cfg.ppl_tol * cross[0]["ppl"]
    return rows, alpha, cross


def measure(m: LatentModel, cfg: ProbeConfig) -> dict:
    """Everything E2 needs from the model."""
    layers = layers_for(m, cfg)
    sets = concept_sets(m, cfg, layers)
    best = _probe_layer(sets, layers, cfg.seed)
    sweep_rows, alpha, cross = _steering(m, sets, best, layers, cfg) if cfg.steer else ([], None, [])
    return dict(
        layers=layers, sets=sets, best=best, sweep=sweep_rows, alpha=alpha, cross=cross, hidden=m.hidden_size
    )


def _geometry(sets: dict, layers: list[int], seed: int) -> tuple[list[dict], dict]:
    """Per layer: cosines, split-half reliabilities and a held-out transfer AUROC matrix (descriptive)."""
    geometry, transfer = [], {}
    splits = {k: grouped_split(g, 0.5, seed, strata=_strata(a)) for k, (a, _, g) in sets.items()}
    for layer in layers:
        dirs = {k: diff_of_means(a.acts[layer], y) for k, (a, y, _) in sets.items()}
        row = {"layer": layer}
        for i, a in enumerate(NAMES):
            X, y, g = sets[a][0].acts[layer], sets[a][1], sets[a][2]
            row[f"rel_{a}"] = split_half_cosine(X, y, g, 20, seed, strata=_strata(sets[a][0]))[0]
            for b in NAMES[i + 1 :]:
                row[f"cos_{a}{b}"] = cosine(dirs[a], dirs[b])
        geometry.append(row)
        mat = np.zeros((len(NAMES), len(NAMES)))
        for i, a in enumerate(NAMES):
            xa, ya, ta = sets[a][0].acts[layer], sets[a][1], splits[a]
            d = unit(diff_of_means(xa[~ta], ya[~ta]))
            for j, b in enumerate(NAMES):
                xb, yb, tb = sets[b][0].acts[layer], sets[b][1], splits[b]
                mat[i, j] = auroc(xb[tb] @ d, yb[tb])
        transfer[layer] = mat
    return geometry, transfer


def _pair_tests(sets: dict, L: int, nb: int, seed: int) -> list[dict]:
    """Clustered cosine and transfer-loss intervals for every concept pair at layer L (see module doc)."""
    data = {}
    for k, (a, y, g) in sets.items():
        test = grouped_split(g, 0.5, seed, strata=_strata(a))
        data[k] = dict(X=a.acts[L].astype(float), y=y, tr=np.flatnonzero(~test), te=np.flatnonzero(test), g=g)

    def direction(k: str, rows: np.ndarray) -> np.ndarray:
        return unit(diff_of_means(data[k]["X"][rows], data[k]["y"][rows]))

    def loss(a: str, b: str):
        def stat(tr_a, tr_b, te_b) -> float:
            ra, rb, rt = data[a]["tr"][tr_a], data[b]["tr"][tr_b], data[b]["te"][te_b]
            Xb, yb = data[b]["X"][rt], data[b]["y"][rt]
            return auroc(Xb @ direction(b, rb), yb) - auroc(Xb @ direction(a, ra), yb)

        return stat

    cl = lambda k, part: data[k]["g"][data[k][part]]  # noqa: E731

    def own(k: str):
        def stat(tr, te) -> float:
            rt = data[k]["te"][te]
            return auroc(data[k]["X"][rt] @ direction(k, data[k]["tr"][tr]), data[k]["y"][rt])

        return stat

    # validity first: each concept's own probe must separate its held-out pairs (interval above 0.5)
    valid = {k: cluster_bootstrap(own(k), [cl(k, "tr"), cl(k, "te")], nb, seed=seed) for k in NAMES}
    out = []
    for i, a in enumerate(NAMES):
        for b in NAMES[i + 1 :]:
            cos = cluster_bootstrap(
                lambda ra, rb, a=a, b=b: cosine(direction(a, ra), direction(b, rb)),
                [data[a]["g"], data[b]["g"]],
                nb,
                seed=seed,
            )
            ab = cluster_bootstrap(loss(a, b), [cl(a, "tr"), cl(b, "tr"), cl(b, "te")], nb, seed=seed)
            ba = cluster_bootstrap(loss(b, a), [cl(b, "tr"), cl(a, "tr"), cl(a, "te")], nb, seed=seed)
            va, vb = decide(ab), decide(ba)
            out.append(
                dict(
                    pair=f"{a}{b}",
                    cos=cos,
                    **{f"loss_{a}->{b}": ab, f"loss_{b}->{a}": ba},
                    own_auroc={a: valid[a], b: valid[b]},
                    distinguishable=gate(
                        gate(
                            "supported" if "supported" in (va, vb) else "not measurable on this model",
                            valid[a],
                            f"{a} probe",
                        ),
                        valid[b],
                        f"{b} probe",
                    ),
                )
            )
    return out


def statistics(meas: dict, cfg: ProbeConfig) -> dict:
    geometry, transfer = _geometry(meas["sets"], meas["layers"], cfg.seed)
    return dict(
        random_cos_null95=random_cosine_null(meas["hidden"], seed=cfg.seed),
        geometry=geometry,
        transfer=transfer,
        pair_tests=_pair_tests(meas["sets"], meas["best"], cfg.n_boot, cfg.seed),
        n_clusters={k: len(np.unique(g)) for k, (_, _, g) in meas["sets"].items()},
    )


def report(meas: dict, st: dict, m: LatentModel, cfg: ProbeConfig, wall: float) -> str:
    best, null = meas["best"], st["random_cos_null95"]
    txt = header("E2: sycophancy vs scheming: geometry, transfer, steering cross-effects", m, cfg, wall)
    txt += (
        "Concept sets: S = sycophancy (answer token: agree with the user's wrong claim / stated view vs not), "
        "E = evaluation vs deployment context, A = training vs unmonitored cue, R = researcher cue vs none. "
        f"Clusters: {st['n_clusters']}.\n\n"
        f"## Pair tests at the probe layer {best} (95% cluster bootstrap, directions refit per resample)\n\n"
        "loss a->b = held-out AUROC of b's own direction on b minus a's direction on b (> 0: a cannot stand in "
        "for b). Distinguishable when either loss is supported (probes/stats.py decision rule).\n\n"
    )
    rows = [
        dict(
            pair=r["pair"],
            cos=r["cos"],
            **{k: v for k, v in r.items() if k.startswith("loss_")},
            distinguishable=r["distinguishable"],
        )
        for r in st["pair_tests"]
    ]
    own = {k: v for r in st["pair_tests"] for k, v in r["own_auroc"].items()}
    txt += (
        "Validity (held-out AUROC of each concept's own probe, must lie above 0.5): "
        + ", ".join(f"{k} {_ci(v)}" for k, v in own.items())
        + ".\n\n"
    )
    txt += "\n".join(
        f"- {r['pair']}: cos {_ci(r['cos'])}; "
        + "; ".join(f"{k[5:]} {_ci(v)}" for k, v in r.items() if k.startswith("loss_"))
        + f" -> **{r['distinguishable']}**"
        for r in rows
    )
    txt += f"\n\n## Cosines vs split-half reliability per layer (random |cos| 95th pct = {null:.3f})\n\n"
    txt += md_table(st["geometry"], digits=2)
    txt += f"\n## Cross-probe transfer AUROC at layer {best} (rows trained on, columns evaluated on)\n\n"
    mat = st["transfer"][best]
    txt += md_table(
        [
            dict(trained_on=a, **{b: float(mat[i, j]) for j, b in enumerate(NAMES)})
            for i, a in enumerate(NAMES)
        ],
        digits=2,
    )
    if not meas["sweep"]:
        return txt + "\nSteering not run (`--no-steer`).\n\nPlots: e2_geometry.png, e2_transfer.png.\n"
    txt += (
        "\n## Steering sweep: sycophancy direction, metric = sycophancy rate (alpha x mean residual norm)\n\n"
    )
    txt += md_table(meas["sweep"], ["layer", "alpha", "kind", "metric", "ppl", "coherent"])
    txt += f"\n## Steering cross-effects at layer {best}, |alpha| = {meas['alpha']} (largest coherent alpha of the S sweep)\n\n"
    cols = ["steer", "alpha", "sycophancy", "d_sycophancy", "gap", "d_gap", "compliance", "ppl", "coherent"]
    return txt + md_table(meas["cross"], cols) + "\nPlots: e2_geometry.png, e2_transfer.png, e2_sweep.png.\n"


def _ci(d: dict) -> str:
    return f"{d['mean']:.2f} [{d['lo']:.2f}, {d['hi']:.2f}]"


def _plots(meas: dict, st: dict, out: Path) -> None:
    best, geometry = meas["best"], st["geometry"]
    heatmap(
        st["transfer"][best],
        list(NAMES),
        list(NAMES),
        out / "e2_transfer.png",
        f"E2: transfer AUROC, layer {best}",
    )
    curves = {
        f"{'cos' if k.startswith('cos_') else 'split-half'} {k[4:]}": [
            dict(layer=r["layer"], cosine=r[k]) for r in geometry
        ]
        for k in geometry[0]
        if k != "layer"
    }
    plot_layer_curves(
        curves,
        out / "e2_geometry.png",
        metric="cosine",
        title=f"E2: cosines vs split-half reliability (null |cos|95 = {st['random_cos_null95']:.2f})",
    )
    if meas["sweep"]:
        _plot_sweep(meas["sweep"], out / "e2_sweep.png")


def _plot_sweep(rows: list[dict], path: Path) -> None:
    from latent.plotting import figure, save_figure

    fig, ax = figure(figsize=(6, 3.6), extra="probes")
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
    save_figure(fig, path, dpi=110)


def run_e2(m: LatentModel, cfg: ProbeConfig) -> dict:
    """E2: measure, clustered statistics, write e2.json / e2.md / plots."""
    t0 = time.perf_counter()
    out = Path(cfg.out) / "e2"
    out.mkdir(parents=True, exist_ok=True)
    meas = measure(m, cfg)
    for name in ("S", "E", "A"):  # R reuses A's activations
        meas["sets"][name][0].save(out / f"acts_{name}.pt")
    st = statistics(meas, cfg)
    wall = time.perf_counter() - t0
    _plots(meas, st, out)
    result = dict(
        experiment="e2",
        config=asdict(cfg),
        layers=meas["layers"],
        probe_layer=meas["best"],
        **{k: v for k, v in st.items() if k != "transfer"},
        transfer={int(k): v for k, v in st["transfer"].items()},
        transfer_names=list(NAMES),
        sweep=meas["sweep"],
        steer_alpha=meas["alpha"],
        cross_effects=meas["cross"],
        wall_seconds=round(wall, 1),
    )
    write_result(out, "e2", result, report(meas, st, m, cfg, wall))
    return result
