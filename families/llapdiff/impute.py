"""History imputation with a trained LLapDiff: diffusion inpainting on horizon-sized windows (the default,
as in the reference code), and the earlier residue fit at historical times (kept as an ablation)."""

from __future__ import annotations

import torch

from .model import LLapDiff, laplace_basis, solve_residues


def window_starts(length: int, window: int) -> list[int]:
    """Starts of windows of `window` steps that cover `length` steps from the end (the first may overlap)."""
    if window < 1 or length < 1:
        raise ValueError(f"need `length` >= 1 and `window` >= 1, got {length}, {window}.")
    window = min(window, length)
    starts = list(range(length - window, -1, -window))
    if starts[-1] > 0:
        starts.append(0)
    return starts


def inpaint_history(
    model: LLapDiff,
    hist: torch.Tensor,
    mask: torch.Tensor,
    t_hist: torch.Tensor,
    window: int,
    t_start: float,
    num_samples: int = 4,
) -> torch.Tensor:
    """Fill the missing history points by diffusion inpainting, window by window; returns (B, T, C).

    Each window of `window` steps is moved in time so that it starts at `t_start` (where the training
    horizon starts, so times are >= 0 and the damped basis stays bounded). The observed points of the
    window are kept; the rest is sampled from the unconditional model (the history summary describes what
    comes after the history, not a window inside it), and the mean of `num_samples` samples is returned.
    Observed points come back unchanged.
    """
    filled = torch.nan_to_num(hist).clone()
    obs_all = mask[..., 0] > 0
    for start in window_starts(hist.shape[1], window):
        sl = slice(start, start + window)
        times = t_hist[:, sl] - t_hist[:, start : start + 1] + t_start
        values, obs = filled[:, sl], obs_all[:, sl]
        samples = model.sample(
            values,
            mask[:, sl],
            times,
            times,
            num_samples=num_samples,
            unconditional=True,
            y_obs=values,
            obs_mask=obs.to(values.dtype),
        )
        filled[:, sl] = torch.where(obs.unsqueeze(-1), values, samples.mean(0))
    return filled


def residue_fit_history(
    model: LLapDiff, hist: torch.Tensor, mask: torch.Tensor, t_hist: torch.Tensor
) -> torch.Tensor:
    """The earlier imputation: residues fitted on each series' observed points under the history-conditioned
    poles at the noise-free step, and the expansion read at the (negative) historical times."""
    with torch.no_grad():
        summary = model.condition(hist, mask, t_hist)
        step = torch.zeros(hist.shape[0], dtype=torch.long)
        rho, omega = model.poles_for(summary, model.step_embedding(step, summary.dtype))
        basis = laplace_basis(t_hist, rho, omega)  # (B, T, 2K)
        filled = []
        for b in range(hist.shape[0]):  # one least-squares fit per series on its observed rows
            obs = mask[b, :, 0] > 0
            theta = solve_residues(basis[b : b + 1, obs], torch.nan_to_num(hist[b : b + 1, obs]), ridge=1e-3)
            filled.append((basis[b : b + 1] @ theta)[0])
        return torch.stack(filled)
