"""Tests of the GWF family: MMD witness, JKO limits, energy decrease on Gaussians, f-GAN duals, errors."""

from __future__ import annotations

import math

import pytest
import torch

from families.demo_cli import load_results
from families.gwf import GWFConfig, WassersteinFlowTrainer, mmd2, mmd_witness_grad
from families.gwf.model import F_DIVERGENCES


def test_mmd_witness_gradient_equals_autograd_of_mmd2():
    """B * d MMD^2(x, y) / dx_i equals the gradient of the closed-form witness at x_i."""
    x = torch.randn(40, 2, dtype=torch.float64, requires_grad=True)
    y = torch.randn(50, 2, dtype=torch.float64) + 1.0
    bw = (0.3, 1.0, 2.0)
    (g,) = torch.autograd.grad(mmd2(x, y, bw), x)
    torch.testing.assert_close(
        mmd_witness_grad(x.detach(), x.detach(), y, bw), len(x) * g, rtol=1e-9, atol=1e-12
    )


@pytest.mark.parametrize("name", ["kl", "rkl", "js"])
def test_f_gan_dual_is_tight_at_the_first_variation(name):
    """With T = f'(p/q) the f-GAN dual E_p[T] - E_q[f*(T)] equals D_f(p||q) exactly (discrete p, q)."""
    p = torch.softmax(torch.randn(6, dtype=torch.float64), 0)
    q = torch.softmax(torch.randn(6, dtype=torch.float64), 0)
    u = p / q
    f, fprime = {
        "kl": (lambda u: u * torch.log(u), lambda u: torch.log(u) + 1),
        "rkl": (lambda u: -torch.log(u), lambda u: -1 / u),
        "js": (
            lambda u: u * torch.log(u) - (u + 1) * torch.log((u + 1) / 2),
            lambda u: torch.log(2 * u / (u + 1)),
        ),
    }[name]
    t = fprime(u)
    conj = F_DIVERGENCES[name][1]
    assert abs(float((p * t).sum() - (q * conj(t)).sum()) - float((q * f(u)).sum())) < 1e-12


def test_small_tau_freezes_the_generator():
    """The proximal weight 1/(2 tau) pins the generator: the W2 move of one JKO step shrinks to 0 with tau.

    (The issue words this as "tau -> infinity"; under its own formula the proximal weight is 1/(2 tau), so
    the frozen limit is tau -> 0 and tau -> infinity drops the proximal term. Adam's first steps are
    scale-free, so the inner solve needs a few dozen steps to settle near the proximal minimiser.)"""
    y = torch.randn(64, 2) + 2.0
    moves = []
    for tau in (1e-5, 1e-2, 1.0):
        cfg = GWFConfig(batch_size=64, inner_steps=50, lr_generator=1e-2, hidden_size=32)  # 50 inner steps
        moves.append(WassersteinFlowTrainer("mmd", tau, cfg, seed=0).jko_step(y)["move"])
    assert moves[0] < 1e-3 * moves[2] and moves[0] < moves[1] < moves[2]


def test_particle_form_with_one_step_is_a_gan_generator_step():
    """Regressing onto x - tau grad h with one SGD step equals a GAN step on E h(g(z)) with lr scaled by 2 tau."""
    cfg = GWFConfig(objective="w1", form="particle", tau=0.3, inner_steps=1, critic_steps=0, batch_size=64)
    tr = WassersteinFlowTrainer("w1", 0.3, cfg, seed=0)
    tr.opt_g = torch.optim.SGD(tr.generator.parameters(), lr=0.01)
    before = [p.detach().clone() for p in tr.generator.parameters()]
    state = tr.gen.get_state()
    z = torch.randn(64, 2, generator=tr.gen)  # the latent batch the step will draw
    tr.gen.set_state(state)
    tr.generator.zero_grad()
    tr.first_variation(tr.generator(z)).mean().backward()  # GAN generator gradient
    expected = [b - 0.01 * 2 * 0.3 * p.grad for b, p in zip(before, tr.generator.parameters())]
    tr.jko_step(torch.randn(64, 2))
    for e, p in zip(expected, tr.generator.parameters()):
        torch.testing.assert_close(p.detach(), e, rtol=1e-5, atol=1e-6)


