"""LDM demo: KalmanSSL on moving-dot videos, SSL objectives on sklearn digits, ICA as LDM.

Run: `python -m families.ldm.demo` (full) or `--quick` (seconds). Prints three tables (mean +- std over
seeds) and writes results.json into --out.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from latent.args import UsageError

from ..demo_cli import demo_config, finish_demo, run_demo
from .baselines import pykalman_features, reference_vicreg
from .config import KalmanSSLConfig
from .data import augment_digits, dot_motion, ica_mixture
from .model import LDM, KalmanSSL, ica_loss


def probe_r2(train_feat: np.ndarray, train_y: np.ndarray, test_feat: np.ndarray, test_y: np.ndarray) -> float:
    """R^2 of a ridge linear probe (fit on train, scored on test), averaged over target dims."""
    from sklearn.linear_model import Ridge

    probe = Ridge(alpha=1e-3).fit(
        train_feat.reshape(-1, train_feat.shape[-1]), train_y.reshape(-1, train_y.shape[-1])
    )
    return float(
        probe.score(test_feat.reshape(-1, test_feat.shape[-1]), test_y.reshape(-1, test_y.shape[-1]))
    )


def amari_index(unmixing: np.ndarray, mixing: np.ndarray) -> float:
    """0 for a perfect separation (W M a scaled permutation), up to 1 for none."""
    p = np.abs(unmixing @ mixing)
    k = p.shape[0]
    rows = (p.sum(1) / p.max(1) - 1).sum()
    cols = (p.sum(0) / p.max(0) - 1).sum()
    return float((rows + cols) / (2 * k * (k - 1)))


# --- 1. moving dot -------------------------------------------------------------------------------
def _mlp(inp: int, hidden: int, out: int) -> nn.Module:
    return nn.Sequential(
        nn.Linear(inp, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, out)
    )


def run_dot(seed: int, quick: bool) -> dict[str, float]:
    """KalmanSSL vs PCA+pykalman vs AE+pykalman vs VICReg (temporal pairs) on DotMotion."""
    torch.manual_seed(seed)
    n_train, n_test, steps = (8, 4, 10) if quick else (120, 60, 30)
    iters = 5 if quick else 150
    xtr, ptr = dot_motion(n_train, steps, seed=seed)
    xte, pte = dot_motion(n_test, steps, seed=1000 + seed)
    res: dict[str, float] = {}
    # KalmanSSL: ours (learned C, log-det entropy, L=4) and the reference configuration (C = I, stop-gradient)
    configs = {
        "kalmanssl": KalmanSSLConfig(input_size=100, hidden_size=64, latent_size=4, state_size=2),
        "kalmanssl_official": KalmanSSLConfig(
            input_size=100,
            hidden_size=64,
            latent_size=2,
            state_size=2,
            observation="identity",
            entropy="stopgrad",
        ),
    }
    for name, cfg in configs.items():
        torch.manual_seed(seed)
        model = KalmanSSL(cfg)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        for _ in range(iters):
            loss = model.loss(xtr[torch.randint(0, n_train, (16,))])
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            otr, ote = model(xtr), model(xte)
        for key, suffix in (("filtered_mean", "r2"), ("predicted_mean", "r2_pred")):
            res[f"{name}_{suffix}"] = probe_r2(otr[key].numpy(), ptr.numpy(), ote[key].numpy(), pte.numpy())
        res[f"{name}_nll"] = -ote["loglik"].mean().item() / cfg.latent_size  # per pseudo-observation dim
    # no learning at all: a linear probe on the raw pixels, and on PCA(4) features without a filter
    flat_tr, flat_te = xtr.reshape(n_train, steps, 100).numpy(), xte.reshape(n_test, steps, 100).numpy()
    res["raw_r2"] = probe_r2(flat_tr, ptr.numpy(), flat_te, pte.numpy())
    # PCA + pykalman
    from sklearn.decomposition import PCA

    pca = PCA(4, random_state=seed).fit(xtr.reshape(-1, 100).numpy())
    ftr = pca.transform(xtr.reshape(-1, 100).numpy()).reshape(n_train, steps, 4)
    fte = pca.transform(xte.reshape(-1, 100).numpy()).reshape(n_test, steps, 4)
    str_, ste, ll = pykalman_features(ftr, fte, state_size=2, em_iters=1 if quick else 5, seed=seed)
    res["pca_r2"] = probe_r2(ftr, ptr.numpy(), fte, pte.numpy())
    res["pca_kf_r2"] = probe_r2(str_, ptr.numpy(), ste, pte.numpy())
    res["pca_kf_nll"] = -ll / 4
    # autoencoder + pykalman
    enc, dec = _mlp(100, 64, 4), _mlp(4, 64, 100)
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=3e-3)
    frames = xtr.reshape(-1, 100)
    for _ in range(iters * 2):
        batch = frames[torch.randint(0, len(frames), (256,))]
        loss = (dec(enc(batch)) - batch).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        atr, ate = enc(xtr).numpy(), enc(xte).numpy()
    str_, ste, ll = pykalman_features(atr, ate, state_size=2, em_iters=1 if quick else 5, seed=seed)
    res["ae_kf_r2"] = probe_r2(str_, ptr.numpy(), ste, pte.numpy())
    res["ae_kf_nll"] = -ll / 4
    # VICReg with temporal neighbours as the two views (pytorch-metric-learning loss)
    enc = _mlp(100, 64, 4)
    opt = torch.optim.Adam(enc.parameters(), lr=3e-3)
    for _ in range(iters * 2):
        i, t = torch.randint(0, n_train, (256,)), torch.randint(0, steps - 1, (256,))
        loss = reference_vicreg(enc(xtr[i, t]), enc(xtr[i, t + 1]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        res["vicreg_r2"] = probe_r2(enc(xtr).numpy(), ptr.numpy(), enc(xte).numpy(), pte.numpy())
    return res


# --- 2. digits SSL -------------------------------------------------------------------------------
def run_digits(seed: int, quick: bool) -> dict[str, float]:
    """Linear-probe accuracy of an MLP encoder trained with each objective (same seed, same batches)."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    data = load_digits()
    x = torch.tensor(data.data / 16.0, dtype=torch.float32)
    y = data.target
    order = np.random.default_rng(seed).permutation(len(x))[: 400 if quick else len(x)]
    tr, te = order[: int(0.75 * len(order))], order[int(0.75 * len(order)) :]
    objectives = {
        "random_init": None,
        "ldm_vicreg": LDM.vicreg(),
        "pml_vicreg": reference_vicreg,
        "ldm_simclr": LDM.simclr(0.5),
        # No trained pml_ntxent row: pytorch-metric-learning's NTXentLoss took 7.9 s per step at batch 256
        # here (ldm_simclr: 7.5 ms), and tests/families/test_ldm.py shows the two losses agree on a batch.
        "ldm_byol": LDM.byol(),
        "ldm_gauss_logdet": LDM.gauss_logdet(precision=1.0),
    }
    from sklearn.decomposition import PCA

    res = {}
    for name, feats in (
        ("raw_pixels", lambda a: a),
        ("pca_32", PCA(32, random_state=seed).fit(x[tr].numpy()).transform),
    ):
        clf = LogisticRegression(max_iter=100 if quick else 500).fit(feats(x[tr].numpy()), y[tr])
        res[name] = float(clf.score(feats(x[te].numpy()), y[te]))
    for name, objective in objectives.items():
        torch.manual_seed(seed)
        enc = _mlp(64, 128, 32)
        pred = _mlp(32, 64, 32) if name == "ldm_byol" else None
        params = list(enc.parameters()) + (list(pred.parameters()) if pred is not None else [])
        opt = torch.optim.Adam(params, lr=1e-3)
        gen = torch.Generator().manual_seed(seed)
        for _ in range(0 if objective is None else (5 if quick else 300)):
            batch = x[tr][torch.randint(0, len(tr), (256,), generator=gen)]
            z1, z2 = enc(augment_digits(batch, gen)), enc(augment_digits(batch, gen))
            if pred is not None:  # SimSiam-style symmetric stop-gradient (no EMA target)
                loss = 0.5 * (objective(pred(z1), z2) + objective(pred(z2), z1))
            else:
                loss = objective(z1, z2)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            ftr, fte = enc(x[tr]).numpy(), enc(x[te]).numpy()
        clf = LogisticRegression(max_iter=100 if quick else 500).fit(ftr, y[tr])
        res[name] = float(clf.score(fte, y[te]))
    return res


