"""Configuration for the particles family (attention + perceptron as particle dynamics on the sphere)."""

from __future__ import annotations

from dataclasses import dataclass, field

_INTEGRATORS = ("euler", "rk4", "dopri5")


@dataclass
class ParticlesConfig:
    """Settings of the interacting-particle system x_i' = P_{x_i}[s (1/n) sum_j e^{beta<x_i,x_j>} x_j + grad phi(x_i)].

    Example:
        >>> cfg = ParticlesConfig(n_particles=64, dim=3, beta=1.0)
        >>> cfg.interaction
        1.0
    """

    # Parameters of the particle system
    n_particles: int = field(default=256, metadata={"help": "Number of tokens/particles n."})
    dim: int = field(default=3, metadata={"help": "Ambient dimension d; particles live on S^{d-1}."})
    beta: float = field(default=1.0, metadata={"help": "Inverse temperature of the attention kernel (> 0)."})
    # +1 is V = +I (attractive: particles pull each other together), -1 is V = -I (repulsive).
    interaction: float = field(
        default=1.0, metadata={"help": "Sign s of the value matrix V = s I: +1 or -1."}
    )

    # Parameters of the perceptron potential phi(x) = sum_k w_k rho(<a_k, x> + b_k), rho = relu^2 / 2
    num_units: int = field(default=8, metadata={"help": "Number K of perceptron units."})
    perceptron_scale: float = field(
        default=20.0, metadata={"help": "Scale of the output weights w_k; 0 switches the perceptron off."}
    )
    bias_std: float = field(default=0.5, metadata={"help": "Std of the perceptron biases b_k."})

    # Parameters of the time integration (time = depth)
    dt: float = field(default=0.02, metadata={"help": "Step size of the fixed-step integrators."})
    t_final: float = field(default=40.0, metadata={"help": "Final time T."})
    integrator: str = field(
        default="euler", metadata={"help": "'euler' (projected Euler + renormalisation), 'rk4' or 'dopri5'."}
    )

    # Parameters of the cluster analysis
    cluster_radius: float = field(
        default=0.05, metadata={"help": "Geodesic radius (rad) under which two particles share an atom."}
    )

    def __post_init__(self) -> None:
        problems = []
        if self.n_particles < 1:
            problems.append(f"`n_particles` must be >= 1, got {self.n_particles}")
        if self.dim < 2:
            problems.append(f"`dim` must be >= 2 (the sphere S^(d-1) needs d >= 2), got {self.dim}")
        if not self.beta > 0:
            problems.append(f"`beta` must be > 0, got {self.beta}; use `interaction=-1` for repulsion")
        if self.interaction not in (1.0, -1.0):
            problems.append(
                f"`interaction` must be +1 (attractive) or -1 (repulsive), got {self.interaction}"
            )
        if self.num_units < 1:
            problems.append(f"`num_units` must be >= 1, got {self.num_units}")
        if self.perceptron_scale < 0:
            problems.append(f"`perceptron_scale` must be >= 0, got {self.perceptron_scale}")
        if self.bias_std < 0:
            problems.append(f"`bias_std` must be >= 0, got {self.bias_std}")
        if not self.dt > 0 or not self.t_final > 0:
            problems.append(f"`dt` and `t_final` must be > 0, got dt={self.dt}, t_final={self.t_final}")
        if self.integrator not in _INTEGRATORS:
            problems.append(f"`integrator` must be one of {_INTEGRATORS}, got {self.integrator!r}")
        if not self.cluster_radius > 0:
            problems.append(f"`cluster_radius` must be > 0, got {self.cluster_radius}")
        if problems:
            raise ValueError("Invalid ParticlesConfig: " + "; ".join(problems) + ".")

    @property
    def num_steps(self) -> int:
        """Number of integration steps, ceil(T / dt)."""
        return max(1, round(self.t_final / self.dt))
