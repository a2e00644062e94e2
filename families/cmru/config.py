"""Configuration for the CMRU family (BMRU, CMRU, alpha-CMRU and the LRU/minGRU baselines)."""

from __future__ import annotations

from dataclasses import dataclass, field

UNITS = ("bmru", "cmru", "acmru", "lru", "mingru")


@dataclass
class CMRUConfig:
    """One dataclass for every recurrent unit of the family, so the demo compares like with like.

    Example:
        >>> cfg = CMRUConfig(unit="cmru", input_size=5, num_classes=4)
        >>> cfg.state_size
        32
    """

    # Parameters that choose the architecture
    unit: str = field(default="cmru", metadata={"help": f"recurrent unit, one of {UNITS}"})
    input_size: int = field(default=1, metadata={"help": "features per time step"})
    num_classes: int = field(default=10, metadata={"help": "classes predicted from the last step"})
    hidden_size: int = field(default=32, metadata={"help": "residual stream width D"})
    state_size: int = field(default=32, metadata={"help": "recurrent state units H per layer"})
    num_hidden_layers: int = field(default=2, metadata={"help": "stacked [LN -> unit -> proj] blocks"})

    # Parameters of the memory units (BMRU / CMRU / alpha-CMRU)
    # Writes happen when |c| > theta; theta = softplus(raw) so it stays > 0 for any raw value.
    threshold_init: float = field(default=1.0, metadata={"help": "initial hysteresis threshold theta"})
    # Slope of the sigmoid/tanh surrogate used for the Heaviside and sign derivatives.
    surrogate_slope: float = field(default=2.0, metadata={"help": "surrogate-gradient slope kappa"})
    # alpha-CMRU only: forward pass uses the soft gates with this sharpness (larger = closer to CMRU).
    relax_slope: float = field(default=4.0, metadata={"help": "alpha-CMRU soft-gate sharpness"})

    # Parameters of the LRU baseline (Orvieto et al. 2023): eigenvalue radius drawn in [r_min, r_max]
    lru_r_min: float = field(default=0.9, metadata={"help": "LRU smallest initial |lambda|"})
    lru_r_max: float = field(default=0.999, metadata={"help": "LRU largest initial |lambda|"})

    def __post_init__(self) -> None:
        problems = []
        if self.unit not in UNITS:
            problems.append(f"`unit` must be one of {UNITS}, got {self.unit!r}")
        for name in ("input_size", "num_classes", "hidden_size", "state_size", "num_hidden_layers"):
            if int(getattr(self, name)) < 1:
                problems.append(f"`{name}` must be >= 1, got {getattr(self, name)}")
        if self.num_classes < 2:
            problems.append(f"`num_classes` must be >= 2, got {self.num_classes}")
        for name in ("threshold_init", "surrogate_slope", "relax_slope"):
            if not getattr(self, name) > 0:
                problems.append(f"`{name}` must be > 0, got {getattr(self, name)}")
        if not 0.0 < self.lru_r_min < self.lru_r_max < 1.0:
            problems.append(
                f"need 0 < `lru_r_min` < `lru_r_max` < 1 for a stable LRU, got {self.lru_r_min}, {self.lru_r_max}"
            )
        if problems:
            raise ValueError("Invalid CMRUConfig: " + "; ".join(problems) + ".")
