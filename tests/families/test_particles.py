"""Tests of the particles family: sphere invariance, energy monotonicity, critical points, HF block reading."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from families.demo_cli import load_results
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


def _setup(interaction: float = 1.0, scale: float = 20.0, n: int = 48, t_final: float = 6.0):
    cfg = ParticlesConfig(n_particles=n, interaction=interaction, perceptron_scale=scale, t_final=t_final)
    perc = Perceptron.random(cfg, torch.Generator().manual_seed(0)) if scale > 0 else None
    x0 = sample_sphere(n, cfg.dim, torch.Generator().manual_seed(1))
    return cfg, perc, x0


def test_projected_euler_leaves_the_sphere_only_at_second_order_in_dt():
    """A tangent field moves a unit vector off the sphere by sqrt(1 + dt^2 |v|^2) - 1: halving dt quarters
    the pre-retraction drift (a field with a normal component would only halve it); the retraction then
    puts every particle back on the sphere."""
    cfg, perc, x0 = _setup(t_final=1.0)
    drifts = []
    for dt in (0.02, 0.01):
        tr = simulate(x0, replace(cfg, dt=dt), perc)
        assert (tr.x.norm(dim=-1) - 1).abs().max() < 1e-12
        drifts.append(tr.sphere_drift)
    speed = velocity(x0, cfg, perc).norm(dim=-1).max().item()
    assert 0 < drifts[0] < 0.02**2 * (2 * speed) ** 2  # second order, with room for the speed to double
    assert 3.5 < drifts[0] / drifts[1] < 4.5


def test_rk4_stays_on_the_sphere_to_solver_accuracy():
    """torchdiffeq's rk4 integrates the ambient ODE: its drift off the sphere is integration error only."""
    pytest.importorskip("torchdiffeq", reason="rk4 integration uses torchdiffeq")
    cfg, perc, x0 = _setup(t_final=2.0)
    tr = simulate(x0, replace(cfg, integrator="rk4"), perc)
    assert 0 < tr.sphere_drift < 1e-3


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


def test_generic_perceptron_is_the_tied_one_when_w_is_tied_and_has_no_energy_otherwise():
    """Untied output weights W give the field W^T relu(Ax + b); W = diag(w) A recovers grad phi exactly,
    while a random W has a field with non-zero curl, so it defines no potential and no energy."""
    cfg, perc, x0 = _setup()
    tied_as_generic = Perceptron(A=perc.A, b=perc.b, w=torch.zeros_like(perc.w), W=perc.w[:, None] * perc.A)
    torch.testing.assert_close(tied_as_generic.grad_phi(x0), perc.grad_phi(x0))
    generic = Perceptron.generic(cfg, torch.Generator().manual_seed(0))
    assert np.isnan(energy(x0, cfg, generic)) and not generic.is_gradient
    with pytest.raises(ValueError, match="no potential"):
        generic.phi(x0)
    # a gradient field has a symmetric Jacobian; the generic one does not
    x = x0[:1].clone()
    jac = lambda p: torch.autograd.functional.jacobian(lambda y: p.grad_phi(y)[0], x)[:, 0]  # noqa: E731
    j_tied, j_gen = jac(perc), jac(generic)
    torch.testing.assert_close(j_tied, j_tied.T)
    assert (j_gen - j_gen.T).abs().max() > 1e-3


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
    main_rows = load_results(tmp_path)["main"]
    assert main_rows["attr_mlp"]["location_spread_deg"] < 1.0  # the perceptron pins the atom's location
    assert min(main_rows["rep_nomlp"]["atoms"]) > 10  # repulsion alone stays spread out
