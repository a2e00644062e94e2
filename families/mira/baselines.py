"""Peer diagnostics run on the same samples: the official `mira-score` package and `sbi`'s SBC/TARP/C2ST.

Heavy optional packages are imported inside each function, so importing this module is cheap and a
missing package fails at use with the install command.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import stats


def _require(module: str, pip_name: str):  # noqa: ANN202 - returns a module
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as err:
        raise ImportError(f"This baseline needs `{pip_name}`: pip install {pip_name}") from err


def official_mira(
    truth: np.ndarray | torch.Tensor,
    samples: np.ndarray | torch.Tensor,
    num_runs: int = 100,
    normalize: bool = True,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Score and run-std per model from `mira_score.mira`, seeded through the global torch RNG.

    The global RNG state is restored afterwards (`fork_rng`), so calling this does not perturb the
    caller's randomness.
    """
    pkg = _require("mira_score", "mira-score")
    truth_t = torch.as_tensor(truth)
    samples_t = torch.as_tensor(samples)
    if samples_t.ndim == 3:
        samples_t = samples_t.unsqueeze(0)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        score, std = pkg.mira(
            truth_t,
            samples_t,
            num_runs=num_runs,
            norm=normalize,
            disable_tqdm=True,
            device=torch.device("cpu"),
        )
    return score.numpy(), std.numpy()


def sbc_ks(truth: np.ndarray, samples: np.ndarray) -> tuple[float, float]:
    """Simulation-based calibration with sbi: marginal rank statistics of the truth among samples.

    Returns the largest per-dimension Kolmogorov-Smirnov distance of the ranks from uniform
    (0 = calibrated) and the smallest per-dimension p-value from `sbi.diagnostics`.
    `samples` has shape (T, S, q).
    """
    sbc = _require("sbi.diagnostics.sbc", "sbi")
    thetas = torch.as_tensor(truth, dtype=torch.float32)
    post = torch.as_tensor(samples, dtype=torch.float32).transpose(0, 1)  # (S, T, q) as sbi expects
    xs = torch.zeros(thetas.shape[0], 1)  # marginal ranks never look at x
    # sbi's public run_sbc needs a posterior object to sample; its ranking step takes samples directly
    ranks = sbc._run_sbc(thetas, xs, post, reduce_fns="marginals", show_progress_bar=False)
    num_samples = post.shape[0]
    pvals = sbc.check_uniformity_frequentist(ranks, num_samples)
    ks = [stats.kstest(r.numpy(), stats.uniform(loc=0, scale=num_samples).cdf).statistic for r in ranks.T]
    return float(max(ks)), float(pvals.min())


def tarp_atc(truth: np.ndarray, samples: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """TARP expected-coverage test with sbi: (ATC, KS p-value). ATC > 0 over-, < 0 under-dispersed."""
    tarp = _require("sbi.diagnostics.tarp", "sbi")
    thetas = torch.as_tensor(truth, dtype=torch.float32)
    post = torch.as_tensor(samples, dtype=torch.float32).transpose(0, 1)  # (S, T, q)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        refs = tarp.get_tarp_references(thetas)
    ecp, alpha = tarp._run_tarp(post, thetas, refs, z_score_theta=True)
    atc, pval = tarp.check_tarp(ecp, alpha)
    return float(atc), float(pval)


def joint_c2st(x: np.ndarray, truth: np.ndarray, samples: np.ndarray, seed: int = 0) -> float:
    """Classifier two-sample test (sbi, random forest) between (x, theta*) and (x, theta ~ q(.|x)).

    Accuracy 0.5 means indistinguishable. Because x is part of the input, a candidate that ignores
    x (the prior) is caught, which MIRA, SBC and TARP cannot do. The two classes use disjoint halves
    of the truths: if both held the same x_t, the forest would memorise x and score below chance.
    """
    metrics = _require("sbi.utils.metrics", "sbi")
    x = np.asarray(x, dtype=np.float32).reshape(len(truth), -1)
    half = len(truth) // 2
    if half < 5:
        raise ValueError(f"joint C2ST needs at least 10 truths, got {len(truth)}.")
    one_draw = np.asarray(samples)[half : 2 * half, 0, :]  # one candidate draw per condition
    real = torch.as_tensor(np.concatenate([x[:half], truth[:half]], axis=1), dtype=torch.float32)
    fake = torch.as_tensor(np.concatenate([x[half : 2 * half], one_draw], axis=1), dtype=torch.float32)
    return float(metrics.c2st(real, fake, seed=seed, n_folds=5))
