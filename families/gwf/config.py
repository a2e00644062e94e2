"""Configuration for Generative Wasserstein Flows (parametric JKO generator training)."""

from __future__ import annotations

from dataclasses import dataclass, field

OBJECTIVES = ("kl", "rkl", "js", "w1", "mmd")


@dataclass
class GWFConfig:
    """Settings of `WassersteinFlowTrainer`.

    `objective` names F(mu) = D(mu || nu) for the generator law mu: "kl" = KL(mu||nu), "rkl" = KL(nu||mu),
    "js" = the f-GAN Jensen-Shannon divergence, "w1" = the Wasserstein-1 IPM (WGAN-GP critic), "mmd" =
    squared MMD with a Gaussian-kernel mixture (closed-form witness, no critic).

    Example:
        >>> cfg = GWFConfig(objective="mmd", tau=0.1)
        >>> cfg.form
        'jko'
    """

    # Parameters of the flow
    objective: str = field(default="mmd", metadata={"help": f"One of {OBJECTIVES}."})
    tau: float = field(
        default=0.1, metadata={"help": "JKO step tau >= 0; proximal weight 1/(2 tau). 0 = plain GAN step."}
    )
    form: str = field(
        default="jko",
        metadata={
            "help": "'jko': minimise F + prox; 'particle': regress onto x - tau grad(first variation)."
        },
    )
    inner_steps: int = field(default=5, metadata={"help": "Generator optimiser steps per JKO step."})
    critic_steps: int = field(
        default=2, metadata={"help": "Critic updates per JKO step (f-div and w1 only)."}
    )
    # Parameters of the networks
    latent_dim: int = field(default=2, metadata={"help": "Dimension of the latent z ~ N(0, I)."})
    data_dim: int = field(default=2, metadata={"help": "Dimension of the samples."})
    hidden_size: int = field(default=64, metadata={"help": "Width of generator and critic MLPs."})
    num_hidden_layers: int = field(default=2, metadata={"help": "Hidden layers of generator and critic."})
    # Parameters of the optimisation
    lr_generator: float = field(default=1e-3, metadata={"help": "Adam learning rate of the generator."})
    lr_critic: float = field(default=1e-3, metadata={"help": "Adam learning rate of the critic."})
    batch_size: int = field(default=256, metadata={"help": "Samples per step from p_z and from the target."})
    gp_weight: float = field(default=10.0, metadata={"help": "Gradient-penalty weight of the w1 critic."})
    # Gaussian kernel mixture bandwidths for MMD (a mixture avoids tuning one bandwidth per target)
    bandwidths: tuple[float, ...] = field(
        default=(0.05, 0.2, 0.5, 1.0, 2.0), metadata={"help": "MMD kernel sigmas."}
    )

    def __post_init__(self) -> None:
        problems = []
        if self.objective not in OBJECTIVES:
            problems.append(f"`objective` must be one of {OBJECTIVES}, got {self.objective!r}")
        if not self.tau >= 0:
            problems.append(f"`tau` must be >= 0 (0 = plain GAN step), got {self.tau}")
        if self.form not in ("jko", "particle"):
            problems.append(f"`form` must be 'jko' or 'particle', got {self.form!r}")
        if self.form == "particle" and self.tau == 0:
            problems.append("`form='particle'` needs `tau` > 0 (tau = 0 would not move the particles)")
        for name in (
            "inner_steps",
            "latent_dim",
            "data_dim",
            "hidden_size",
            "num_hidden_layers",
            "batch_size",
        ):
            if getattr(self, name) < 1:
                problems.append(f"`{name}` must be >= 1, got {getattr(self, name)}")
        if self.critic_steps < 0:
            problems.append(f"`critic_steps` must be >= 0, got {self.critic_steps}")
        if not (self.lr_generator > 0 and self.lr_critic > 0):
            problems.append("`lr_generator` and `lr_critic` must be > 0")
        if self.gp_weight < 0:
            problems.append(f"`gp_weight` must be >= 0, got {self.gp_weight}")
        if not self.bandwidths or any(not b > 0 for b in self.bandwidths):
            problems.append(
                f"`bandwidths` must be a non-empty tuple of positive numbers, got {self.bandwidths}"
            )
        if problems:
            raise ValueError("Invalid GWFConfig: " + "; ".join(problems) + ".")
