"""Tasks for the CMRU demo: copy-first-input (discrete long-range retention) and sequential digits.

Both are generated or shipped offline: the copy task is synthetic, the digits come from
`sklearn.datasets.load_digits` (8x8 images read pixel by pixel: a small sequential / permuted MNIST).
"""

from __future__ import annotations

import numpy as np
import torch


def copy_first_input(
    num_samples: int, length: int, num_classes: int = 4, noise: float = 0.5, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs (N, L, K + 1) and labels (N,): recall the class shown at t = 0 after L - 1 distractor steps.

    Step 0 carries a one-hot class and a start flag; every later step carries N(0, noise^2) distractors on the
    same K channels, so the unit must write once and then hold through them.
    The flag is needed because these units have input-only gates (that is what makes them scannable).
    """
    if num_samples < 1 or length < 2 or num_classes < 2:
        raise ValueError(
            f"need `num_samples` >= 1, `length` >= 2, `num_classes` >= 2; got {num_samples}, {length}, {num_classes}."
        )
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(0, num_classes, (num_samples,), generator=gen)
    x = torch.zeros(num_samples, length, num_classes + 1)
    x[:, 1:, :num_classes] = noise * torch.randn(num_samples, length - 1, num_classes, generator=gen)
    x[torch.arange(num_samples), 0, y] = 1.0
    x[:, 0, num_classes] = 1.0
    return x, y


def sequential_digits(
    permuted: bool = False, test_fraction: float = 0.25, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x_train, y_train, x_test, y_test) with x of shape (N, 64, 1): sklearn digits as pixel sequences.

    `permuted=True` applies one fixed random pixel permutation (seeded), which destroys locality and so
    forces longer-range memory, as in psMNIST.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"`test_fraction` must be in (0, 1), got {test_fraction}.")
    from sklearn.datasets import load_digits

    data = load_digits()
    x = data.data.astype(np.float32) / 16.0  # (N, 64) in [0, 1]
    y = data.target.astype(np.int64)
    rng = np.random.default_rng(seed)
    if permuted:
        x = x[:, np.random.default_rng(1234).permutation(64)]  # fixed across seeds: one task
    order = rng.permutation(len(x))
    n_test = int(len(x) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    xt = torch.from_numpy(x).unsqueeze(-1)
    yt = torch.from_numpy(y)
    return xt[train], yt[train], xt[test], yt[test]
