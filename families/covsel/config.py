"""Configuration of local covariate selection (LCS)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class CovselConfig:
    """Settings of `LocalCovariateSelector`.

    Example:
        >>> cfg = CovselConfig(max_cond_size=2)
        >>> cfg.alpha
        0.01
    """

    # Parameters of the local search
    max_cond_size: int = field(
        default=3,
        metadata={"help": "Largest conditioning / adjustment set tried inside the boundary."},
    )
    # The ancestor rule certifies more covariates as non-descendants of X (more answers) but costs
    # an extra loop of tests; switching it off keeps soundness and only loses completeness.
    use_ancestor_rule: bool = field(
        default=True, metadata={"help": "Use the minimal-independence ancestor rule for certification."}
    )
    # Separating sets in the collider rule larger than this are not tried. With finite samples a
    # large separating set is where false independences (near-cancelling paths) live, and one false
    # certification of a descendant of X breaks soundness; `None` means `max_cond_size`.
    certify_sep_size: int | None = field(
        default=None, metadata={"help": "Largest separating set used by the collider rule."}
    )
    # Letting Y into the certification pool proves "zero effect" when Y is a certified non-descendant
    # of X; with finite samples a weak X -> Y path reads as independence, so the demo's finite-sample
    # runs switch this off.
    certify_outcome: bool = field(default=True, metadata={"help": "Let Y be certified (zero-effect proof)."})
    # Searching only the boundary is the point of the method; `False` runs the same rules over every
    # observed variable, which we keep as a reference to measure what locality costs.
    local: bool = field(default=True, metadata={"help": "Search only the local boundary MB(X) u MB(Y)."})
    # With the pretreatment assumption every covariate counts as a non-descendant of X: this turns
    # the method into the Entner-Hoyer-Spirtes (EHS) rules, our baseline.
    assume_pretreatment: bool = field(
        default=False, metadata={"help": "Treat every covariate as pretreatment (EHS baseline)."}
    )

    # Parameters of the finite-sample CI test and the effect estimator
    alpha: float = field(default=0.01, metadata={"help": "Significance level of the Fisher-z CI test."})
    poly_degree: int = field(
        default=1, metadata={"help": "Degree of the covariate polynomial in the outcome regression."}
    )

    def __post_init__(self) -> None:
        problems = []
        if not isinstance(self.max_cond_size, int) or self.max_cond_size < 0:
            problems.append(f"`max_cond_size` must be an int >= 0, got {self.max_cond_size!r}.")
        if self.certify_sep_size is not None and (
            not isinstance(self.certify_sep_size, int) or self.certify_sep_size < 0
        ):
            problems.append(f"`certify_sep_size` must be None or an int >= 0, got {self.certify_sep_size!r}.")
        if not 0.0 < float(self.alpha) < 1.0:
            problems.append(f"`alpha` must lie in (0, 1), got {self.alpha!r}.")
        if not isinstance(self.poly_degree, int) or self.poly_degree not in (1, 2, 3):
            problems.append(f"`poly_degree` must be 1, 2 or 3, got {self.poly_degree!r}.")
        if problems:
            raise ValueError("Invalid CovselConfig: " + " ".join(problems))