# --- 3. ICA -------------------------------------------------------------------------------------
def run_ica(seed: int, quick: bool) -> dict[str, float]:
    """Amari index of LDM-ICA (Laplace prior + log|det W|, Adam) and sklearn FastICA."""
    from sklearn.decomposition import FastICA

    x, mixing = ica_mixture(500 if quick else 2000, 3, seed=seed)
    torch.manual_seed(seed)
    xt = torch.tensor(x, dtype=torch.float32)
    weight = nn.Parameter(torch.eye(3) + 0.1 * torch.randn(3, 3))
    opt = torch.optim.Adam([weight], lr=0.02)
    for _ in range(50 if quick else 800):
        loss = ica_loss(weight, xt)
        opt.zero_grad()
        loss.backward()
        opt.step()
    fast = FastICA(3, random_state=seed, whiten="unit-variance", max_iter=1000).fit(x)
    return {
        "ldm_ica": amari_index(weight.detach().numpy(), mixing),
        "fastica": amari_index(fast.components_, mixing),
    }


def _cell(values: list[float], scale: float = 1.0, digits: int = 3) -> str:
    arr = scale * np.asarray(values)
    return f"{arr.mean():.{digits}f} +- {arr.std():.{digits}f}"


def summarize(dot: list[dict], digits: list[dict], ica: list[dict]) -> str:
    """Markdown tables (mean +- std over seeds)."""
    lines = ["### Moving dot (10x10 frames, noise 0.1): linear-probe R^2 of the dot position", ""]
    lines += [
        "| method | R^2 filtered/features | R^2 one-step predicted | predictive NLL per dim (own space) |",
        "|---|---|---|---|",
    ]
    rows = [
        ("KalmanSSL (learned C, log-det entropy, L=4)", "kalmanssl", True),
        ("KalmanSSL, reference configuration (C = I, stop-gradient, L=2)", "kalmanssl_official", True),
        ("raw pixels (no learning)", "raw", False),
        ("PCA(4), no filter", "pca", False),
        ("PCA(4) + pykalman", "pca_kf", False),
        ("AE(4) + pykalman", "ae_kf", False),
    ]
    for label, key, has_pred in rows:
        pred = _cell([r[f"{key}_r2_pred"] for r in dot]) if has_pred else "-"
        nll = _cell([r[f"{key}_nll"] for r in dot], digits=2) if f"{key}_nll" in dot[0] else "-"
        lines.append(f"| {label} | {_cell([r[f'{key}_r2'] for r in dot])} | {pred} | {nll} |")
    lines.append(f"| VICReg temporal pairs (PML loss) | {_cell([r['vicreg_r2'] for r in dot])} | - | - |")
    lines += [
        "",
        "### sklearn digits: linear-probe test accuracy (%) of an MLP encoder",
        "",
        "| objective | accuracy |",
        "|---|---|",
    ]
    for name in digits[0]:
        lines.append(f"| {name} | {_cell([r[name] for r in digits], 100, 1)} |")
    lines += [
        "",
        "### ICA (3 Laplace sources): Amari index (0 = perfect)",
        "",
        "| method | Amari index |",
        "|---|---|",
    ]
    lines.append(f"| LDM-ICA (Laplace prior + log|det W|) | {_cell([r['ldm_ica'] for r in ica], digits=4)} |")
    lines.append(f"| sklearn FastICA | {_cell([r['fastica'] for r in ica], digits=4)} |")
    return "\n".join(lines)


