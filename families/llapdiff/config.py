"""Configuration for the LLapDiff family (latent Laplace diffusion for irregular time series)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LLapDiffConfig:
    """Sizes and diffusion settings of the LLapDiff-lite model (identity latent: no VAE stage yet).

    Example:
        >>> LLapDiffConfig(num_channels=3).num_poles
        8
    """

    # Parameters that set the sizes
    num_channels: int = field(default=3, metadata={"help": "channels C of the (latent) series"})
    num_poles: int = field(default=8, metadata={"help": "K complex-conjugate pole pairs"})
    hidden_size: int = field(default=64, metadata={"help": "width of the summarizer and the denoiser MLP"})

    # Parameters of the pole bank: rho = softplus(.) + alpha_min > 0, omega = omega_max * sigmoid(.)
    alpha_min: float = field(default=1e-3, metadata={"help": "smallest decay rate (keeps every mode stable)"})
    omega_max: float = field(
        default=3.141592653589793, metadata={"help": "upper bound on frequencies, <= pi"}
    )
    # per-sample pole perturbations from the history summary are tanh-bounded by this (in raw space)
    delta_max: float = field(default=0.5, metadata={"help": "bound on per-sample pole perturbations"})

    # Parameters of the diffusion process (DDPM, cosine schedule, x0-prediction, DDIM sampling)
    diffusion_steps: int = field(default=1000, metadata={"help": "training noise levels T"})
    sampling_steps: int = field(default=20, metadata={"help": "DDIM steps at sampling time"})
    # the reference code's defaults are "v", "min_snr" (gamma 5), 64 steps and eta 0; ours stay x0 / none /
    # 20 / eta 1 so the published demo table is reproducible, and the reference settings are one config away
    prediction: str = field(default="x0", metadata={"help": "what the denoiser outputs: 'x0' or 'v'"})
    loss_weighting: str = field(default="none", metadata={"help": "'none' or 'min_snr' (Hang et al. 2023)"})
    min_snr_gamma: float = field(default=5.0, metadata={"help": "gamma of the min-SNR weight"})

    def __post_init__(self) -> None:
        problems = []
        for name in ("num_channels", "num_poles", "hidden_size", "diffusion_steps", "sampling_steps"):
            if int(getattr(self, name)) < 1:
                problems.append(f"`{name}` must be >= 1, got {getattr(self, name)}")
        if self.sampling_steps > self.diffusion_steps:
            problems.append("`sampling_steps` must be <= `diffusion_steps`")
        if not self.alpha_min > 0:
            problems.append(f"`alpha_min` must be > 0 so every pole is stable, got {self.alpha_min}")
        if not 0 < self.omega_max <= 3.141592653589794:
            problems.append(f"`omega_max` must be in (0, pi], got {self.omega_max}")
        if self.prediction not in ("x0", "v"):
            problems.append(f"`prediction` must be 'x0' or 'v', got {self.prediction!r}")
        if self.loss_weighting not in ("none", "min_snr"):
            problems.append(f"`loss_weighting` must be 'none' or 'min_snr', got {self.loss_weighting!r}")
        if not self.min_snr_gamma > 0:
            problems.append(f"`min_snr_gamma` must be > 0, got {self.min_snr_gamma}")
        if self.delta_max < 0:
            problems.append(f"`delta_max` must be >= 0, got {self.delta_max}")
        if problems:
            raise ValueError("Invalid LLapDiffConfig: " + "; ".join(problems) + ".")
