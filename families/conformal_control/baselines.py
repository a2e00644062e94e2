"""Baselines: standard conformal risk control and Learn-then-Test from `mapie`, and the textbook CRC rule.

All threshold rules take a loss matrix (n, G) whose columns are ordered from the safest parameter
(column 0) to the most aggressive one, and return the chosen column (-1 = nothing certified).
`mapie` is imported inside the functions, so importing this module stays cheap.
"""

from __future__ import annotations

import warnings

import numpy as np


def _check_losses(losses: np.ndarray, loss_bound: float) -> np.ndarray:
    losses = np.asarray(losses, dtype=float)
    if losses.ndim != 2 or losses.size == 0:
        raise ValueError(f"`losses` must be a non-empty (n, G) array, got shape {losses.shape}.")
    if not np.isfinite(losses).all() or losses.min() < 0 or losses.max() > loss_bound:
        raise ValueError(f"`losses` must be finite and lie in [0, {loss_bound}].")
    return losses


def crc_bounds(losses: np.ndarray, loss_bound: float = 1.0) -> np.ndarray:
    """(G,) CRC upper bounds (n * mean + B) / (n + 1), the unweighted case of the CPC bound."""
    losses = _check_losses(losses, loss_bound)
    n = losses.shape[0]
    return (losses.sum(axis=0) + loss_bound) / (n + 1)


def crc_textbook(losses: np.ndarray, alpha: float, loss_bound: float = 1.0) -> int:
    """Standard CRC's inf rule: the most aggressive column whose bound is <= alpha, wherever it is.

    Equivalent to scanning from the aggressive end; valid only for losses monotone in the parameter.
    """
    ok = np.flatnonzero(crc_bounds(losses, loss_bound) <= alpha)
    return int(ok[-1]) if ok.size else -1


def crc_mapie(losses: np.ndarray, alpha: float, loss_bound: float = 1.0) -> int:
    """CRC through `mapie.risk_control.methods` (get_r_hat_plus + find_best_predict_param).

    mapie infers the risk direction from the two ends of the bound curve and scans from the
    low-risk end, so on curves whose safe end has the lower bound it behaves like a fixed-sequence scan.
    """
    from mapie.risk_control.methods import find_best_predict_param, get_r_hat_plus

    losses = _check_losses(losses, loss_bound) / loss_bound  # mapie's CRC bound assumes B = 1
    lambdas = np.arange(losses.shape[1], dtype=float)
    _, r_hat_plus = get_r_hat_plus(losses, lambdas, method="crc", bound=None, delta=None, sigma_init=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "risk cannot be controlled" is reported through the index
        best = find_best_predict_param(lambdas, r_hat_plus, np.array([alpha / loss_bound]))
    idx = int(np.asarray(best).ravel()[0])
    return idx if r_hat_plus[idx] <= alpha / loss_bound else -1


def ltt_mapie(losses: np.ndarray, alpha: float, delta: float = 0.1, loss_bound: float = 1.0) -> int:
    """Learn-then-Test with mapie's Hoeffding-Bentkus p-values and fixed-sequence FWER control.

    Guarantees P(risk <= alpha) >= 1 - delta (a high-probability statement, stronger than CRC's
    expectation), scanning from the safe end; returns the most aggressive rejected column.
    """
    from mapie.risk_control import control_fwer
    from mapie.risk_control.methods import compute_hoeffding_bentkus_p_value

    losses = _check_losses(losses, loss_bound) / loss_bound
    if not 0 < delta < 1:
        raise ValueError(f"`delta` must be in (0, 1), got {delta}.")
    r_hat = losses.mean(axis=0)
    p = compute_hoeffding_bentkus_p_value(r_hat, losses.shape[0], alpha / loss_bound)[:, 0]
    valid = control_fwer(p, delta, fwer_method="fixed_sequence")
    return int(np.max(valid)) if len(valid) else -1


def mixture_risk_and_value(
    lam: float, risk_safe: float, risk_opt: float, value_safe: float, value_opt: float
) -> tuple[float, float]:
    """A fixed mixture lam * pi_0 + (1 - lam) * pi_t has exactly the mixed risk and value."""
    if not 0 <= lam <= 1:
        raise ValueError(f"`lam` must be in [0, 1], got {lam}.")
    return lam * risk_safe + (1 - lam) * risk_opt, lam * value_safe + (1 - lam) * value_opt
