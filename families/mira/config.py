"""Configuration of the MIRA score (one dataclass, validated on construction)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class MiraConfig:
    """Settings of a MIRA evaluation.

    Example:
        ```python
        from families.mira import MiraConfig

        cfg = MiraConfig(num_runs=50, normalize=True)
        ```
    """

    # Parameters of the Monte Carlo estimate
    num_runs: int = field(
        default=100,
        metadata={"help": "Monte Carlo replications (random centres and reference samples) to average."},
    )
    # The official package draws centres from U[0,1]^q, so inputs must live in the unit cube;
    # min-max scaling with the truth's range (as `mira-score` does with norm=True) puts them there.
    normalize: bool = field(
        default=True,
        metadata={"help": "Min-max scale truths and samples with the truths' per-dimension range."},
    )
    # Parameters of the model-comparison verdict
    z_crit: float = field(
        default=3.0,
        metadata={
            "help": "A candidate is 'calibrated' when |z| of its score against the reference is <= this."
        },
    )
    seed: int = field(default=0, metadata={"help": "Seed of the torch generator that draws centres."})

    def __post_init__(self) -> None:
        problems = []
        if not isinstance(self.num_runs, int) or self.num_runs < 1:
            problems.append(f"`num_runs` must be an int >= 1, got {self.num_runs!r}.")
        if not (self.z_crit > 0):
            problems.append(f"`z_crit` must be > 0, got {self.z_crit!r}.")
        if not isinstance(self.seed, int):
            problems.append(f"`seed` must be an int, got {self.seed!r}.")
        if problems:
            raise ValueError("Invalid MiraConfig: " + " ".join(problems))
