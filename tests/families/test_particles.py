"""Tests of the particles family: sphere invariance, energy monotonicity, critical points, HF block reading."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from families.particles import (
    ParticlesConfig,
    Perceptron,
    energy,
    find_clusters,
    phi_critical_points,
    riemannian_grad_norm,
    sample_sphere,
    simulate,
    velocity,
)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(16)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny problems: extra threads only add contention on shared cores
    yield
    torch.set_num_threads(threads)


def _setup(interaction: float = 1.0, scale: float = 20.0, n: int = 48, t_final: float = 6.0):
    cfg = ParticlesConfig(n_particles=n, interaction=interaction, perceptron_scale=scale, t_final=t_final)
    perc = Perceptron.random(cfg, torch.Generator().manual_seed(0)) if scale > 0 else None
    x0 = sample_sphere(n, cfg.dim, torch.Generator().manual_seed(1))
    return cfg, perc, x0


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_particles_stay_on_sphere(integrator):
    """Every particle keeps unit norm: exactly for projected Euler, to solver accuracy for torchdiffeq rk4."""
    cfg, perc, x0 = _setup(t_final=2.0)
    cfg.integrator = integrator
    if integrator != "euler":
        pytest.importorskip("torchdiffeq", reason="rk4 integration uses torchdiffeq")
    tr = simulate(x0, cfg, perc)
    assert (tr.x.norm(dim=-1) - 1).abs().max() < 1e-12
    assert tr.sphere_drift < 1e-3  # rk4 with dt=0.02 drifts only by integration error


@pytest.mark.parametrize("interaction,scale", [(1.0, 0.0), (1.0, 20.0), (-1.0, 0.0), (-1.0, 20.0)])
def test_energy_is_non_decreasing_along_the_flow(interaction, scale):
    """The flow is the gradient ascent of E = s/(2 beta) int int e^{beta<x,y>} + int phi: E never decreases."""
    cfg, perc, x0 = _setup(interaction, scale)
    tr = simulate(x0, cfg, perc, record_every=1)
    assert np.all(np.diff(tr.energies) >= -1e-10)
    assert tr.energies[-1] > tr.energies[0] + 1e-3  # and it does move


def test_velocity_is_the_gradient_of_n_times_energy():
    """The field equals N times the Riemannian gradient of E (autograd), which fixes the sign convention."""
    cfg, perc, x0 = _setup(-1.0, 5.0, n=10)
    x = x0.clone().requires_grad_(True)
    n = x.shape[0]
    e = cfg.interaction * torch.exp(cfg.beta * x @ x.T).sum() / (2 * cfg.beta * n * n) + perc.phi(x).mean()
    (g,) = torch.autograd.grad(e, x)
    riem = g - (g * x0).sum(-1, keepdim=True) * x0
    torch.testing.assert_close(velocity(x0, cfg, perc), n * riem, rtol=1e-10, atol=1e-10)
    assert abs(energy(x0, cfg, perc) - e.item()) < 1e-12


def test_clusters_sit_at_critical_points_and_perceptron_localizes_them():
    """With the perceptron, attractive runs from different starts collapse to one atom at the same
    critical point of phi, where the Riemannian gradient vanishes; without it the location varies."""
    cfg, perc, _ = _setup(1.0, 20.0, n=24, t_final=30.0)
    maxima = phi_critical_points(perc, n_starts=64, steps=500)
    locs = {True: [], False: []}
    for seed in (1, 2):
        x0 = sample_sphere(cfg.n_particles, cfg.dim, torch.Generator().manual_seed(seed))
        for use_p in (True, False):
            tr = simulate(x0, cfg, perc if use_p else None)
            cl = find_clusters(tr.x, cfg.cluster_radius)
            assert cl.count == 1
            assert cl.spread < 1e-3
            assert riemannian_grad_norm(tr.x, cfg, perc if use_p else None) < 1e-3
            locs[use_p].append(cl.largest)
            if use_p:
                assert min(np.linalg.norm(cl.largest - m) for m in maxima) < 1e-3
    assert np.linalg.norm(locs[True][0] - locs[True][1]) < 1e-4
    assert np.linalg.norm(locs[False][0] - locs[False][1]) > 0.1


def test_find_clusters_counts_known_atoms():
    """Three tight groups of points are three atoms with the right masses."""
    centers = torch.eye(3, dtype=torch.float64)
    x = torch.cat([centers[i].repeat(k, 1) + 1e-3 * torch.randn(k, 3, dtype=torch.float64)
                   for i, k in enumerate((5, 3, 2))])  # fmt: skip
    x = x / x.norm(dim=-1, keepdim=True)
    cl = find_clusters(x, 0.05)
    assert cl.count == 3
    assert sorted(cl.masses.round(2).tolist()) == [0.2, 0.3, 0.5]


def test_bad_inputs_raise_clear_errors():
    """Invalid hyper-parameters and malformed particle clouds raise ValueError naming the problem."""
    with pytest.raises(ValueError, match="beta"):
        ParticlesConfig(beta=0.0)
    with pytest.raises(ValueError, match="interaction"):
        ParticlesConfig(interaction=0.5)
    with pytest.raises(ValueError, match="integrator"):
        ParticlesConfig(integrator="leapfrog")
    cfg = ParticlesConfig(n_particles=4)
    with pytest.raises(ValueError, match="unit norm"):
        simulate(torch.ones(4, 3, dtype=torch.float64), cfg)
    with pytest.raises(ValueError, match="NaN"):
        simulate(torch.full((4, 3), float("nan")), cfg)
    with pytest.raises(ValueError, match="empty"):
        find_clusters(torch.zeros(0, 3))
    with pytest.raises(ValueError, match="dimension"):
        simulate(sample_sphere(4, 5), cfg)


def test_hf_block_weights_reproduce_the_layer_and_run_as_particles():
    """Weights read from tiny Llama/GPT-2 layers reproduce the layers' own forward (RoPE = identity), and
    the block runs as particle dynamics that stays on the sphere; big weights make attention collapse."""
    pytest.importorskip("transformers", reason="the HF block diagnostic reads a transformers model")
    from families.particles.data import tiny_hf_model
    from families.particles.hf_block import block_particle_dynamics, block_weights, residual_block

    x = torch.randn(5, 16)
    mask = torch.full((5, 5), float("-inf")).triu(1)[None, None]  # causal additive mask
    llama = tiny_hf_model("llama", 16, 0.5)
    identity_rope = (torch.ones(1, 5, 4), torch.zeros(1, 5, 4))  # cos = 1, sin = 0
    ref = llama.model.layers[1](x[None], attention_mask=mask, position_embeddings=identity_rope)
    torch.testing.assert_close(
        residual_block(x.double(), block_weights(llama, 1)), ref[0].double(), atol=1e-5, rtol=1e-5
    )
    gpt2 = tiny_hf_model("gpt2", 16, 0.5)
    ref = gpt2.transformer.h[0](x[None], attention_mask=mask)
    torch.testing.assert_close(
        residual_block(x.double(), block_weights(gpt2, 0)), ref[0].double(), atol=1e-5, rtol=1e-5
    )
    diag = block_particle_dynamics(tiny_hf_model("llama", 16, 1.0), 0, n_tokens=16, t_final=3.0, mlp=False)
    assert (diag.x.norm(dim=-1) - 1).abs().max() < 1e-12
    assert diag.collapsed and diag.mean_cosine[-1] > 0.99 > diag.mean_cosine[0] + 0.5
    with pytest.raises(ValueError, match="layer"):
        block_weights(llama, 7)


def test_demo_quick_smoke(tmp_path):
    """The quick demo runs end to end (without the HF part) and writes its results JSON."""
    from families.particles.demo import main

    assert main(["--quick", "--no-hf", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "results.json").exists()
