"""Two-view data from sklearn's bundled digits and the symmetric label-noise model of the paper."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class TwoViewSplit:
    """Train pairs with noisy and clean labels, plus held-out query pairs with clean labels."""

    x1_train: torch.Tensor  # (N, 32) "image" view: left half of each 8x8 digit
    x2_train: torch.Tensor  # (N, 32) "text" view: right half
    y_train_noisy: torch.Tensor  # (N,) labels the model sees
    y_train_clean: torch.Tensor  # (N,) ground truth, for evaluation only
    x1_query: torch.Tensor
    x2_query: torch.Tensor
    y_query: torch.Tensor

    @property
    def flipped(self) -> np.ndarray:
        """Boolean mask of the training labels that the noise changed."""
        return (self.y_train_noisy != self.y_train_clean).numpy()


def symmetric_label_noise(labels: np.ndarray, rate: float, num_classes: int, seed: int) -> np.ndarray:
    """Flip a `rate` fraction of labels, each to a uniformly drawn *different* class (the repo's scheme)."""
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"`rate` must lie in [0, 1), got {rate}.")
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) == 0:
        raise ValueError("`labels` must be a non-empty 1-D integer array.")
    rng = np.random.default_rng(seed)
    noisy = labels.copy()
    idx = rng.choice(len(labels), size=int(round(rate * len(labels))), replace=False)
    shift = rng.integers(1, num_classes, size=len(idx))  # never 0, so the label really changes
    noisy[idx] = (labels[idx] + shift) % num_classes
    return noisy


def digits_two_view(noise_rate: float, seed: int, n_train: int = 1300) -> TwoViewSplit:
    """sklearn `load_digits` split into left/right image halves; train labels corrupted at `noise_rate`."""
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    if not 10 <= n_train <= len(X) - 10:
        raise ValueError(f"`n_train` must lie in [10, {len(X) - 10}], got {n_train}.")
    X = (X / 16.0).reshape(-1, 8, 8).astype(np.float32)
    left, right = X[:, :, :4].reshape(len(X), -1), X[:, :, 4:].reshape(len(X), -1)
    perm = np.random.default_rng(seed).permutation(len(X))
    tr, te = perm[:n_train], perm[n_train:]
    noisy = symmetric_label_noise(y[tr], noise_rate, 10, seed + 1)
    t = torch.from_numpy
    return TwoViewSplit(t(left[tr]), t(right[tr]), t(noisy), t(y[tr]), t(left[te]), t(right[te]), t(y[te]))
