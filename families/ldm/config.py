"""Configuration for the LDM family (latent distribution matching and KalmanSSL)."""

from __future__ import annotations

from dataclasses import dataclass, field

LATENT_MODELS = ("gaussian", "vmf", "predictor_cosine", "laplace")
ENTROPIES = ("logdet", "vicreg", "kde", "stopgrad", "logabsdet")


@dataclass
class KalmanSSLConfig:
    """KalmanSSL: nonlinear encoder -> pseudo-observations, linear-Gaussian latent state, closed-form filter.

    Example:
        >>> KalmanSSLConfig(input_size=100).state_size
        2
    """

    # Parameters that set the sizes
    input_size: int = field(default=100, metadata={"help": "flattened observation size (e.g. 10x10 frame)"})
    hidden_size: int = field(default=64, metadata={"help": "encoder MLP width"})
    latent_size: int = field(default=4, metadata={"help": "pseudo-observation size L"})
    state_size: int = field(default=2, metadata={"help": "Kalman state size D"})

    # Parameters of the latent dynamics
    # |eig(A)| <= max_spectral_radius, as in the reference code (1.02 allows slight growth)
    max_spectral_radius: float = field(
        default=1.02, metadata={"help": "clamp on the transition's spectral norm"}
    )
    min_variance: float = field(default=1e-3, metadata={"help": "floor on the diagonal noise variances"})
    # the reference code fixes C = I (pseudo-observations are the state plus noise); "learned" fits C
    observation: str = field(
        default="learned", metadata={"help": "observation matrix C: 'learned' or 'identity' (needs L == D)"}
    )

    # Parameters of the objective
    entropy: str = field(default="logdet", metadata={"help": "entropy term: 'logdet' or 'stopgrad'"})
    entropy_weight: float = field(default=1.0, metadata={"help": "weight of the latent entropy term"})

    def __post_init__(self) -> None:
        problems = []
        for name in ("input_size", "hidden_size", "latent_size", "state_size"):
            if int(getattr(self, name)) < 1:
                problems.append(f"`{name}` must be >= 1, got {getattr(self, name)}")
        if not self.max_spectral_radius > 0:
            problems.append(f"`max_spectral_radius` must be > 0, got {self.max_spectral_radius}")
        if not self.min_variance > 0:
            problems.append(f"`min_variance` must be > 0, got {self.min_variance}")
        if self.entropy not in ("logdet", "stopgrad"):
            problems.append(f"`entropy` must be 'logdet' or 'stopgrad', got {self.entropy!r}")
        if self.observation not in ("learned", "identity"):
            problems.append(f"`observation` must be 'learned' or 'identity', got {self.observation!r}")
        if self.observation == "identity" and self.latent_size != self.state_size:
            problems.append(
                f"`observation='identity'` needs `latent_size` == `state_size`, got {self.latent_size} "
                f"and {self.state_size}"
            )
        if self.entropy_weight < 0:
            problems.append(f"`entropy_weight` must be >= 0, got {self.entropy_weight}")
        if problems:
            raise ValueError("Invalid KalmanSSLConfig: " + "; ".join(problems) + ".")
