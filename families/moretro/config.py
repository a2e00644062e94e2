"""Configuration of the MORetro* multi-objective AND-OR search."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class MORetroConfig:
    """Settings of `MORetroStar`.

    Example:
        >>> MORetroConfig(n_weights=3).n_objectives
        3
    """

    # Problem size
    n_objectives: int = field(default=3, metadata={"help": "Length m of every reaction cost vector."})
    max_depth: int = field(
        default=4, metadata={"help": "Routes deeper than this many steps are not explored."}
    )

    # Search budget and scalarisation
    expansion_budget: int = field(default=300, metadata={"help": "Maximum number of molecule expansions."})
    n_weights: int = field(default=5, metadata={"help": "Active weight vectors per iteration (paper: 5)."})
    # Weights that found no new Pareto route for this many iterations are replaced.
    resample_every: int = field(default=5, metadata={"help": "Iterations between weight resampling."})
    # Pruning by Pareto dominance of lower-bound vectors is what makes the front exact; switching it
    # off turns the method into plain scalarised Retro* with several weights.
    prune_dominated: bool = field(
        default=True, metadata={"help": "Skip open nodes whose bound is dominated."}
    )
    # "gibbon": a GP from weight to hypervolume improvement, next weights by GIBBON (botorch), as in the
    # paper; "sampler": our numpy-only solution-informed sampler (keep productive weights, add new ones
    # in the least covered direction).
    weight_selection: str = field(
        default="gibbon", metadata={"help": "'gibbon' (GP + GIBBON, needs botorch) or 'sampler'."}
    )
    seed: int = field(default=0, metadata={"help": "Seed of the weight sampler."})

    def __post_init__(self) -> None:
        problems = []
        for name in ("n_objectives", "max_depth", "expansion_budget", "n_weights", "resample_every"):
            val = getattr(self, name)
            if not isinstance(val, int) or val < 1:
                problems.append(f"`{name}` must be an int >= 1, got {val!r}.")
        if self.weight_selection not in ("gibbon", "sampler"):
            problems.append(
                f"`weight_selection` must be 'gibbon' or 'sampler', got {self.weight_selection!r}."
            )
        if problems:
            raise ValueError("Invalid MORetroConfig: " + " ".join(problems))
