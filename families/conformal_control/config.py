"""Configuration of conformal policy control (one dataclass, validated on construction)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class ConformalControlConfig:
    """Settings of the beta search that constrains an optimized policy against a safe one.

    Example:
        ```python
        from families.conformal_control import ConformalControlConfig

        cfg = ConformalControlConfig(alpha=0.1, num_grid=40)
        ```
    """

    # Parameters of the risk guarantee
    alpha: float = field(
        default=0.1, metadata={"help": "Risk tolerance: E[loss] under the deployed policy <= alpha."}
    )
    loss_bound: float = field(
        default=1.0, metadata={"help": "B, the largest possible loss (1 for an indicator)."}
    )
    # Parameters of the beta search
    num_grid: int = field(
        default=50,
        metadata={"help": "Candidate betas: quantiles of the likelihood ratio pi_t/pi_0, plus inf."},
    )
    num_proposals: int = field(
        default=2000,
        metadata={"help": "Samples from each policy used to estimate psi(beta) and place the grid."},
    )
    # The test point's weight is unknown before it is drawn; using the largest weight any point can
    # have keeps the bound valid. "exact" asks the policies for the supremum of the ratio (possible
    # for Markov chains by dynamic programming); "empirical" uses the largest ratio seen among the
    # proposals times `test_weight_scale` (the reference code's plug-in).
    test_weight: str = field(default="exact", metadata={"help": "'exact' or 'empirical' test-point weight."})
    test_weight_scale: float = field(
        default=1.0, metadata={"help": "Multiplier (>= 1) on an empirical test weight."}
    )
    seed: int = field(default=0, metadata={"help": "Seed of the numpy generator."})

    def __post_init__(self) -> None:
        problems = []
        if not (0.0 < self.alpha < self.loss_bound if math.isfinite(self.alpha) else False):
            problems.append(f"`alpha` must lie in (0, loss_bound={self.loss_bound}), got {self.alpha}.")
        if not self.loss_bound > 0:
            problems.append(f"`loss_bound` must be > 0, got {self.loss_bound}.")
        if not isinstance(self.num_grid, int) or self.num_grid < 2:
            problems.append(f"`num_grid` must be an int >= 2, got {self.num_grid!r}.")
        if not isinstance(self.num_proposals, int) or self.num_proposals < 10:
            problems.append(f"`num_proposals` must be an int >= 10, got {self.num_proposals!r}.")
        if self.test_weight not in ("exact", "empirical"):
            problems.append(f"`test_weight` must be 'exact' or 'empirical', got {self.test_weight!r}.")
        if not self.test_weight_scale >= 1.0:
            problems.append(f"`test_weight_scale` must be >= 1, got {self.test_weight_scale}.")
        if problems:
            raise ValueError("Invalid ConformalControlConfig: " + " ".join(problems))
