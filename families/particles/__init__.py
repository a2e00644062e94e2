"""Transformers as interacting particles on the sphere with a perceptron block (arXiv 2601.21366).

Import is cheap: torchdiffeq, POT and transformers load only when used.
"""

from .config import ParticlesConfig
from .hf_block import BlockDiagnostic, block_particle_dynamics, block_velocity, block_weights, residual_block
from .model import (
    Clusters,
    Perceptron,
    Trajectory,
    energy,
    find_clusters,
    phi_critical_points,
    riemannian_grad_norm,
    sample_sphere,
    simulate,
    tangent,
    velocity,
)

__all__ = [
    "BlockDiagnostic",
    "Clusters",
    "ParticlesConfig",
    "Perceptron",
    "Trajectory",
    "block_particle_dynamics",
    "block_velocity",
    "block_weights",
    "energy",
    "find_clusters",
    "phi_critical_points",
    "residual_block",
    "riemannian_grad_norm",
    "sample_sphere",
    "simulate",
    "tangent",
    "velocity",
]