@dataclass
class LdmFlags:
    """The ldm demo's own flags (next to the shared --quick, --seeds, --out)."""

    parts: str = field(default="dot,digits,ica", metadata={"help": "comma list of dot, digits, ica"})


LdmDemo = demo_config("ldm", LdmFlags, seeds=3)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (`latentworks family ldm`)."""
    return run_demo(LdmDemo, __doc__.splitlines()[0], _demo, argv)


def _demo(args: Any) -> int:
    seeds = args.seeds
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts or not parts <= {"dot", "digits", "ica"}:
        raise UsageError(f"--parts must be a non-empty comma list of dot, digits, ica; got {args.parts!r}")
    torch.set_num_threads(1)
    start = time.perf_counter()
    part_seconds: dict[str, float] = {}

    def timed(name: str, fn) -> list[dict]:
        if name not in parts:
            return []
        t0 = time.perf_counter()
        rows = [fn(s, args.quick) for s in range(seeds)]
        part_seconds[name] = round(time.perf_counter() - t0, 1)
        print(f"part {name}: {part_seconds[name]:.0f} s for {seeds} seed(s)", flush=True)
        return rows

    dot = timed("dot", run_dot)
    dig = timed("digits", run_digits)
    ica = timed("ica", run_ica)
    table = (
        summarize(dot, dig, ica)
        if dot and dig and ica
        else json.dumps({"dot": dot, "digits": dig, "ica": ica}, indent=1)
    )
    table += f"\n\nseconds per part: {part_seconds}"
    payload = {"dot": dot, "digits": dig, "ica": ica, "part_seconds": part_seconds}
    finish_demo(args, table, payload, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
