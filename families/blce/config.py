"""Configuration of BLCE / BLCE-G (one dataclass, validated on construction)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BLCEConfig:
    """Settings of the rare-update linear contextual bandit.

    Example:
        ```python
        from families.blce import BLCEConfig

        cfg = BLCEConfig(horizon=10_000, design="g_optimal")
        ```
    """

    # Parameters of the problem
    horizon: int = field(default=10_000, metadata={"help": "T, the number of rounds; fixes the static grid."})
    noise_std: float = field(default=0.1, metadata={"help": "sigma of the sub-Gaussian reward noise."})
    theta_norm: float = field(default=1.0, metadata={"help": "S, a bound on ||theta*|| used in the widths."})
    # Parameters of the algorithm
    design: str = field(
        default="uncertainty",
        metadata={
            "help": "'uncertainty' = BLCE (max-uncertainty exploration); 'g_optimal' = BLCE-G; 'strict_g' = "
            "strictly batched baseline (explore by sampling a G-optimal design of the current context only)."
        },
    )
    explore_frac: float = field(
        default=0.5,
        metadata={
            "help": "c: share of each later interval spent exploring (BLCE-G: c^2 design, c(1-c) uncertainty)."
        },
    )
    # lambda = 1 for BLCE and log(d T) for BLCE-G in the paper notes; None picks that default.
    ridge: float | None = field(default=None, metadata={"help": "Ridge lambda of each interval's estimate."})
    width_scale: float = field(
        default=1.0, metadata={"help": "Multiplier on the theoretical confidence width (1 = as derived)."}
    )
    glm: bool = field(
        default=False, metadata={"help": "Logistic rewards (BGLE): curvature-weighted Gram, MLE."}
    )
    fw_iters: int = field(
        default=30, metadata={"help": "Frank-Wolfe iterations of the near G-optimal design."}
    )
    seed: int = field(
        default=0, metadata={"help": "Seed of the algorithm's own randomness (design sampling)."}
    )

    def __post_init__(self) -> None:
        problems = []
        if not isinstance(self.horizon, int) or self.horizon < 16:
            problems.append(f"`horizon` must be an int >= 16, got {self.horizon!r}.")
        if not self.noise_std >= 0:
            problems.append(f"`noise_std` must be >= 0, got {self.noise_std}.")
        if not self.theta_norm > 0:
            problems.append(f"`theta_norm` must be > 0, got {self.theta_norm}.")
        if self.design not in ("uncertainty", "g_optimal", "strict_g"):
            problems.append(
                "`design` must be 'uncertainty' (BLCE), 'g_optimal' (BLCE-G) or 'strict_g' (strictly "
                f"batched baseline), got {self.design!r}."
            )
        if not 0.0 < self.explore_frac < 1.0:
            problems.append(f"`explore_frac` must be in (0, 1), got {self.explore_frac}.")
        if self.ridge is not None and not self.ridge > 0:
            problems.append(f"`ridge` must be > 0, got {self.ridge}.")
        if not self.width_scale > 0:
            problems.append(f"`width_scale` must be > 0, got {self.width_scale}.")
        if not isinstance(self.fw_iters, int) or self.fw_iters < 1:
            problems.append(f"`fw_iters` must be an int >= 1, got {self.fw_iters!r}.")
        if problems:
            raise ValueError("Invalid BLCEConfig: " + " ".join(problems))
