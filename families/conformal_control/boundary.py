"""The boundary regime of conformal policy control: a safe policy whose own risk is close to alpha.

The guarantee E[L] <= alpha rests, as in conformal risk control, on the safe end of the beta scan
being acceptable. When the calibration data cannot certify even pi_0 (its bound (sum L_i + B) / (n + 1)
exceeds alpha), the search returns pi_0 uncertified. If pi_0 is deployed anyway, the oracle argument
loses exactly the event "the n + 1 points' own mean loss at pi_0 exceeds alpha", and the expected risk
is only bounded by alpha + delta_n with

    delta_n = E[(mean of n + 1 losses under pi_0 - alpha)_+]          (`fallback_excess`)

which is > 0 whenever pi_0 can lose, and shrinks as n grows if R(pi_0) < alpha. Abstaining (deploying
nothing, loss 0) when uncertified restores E[L] <= alpha. This module builds small Markov-chain problems
whose every sequence can be enumerated, so each calibration's realised risk is exact.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .data import MarkovChainPolicy
from .model import calibrate_beta


def fallback_excess(n_cal: int, safe_risk: float, alpha: float, loss_bound: float = 1.0) -> float:
    """delta_n = E[(B K / (n + 1) - alpha)_+] with K ~ Binomial(n + 1, R(pi_0) / B).

    Exact for indicator losses. For other losses in [0, B] it is an upper bound: a [0, B] variable is
    dominated in convex order by B times a Bernoulli with the same mean, and (mean - alpha)_+ is convex.
    """
    if n_cal < 1 or not 0.0 <= safe_risk <= loss_bound:
        raise ValueError(f"Need `n_cal` >= 1 and 0 <= `safe_risk` <= {loss_bound}, got {n_cal}, {safe_risk}.")
    k = np.arange(n_cal + 2)
    pmf = stats.binom.pmf(k, n_cal + 1, safe_risk / loss_bound)
    return float(pmf @ np.maximum(loss_bound * k / (n_cal + 1) - alpha, 0.0))


def safe_risk_upper_bound(cal_losses: np.ndarray, loss_bound: float = 1.0, confidence: float = 0.95) -> float:
    """One-sided upper confidence bound on R(pi_0) from calibration losses (Clopper-Pearson on L / B).

    Exact for indicator losses and conservative for other [0, B] losses by the same convex-order argument.
    """
    x = np.asarray(cal_losses, dtype=float) / loss_bound
    n = x.size
    k = x.sum()
    if k >= n:
        return loss_bound
    return float(loss_bound * stats.beta.ppf(confidence, k + 1, n - k))


@contextmanager
def quiet_model_logger() -> Iterator[None]:
    """The search warns on every uncertified calibration; thousands of repeats would flood the log."""
    log = logging.getLogger("families.conformal_control.model")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


@dataclass
class BoundaryProblem:
    """Two enumerable chains, a 0/1 loss, and alpha set so that R(pi_0) = ratio * alpha exactly."""

    safe: MarkovChainPolicy
    optimized: MarkovChainPolicy
    p0: np.ndarray  # (N,) pi_0 over every sequence
    pt: np.ndarray  # (N,) pi_t over every sequence
    loss: np.ndarray  # (N,) 0/1 loss of every sequence
    alpha: float
    safe_risk: float
    optimized_risk: float

    def risk_at(self, beta: float) -> float:
        """Exact E[L] under pi_beta by enumeration."""
        q = self.p0 if beta == 0.0 else (self.pt if math.isinf(beta) else np.minimum(self.pt, beta * self.p0))
        return float(q @ self.loss / q.sum())


def make_boundary_problem(
    seed: int, ratio: float = 0.9, safe_risk: float = 0.08, length: int = 4, vocab: int = 3
) -> BoundaryProblem:
    """Random chains over vocab**length sequences; the loss set leans toward high pi_t / pi_0.

    Sequences are ranked by a noisy log-ratio and marked as losses until pi_0's mass reaches about
    `safe_risk`; alpha is then R(pi_0) / ratio, so the safe policy sits at `ratio` of the tolerance.
    """
    if not 0.0 < ratio < 1.0:
        raise ValueError(f"`ratio` = R(pi_0) / alpha must lie in (0, 1), got {ratio}.")
    rng = np.random.default_rng(seed)
    safe = MarkovChainPolicy(
        rng.dirichlet(np.full(vocab, 2.0)), rng.dirichlet(np.full(vocab, 2.0), (length - 1, vocab))
    )
    opt = MarkovChainPolicy(
        rng.dirichlet(np.full(vocab, 0.5)), rng.dirichlet(np.full(vocab, 0.5), (length - 1, vocab))
    )
    xs = np.array(list(itertools.product(range(vocab), repeat=length)))
    p0, pt = np.exp(safe.log_prob(xs)), np.exp(opt.log_prob(xs))
    order = np.argsort(-(np.log(pt) - np.log(p0)) + rng.normal(0.0, 1.0, xs.shape[0]))
    k = int(np.searchsorted(np.cumsum(p0[order]), safe_risk)) + 1
    loss = np.zeros(xs.shape[0])
    loss[order[:k]] = 1.0
    r0 = float(p0 @ loss)
    return BoundaryProblem(safe, opt, p0, pt, loss, r0 / ratio, r0, float(pt @ loss))


def run_boundary(
    problem: BoundaryProblem, n_cal: int, trials: int, seed: int = 0, num_proposals: int = 500
) -> dict[str, float]:
    """Repeat calibration `trials` times; exact realised risk when uncertified runs deploy pi_0 or abstain.

    Returns means and standard errors of both readings, the share of certified runs, and alpha + delta_n.
    """
    p = problem
    rng = np.random.default_rng(seed)
    log_r = np.log(p.pt) - np.log(p.p0)
    sup = p.optimized.max_log_ratio_over(p.safe)
    size = p.p0.size
    fallback, abstain, certified = np.empty(trials), np.empty(trials), np.empty(trials, dtype=bool)
    with quiet_model_logger():
        for t in range(trials):
            cal = rng.choice(size, size=n_cal, p=p.p0)
            prop_s = rng.choice(size, size=num_proposals, p=p.p0)
            prop_o = rng.choice(size, size=num_proposals, p=p.pt)
            res = calibrate_beta(
                np.log(p.p0[cal]), np.log(p.pt[cal]), p.loss[cal], log_r[prop_s], log_r[prop_o],
                p.alpha, max_log_ratio=sup,
            )  # fmt: skip
            fallback[t] = p.risk_at(res.beta)
            certified[t] = res.certified
            abstain[t] = fallback[t] if res.certified else 0.0
    se = math.sqrt(trials)
    return {
        "n_cal": n_cal,
        "trials": trials,
        "alpha": p.alpha,
        "safe_risk": p.safe_risk,
        "optimized_risk": p.optimized_risk,
        "fallback_mean": float(fallback.mean()),
        "fallback_se": float(fallback.std(ddof=1) / se),
        "abstain_mean": float(abstain.mean()),
        "abstain_se": float(abstain.std(ddof=1) / se),
        "certified": float(certified.mean()),
        "alpha_plus_delta": p.alpha + fallback_excess(n_cal, p.safe_risk, p.alpha),
    }
