"""Configuration for the LLapDiff family (latent Laplace diffusion for irregular time series)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LLapDiffConfig:
    """Sizes and diffusion settings of the LLapDiff model (identity latent: no VAE stage).

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

    # Parameters of the diffusion process (DDPM, cosine schedule). The defaults are the reference code's:
    # v-prediction, min-SNR weights (gamma 5), 64 DDIM steps on a Karras grid with eta 0, and classifier-free
    # guidance from 1 (high noise) to 2 (low noise) learned by dropping the condition 18% of the time.
    # `LLapDiffConfig.lite()` gives the earlier settings of this family, kept as an ablation.
    diffusion_steps: int = field(default=1000, metadata={"help": "training noise levels T"})
    sampling_steps: int = field(default=64, metadata={"help": "DDIM steps at sampling time"})
    step_spacing: str = field(default="karras", metadata={"help": "'karras' (sigma grid) or 'linear'"})
    karras_rho: float = field(default=7.5, metadata={"help": "exponent of the Karras sigma grid"})
    eta: float = field(default=0.0, metadata={"help": "DDIM noise: 0 deterministic, 1 DDPM-like"})
    prediction: str = field(default="v", metadata={"help": "what the denoiser outputs: 'x0' or 'v'"})
    loss_weighting: str = field(
        default="min_snr", metadata={"help": "'none' or 'min_snr' (Hang et al. 2023)"}
    )
    min_snr_gamma: float = field(default=5.0, metadata={"help": "gamma of the min-SNR weight"})
    cond_drop_prob: float = field(default=0.18, metadata={"help": "training rate of the null condition"})
    guidance_min: float = field(default=1.0, metadata={"help": "guidance strength at the highest noise"})
    guidance_max: float = field(default=2.0, metadata={"help": "guidance strength at the lowest noise"})
    guidance_power: float = field(default=1.0, metadata={"help": "g = g_min + (g_max - g_min) abar^power"})
    guidance_rescale: bool = field(default=True, metadata={"help": "match guided std to the conditional"})

    # Parameters of the denoiser's structure
    step_conditioned_poles: bool = field(
        default=True, metadata={"help": "poles depend on the noise-step embedding as well as the history"}
    )
    gated_head: bool = field(
        default=True, metadata={"help": "gated MLP on the synthesis, so outputs can leave the basis span"}
    )

    @classmethod
    def lite(cls, **overrides) -> LLapDiffConfig:
        """The earlier settings of this family: x0-prediction, plain MSE, 20 linear DDIM steps, eta 1, no
        guidance, poles from the history only, pure basis synthesis."""
        settings = dict(
            sampling_steps=20,
            step_spacing="linear",
            eta=1.0,
            prediction="x0",
            loss_weighting="none",
            cond_drop_prob=0.0,
            guidance_min=1.0,
            guidance_max=1.0,
            step_conditioned_poles=False,
            gated_head=False,
        )
        return cls(**{**settings, **overrides})

    @property
    def guided(self) -> bool:
        """Whether sampling runs the extra unconditional pass."""
        return self.guidance_min != 1.0 or self.guidance_max != 1.0

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
        if self.step_spacing not in ("karras", "linear"):
            problems.append(f"`step_spacing` must be 'karras' or 'linear', got {self.step_spacing!r}")
        if not 0.0 <= self.eta <= 1.0:
            problems.append(f"`eta` must be in [0, 1], got {self.eta}")
        if not 0.0 <= self.cond_drop_prob < 1.0:
            problems.append(f"`cond_drop_prob` must be in [0, 1), got {self.cond_drop_prob}")
        if self.guided and self.cond_drop_prob == 0.0:
            problems.append(
                "guidance needs an unconditional model: set `cond_drop_prob` > 0 or guidance_min = "
                "guidance_max = 1"
            )
        if self.delta_max < 0:
            problems.append(f"`delta_max` must be >= 0, got {self.delta_max}")
        if problems:
            raise ValueError("Invalid LLapDiffConfig: " + "; ".join(problems) + ".")