def test_linearised_jko_step_is_the_particle_regression_step():
    """The unifying view: minimising E h(g(z)) + E|g(z) - g_k(z)|^2 / (2 tau) with h affine (the first
    variation linearised at mu_k) is regressing g(z) onto the moved particles g_k(z) - tau grad h. The two
    losses differ by a constant times 2 tau, so SGD with learning rates in ratio 2 tau gives the same
    generator after every inner step, for any generator."""
    tau, lr = 0.3, 0.05
    runs = {}
    for form, step_lr in (("jko", lr * 2 * tau), ("particle", lr)):
        cfg = GWFConfig(objective="w1", form=form, tau=tau, inner_steps=6, critic_steps=0, batch_size=64)
        tr = WassersteinFlowTrainer("w1", tau, cfg, seed=0)
        torch.manual_seed(5)
        tr.critic = torch.nn.Linear(2, 1)  # an affine critic: its linearisation is itself
        tr.opt_g = torch.optim.SGD(tr.generator.parameters(), lr=step_lr)
        z = torch.randn(8, 2, generator=torch.Generator().manual_seed(1))
        start = tr.generator(z).detach()
        tr.jko_step(torch.randn(64, 2))
        runs[form] = tr.generator(z).detach()
    torch.testing.assert_close(runs["jko"], runs["particle"], rtol=1e-5, atol=1e-6)
    assert (runs["jko"] - start).abs().max() > 1e-2  # the step moves the generator


def test_energy_decreases_along_jko_steps_gaussian_to_gaussian():
    """Affine generator N(0, I) -> N(m, s^2 I) under MMD^2 JKO steps: the energy and the closed-form W2 to the
    target fall step after step, and the mean travels along the W2 geodesic (the segment towards m)."""
    m, s = torch.tensor([3.0, 0.0]), 0.5
    y = m + s * torch.randn(512, 2, generator=torch.Generator().manual_seed(1))
    gen = torch.nn.Linear(2, 2)
    with torch.no_grad():
        gen.weight.copy_(torch.eye(2))
        gen.bias.zero_()
    cfg = GWFConfig(batch_size=512, inner_steps=10, lr_generator=2e-2, bandwidths=(1.0, 2.0))
    tr = WassersteinFlowTrainer("mmd", 0.5, cfg, generator=gen, seed=0)
    z_eval = torch.randn(2000, 2, generator=torch.Generator().manual_seed(2))

    def state():
        with torch.no_grad():
            a, b = gen.weight, gen.bias
            sv = torch.linalg.svdvals(a)  # W2^2 between N(b, AA^T) and N(m, s^2 I) for symmetric-ish A
            w2 = (b - m).pow(2).sum() + (sv - s).pow(2).sum()
            return float(mmd2(gen(z_eval), y, cfg.bandwidths)), float(w2.sqrt()), b.clone()

    energies, w2s, means = zip(*[state()] + [(tr.jko_step(y), state())[1] for _ in range(12)])
    assert all(e1 <= e0 + 1e-4 for e0, e1 in zip(energies, energies[1:]))
    assert energies[-1] < 0.5 * energies[0]
    assert all(w1 <= w0 + 1e-3 for w0, w1 in zip(w2s, w2s[1:]))
    for b in means[1:]:  # on the segment from 0 to m: no sideways component, progress in [0, 1]
        assert abs(float(b[1])) < 0.1 and 0.0 < float(b[0]) / 3.0 < 1.0


def test_bad_inputs_raise_clear_errors():
    """Invalid configs and malformed target batches raise ValueError naming the problem."""
    with pytest.raises(ValueError, match="objective"):
        GWFConfig(objective="hellinger")
    with pytest.raises(ValueError, match="tau"):
        GWFConfig(tau=-1.0)
    with pytest.raises(ValueError, match="particle"):
        GWFConfig(form="particle", tau=0.0)
    tr = WassersteinFlowTrainer("js", 0.1, GWFConfig(batch_size=16))
    with pytest.raises(ValueError, match="target batch"):
        tr.jko_step(torch.randn(16, 3))
    with pytest.raises(ValueError, match="NaN"):
        tr.jko_step(torch.full((16, 2), math.nan))
    with pytest.raises(ValueError, match="steps"):
        tr.train(lambda n: torch.randn(n, 2), 0)


def test_demo_quick_smoke(tmp_path):
    """The quick demo runs end to end and writes its results JSON."""
    from families.gwf.demo import main

    assert main(["--quick", "--out", str(tmp_path)]) == 0
    run = load_results(tmp_path)["runs"]["ring8/mmd/0.1"][0]
    assert not run["diverged"] and 0.05 < run["w2"] < 5.0  # ring of radius 2: W2 below its diameter
