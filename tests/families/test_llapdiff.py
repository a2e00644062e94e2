"""Tests of the LLapDiff family: stable poles, arbitrary timestamps, pole recovery, CRPS, bad inputs."""

from __future__ import annotations

import pytest
import torch

from families.demo_cli import load_results
from families.llapdiff import LLapDiff, LLapDiffConfig, PoleBank, crps_ensemble, fit_poles, laplace_basis
from families.llapdiff.data import regime_oscillators


def test_every_pole_has_positive_decay_and_bounded_frequency() -> None:
    """rho > 0 and 0 < omega < pi for extreme raw parameters and extreme per-sample shifts."""
    bank = PoleBank(6, alpha_min=1e-3)
    with torch.no_grad():
        bank.raw_rho.copy_(torch.tensor([-1e4, -50.0, 0.0, 3.0, 50.0, 1e4]))
        bank.raw_omega.copy_(torch.tensor([-1e4, -50.0, 0.0, 3.0, 50.0, 1e4]))
    delta = torch.tensor([[-1e6] * 12, [1e6] * 12, [0.0] * 12])
    rho, omega = bank(delta, batch=3)
    assert (rho > 0).all()
    assert (omega >= 0).all() and (omega <= torch.pi).all()
    assert rho.min() >= 1e-3 - 1e-9  # alpha_min is a hard floor


def test_basis_at_unsorted_and_duplicated_timestamps() -> None:
    """Evaluating at a permuted / duplicated set of times permutes / duplicates the rows exactly."""
    rho, omega = torch.rand(2, 4) + 0.01, torch.rand(2, 4) * 3
    t = torch.rand(2, 9) * 5
    perm = torch.tensor([3, 0, 8, 8, 1, 3, 7, 2, 5, 4, 6])  # unsorted, with duplicates
    full = laplace_basis(t, rho, omega)
    torch.testing.assert_close(laplace_basis(t[:, perm], rho, omega), full[:, perm])
    single = laplace_basis(t[:, 4:5], rho, omega)  # one timestamp on its own
    torch.testing.assert_close(single[:, 0], full[:, 4])


@pytest.mark.parametrize("lite", [False, True], ids=["default", "lite"])
def test_denoiser_is_set_native_in_time_and_reads_out_any_times(lite: bool) -> None:
    """At the denoiser itself: shuffling the noisy (time, value) pairs shuffles its output the same way;
    its expansion can be read at any other times, pointwise; and moving the input times changes the output.
    Holds with the gated head and step-conditioned poles (default) and without them (lite)."""
    torch.manual_seed(3)
    config = (LLapDiffConfig.lite if lite else LLapDiffConfig)(num_channels=2, num_poles=3, hidden_size=8)
    model = LLapDiff(config)
    trained = [model.refine, model.pole_head] + ([] if model.head is None else [model.head.outer])
    for layer in trained:  # non-trivial weights, as after training
        for p in layer.parameters():
            torch.nn.init.normal_(p, std=0.3)
    model = model.double()  # the least-squares analysis is ill-conditioned in float32
    hist, mask = torch.randn(1, 12, 2, dtype=torch.float64), torch.ones(1, 12, 2, dtype=torch.float64)
    summary = model.condition(hist, mask, torch.linspace(-3, 0, 12, dtype=torch.float64)[None])
    tq = torch.tensor([[0.1, 2.0, 0.5, 1.0, 1.5, 0.7]], dtype=torch.float64)  # unsorted, irregular
    x, step = torch.randn(1, 6, 2, dtype=torch.float64), torch.tensor([300])
    with torch.no_grad():
        out = model.denoise(x, tq, step, summary)
        perm = torch.tensor([3, 0, 5, 1, 4, 2])
        shuffled = model.denoise(x[:, perm], tq[:, perm], step, summary)
        torch.testing.assert_close(shuffled, out[:, perm])
        t_new = torch.tensor(
            [[2.5, 0.3, 0.3, 4.0]], dtype=torch.float64
        )  # unseen, duplicated, beyond the horizon
        read = model.denoise(x, tq, step, summary, t_out=torch.cat([tq, t_new], 1))
        torch.testing.assert_close(read[:, :6], out)
        torch.testing.assert_close(read[:, 7], read[:, 8])
        one = model.denoise(x, tq, step, summary, t_out=t_new[:, 3:])
        torch.testing.assert_close(one[:, 0], read[:, 9])
        moved = model.denoise(x, tq.flip(1), step, summary)
        assert (moved - out).abs().max() > 1e-2  # the times are used, so the checks above can fail


def test_poles_follow_the_step_only_when_step_conditioned() -> None:
    """With step-conditioned poles (default) two noise levels give different poles for the same history;
    in the lite setting they are equal."""
    hist, mask, th = torch.randn(2, 10, 2), torch.ones(2, 10, 2), torch.linspace(-2, 0, 10).expand(2, -1)
    for lite in (False, True):
        config = (LLapDiffConfig.lite if lite else LLapDiffConfig)(num_channels=2, num_poles=3, hidden_size=8)
        model = LLapDiff(config)
        torch.nn.init.normal_(model.pole_head.weight, std=0.5)
        summary = model.condition(hist, mask, th)
        with torch.no_grad():
            low = model.poles_for(summary, model.step_embedding(torch.tensor([5, 5]), summary.dtype))
            high = model.poles_for(summary, model.step_embedding(torch.tensor([900, 900]), summary.dtype))
        gap = (low[0] - high[0]).abs().max() + (low[1] - high[1]).abs().max()
        assert (gap < 1e-7) if lite else (gap > 1e-3)


def test_gated_head_leaves_the_span_of_the_basis() -> None:
    """Pure synthesis lies in the column span of the basis at the output times; with the gated head (given
    non-trivial weights) the output has a component orthogonal to that span."""
    from families.llapdiff.model import laplace_basis

    torch.manual_seed(1)
    hist, mask, th = torch.randn(1, 10, 2), torch.ones(1, 10, 2), torch.linspace(-2, 0, 10)[None]
    tq, x, step = torch.linspace(0.2, 6, 30)[None], torch.randn(1, 30, 2), torch.tensor([100])
    for gated in (False, True):
        model = LLapDiff(
            LLapDiffConfig(num_channels=2, num_poles=2, hidden_size=8, gated_head=gated)
        ).double()
        if gated:
            torch.nn.init.normal_(model.head.outer.weight, std=0.5)
        summary = model.condition(hist.double(), mask.double(), th.double())
        with torch.no_grad():
            out = model.denoise(x.double(), tq.double(), step, summary)[0]  # (30, 2)
            rho, omega = model.poles_for(summary, model.step_embedding(step, summary.dtype))
        basis = laplace_basis(tq.double(), rho, omega)[0]  # (30, 4)
        coef = torch.linalg.lstsq(basis, out).solution
        outside = (out - basis @ coef).norm() / out.norm()
        assert (outside > 1e-2) if gated else (outside < 1e-8)


def test_v_prediction_and_min_snr_weighting_follow_their_definitions() -> None:
    """v round-trips to x0 at every noise level; min-SNR weights are min(SNR, gamma) for x0 and
    min(SNR, gamma) / (SNR + 1) for v; both settings train (finite loss, gradients) and sample."""
    from families.llapdiff.model import min_snr_weight, v_target, x0_from_v

    x0, eps = torch.randn(4, 6, 2), torch.randn(4, 6, 2)
    abar = torch.tensor([0.999, 0.9, 0.5, 0.01]).view(-1, 1, 1)
    xt = abar.sqrt() * x0 + (1 - abar).sqrt() * eps
    v = v_target(x0, eps, abar)
    torch.testing.assert_close(x0_from_v(xt, v, abar), x0)
    torch.testing.assert_close(
        v, (xt * abar.sqrt() - x0) / (1 - abar).sqrt()
    )  # v = (sqrt(abar) x_t - x0) / s
    a = torch.tensor([0.5, 0.9, 0.99])  # SNR 1, 9, 99
    torch.testing.assert_close(min_snr_weight(a, 5.0, "x0"), torch.tensor([1.0, 5.0, 5.0]))
    torch.testing.assert_close(min_snr_weight(a, 5.0, "v"), torch.tensor([0.5, 0.5, 5.0 / 100]))
    hist, mask, th = torch.randn(3, 10, 2), torch.ones(3, 10, 2), torch.linspace(-2, 0, 10).expand(3, -1)
    target, tq = torch.randn(3, 5, 2), torch.linspace(0.1, 1, 5).expand(3, -1)
    for config in (LLapDiffConfig.lite, LLapDiffConfig):
        model = LLapDiff(config(num_channels=2, num_poles=2, hidden_size=8, sampling_steps=8))
        torch.manual_seed(0)
        loss = model.loss(hist, mask, th, target, tq)
        loss.backward()
        assert torch.isfinite(loss) and model.refine[0].weight.grad.abs().sum() > 0
        samples = model.sample(hist, mask, th, tq, num_samples=2)
        assert samples.shape == (2, 3, 5, 2) and torch.isfinite(samples).all()
    with pytest.raises(ValueError, match="prediction"):
        LLapDiffConfig(prediction="eps")


def test_loss_uses_the_v_target_with_min_snr_weights() -> None:
    """The training loss equals the min-SNR-weighted MSE to v recomputed by hand from the same draws."""
    from families.llapdiff.model import min_snr_weight, v_target

    model = LLapDiff(LLapDiffConfig(num_channels=2, num_poles=2, hidden_size=8, cond_drop_prob=0.2))
    hist, mask, th = torch.randn(6, 10, 2), torch.ones(6, 10, 2), torch.linspace(-2, 0, 10).expand(6, -1)
    target, tq = torch.randn(6, 5, 2), torch.linspace(0.1, 1, 5).expand(6, -1)
    torch.manual_seed(7)
    loss = model.loss(hist, mask, th, target, tq)
    torch.manual_seed(7)  # replay the same random draws, in the same order
    keep = torch.rand(6, 1) >= 0.2
    step = torch.randint(0, 1000, (6,))
    eps = torch.randn_like(target)
    abar = model.alpha_bar[step].view(-1, 1, 1)
    with torch.no_grad():
        out = model.denoise(
            abar.sqrt() * target + (1 - abar).sqrt() * eps, tq, step, model.condition(hist, mask, th) * keep
        )
    per = (out - v_target(target, eps, abar)).pow(2).mean((1, 2)) * min_snr_weight(abar.view(-1), 5.0, "v")
    torch.testing.assert_close(loss.detach(), per.mean())


def test_karras_steps_and_guidance_follow_their_definitions() -> None:
    """Karras steps descend, skip step 0 and crowd at low noise; guidance grows from g_min (pure noise) to
    g_max (clean), u + g(c - u) without rescaling, and the rescaled output keeps the conditional std."""
    from families.llapdiff.diffusion import guidance_scale, guide, karras_step_indices

    model = LLapDiff(LLapDiffConfig(num_channels=2))
    steps = model.sampling_steps()
    assert steps.min() >= 1 and (steps.diff() < 0).all() and 40 <= len(steps) <= 64
    assert (steps < 100).sum() > (steps > 900).sum() / 4  # many steps at low noise
    torch.testing.assert_close(karras_step_indices(model.alpha_bar, 64), steps)
    assert guidance_scale(torch.tensor(0.0), 1.0, 2.0, 1.0) == 1.0
    assert guidance_scale(torch.tensor(1.0), 1.0, 2.0, 1.0) == 2.0
    c, u = torch.randn(3, 7, 2), torch.randn(3, 7, 2)
    g = torch.tensor(1.5)
    torch.testing.assert_close(guide(c, u, g, rescale=False), u + 1.5 * (c - u))
    torch.testing.assert_close(guide(c, u, g).std((1, 2)), c.std((1, 2)))
    free = torch.zeros(3, 7, 1)
    torch.testing.assert_close(guide(c, u, g, rescale=False, free=free), c)  # g = 1 at observed points


def test_inpainting_keeps_observed_values_and_fills_the_rest() -> None:
    """Inpainted samples return the observed points exactly and finite values elsewhere; the history
    imputation keeps every observed value and re-centres each window to start at t_start."""
    from families.llapdiff.impute import inpaint_history, window_starts

    torch.manual_seed(2)
    model = LLapDiff(LLapDiffConfig(num_channels=2, num_poles=2, hidden_size=8, sampling_steps=8))
    hist, mask, th = torch.randn(2, 10, 2), torch.ones(2, 10, 2), torch.linspace(-2, 0, 10).expand(2, -1)
    tq = torch.linspace(0.1, 1, 5).expand(2, -1)
    y_obs, obs = torch.randn(2, 5, 2), torch.tensor([[1, 0, 1, 0, 0], [0, 1, 1, 1, 0]], dtype=torch.float32)
    samples = model.sample(hist, mask, th, tq, num_samples=3, y_obs=y_obs, obs_mask=obs)
    assert torch.isfinite(samples).all()
    kept = obs.bool()
    torch.testing.assert_close(samples[:, kept], y_obs[kept].expand(3, -1, -1))
    assert (samples[:, ~kept] - y_obs[~kept]).abs().min() > 0  # the free points are sampled, not copied
    assert window_starts(96, 48) == [48, 0] and window_starts(10, 4) == [6, 2, 0]
    hidden = mask.clone()
    hidden[0, 3:6] = 0.0
    gappy = hist.clone()
    gappy[hidden == 0] = float("nan")
    filled = inpaint_history(model, gappy, hidden, th, window=4, t_start=0.25, num_samples=2)
    torch.testing.assert_close(filled[hidden > 0], hist[hidden > 0])
    assert torch.isfinite(filled).all()
    with pytest.raises(ValueError, match="y_obs"):
        model.sample(hist, mask, th, tq, y_obs=y_obs)


def test_pole_recovery_on_noiseless_damped_oscillator() -> None:
    """Fitting one pole pair to e^{-0.3 t}(cos 1.2t + 0.5 sin 1.2t) at irregular times recovers (0.3, 1.2)."""
    t = torch.sort(torch.rand(40) * 8).values
    y = (torch.exp(-0.3 * t) * (torch.cos(1.2 * t) + 0.5 * torch.sin(1.2 * t))).unsqueeze(-1)
    rho, omega, mse = fit_poles(t, y, num_poles=1, steps=300, restarts=4)
    assert mse < 1e-6
    assert rho.item() == pytest.approx(0.3, abs=1e-2)
    assert omega.item() == pytest.approx(1.2, abs=1e-2)


def test_crps_of_deterministic_forecast_equals_mae() -> None:
    """With one ensemble member CRPS equals MAE; a spread ensemble around the truth scores lower."""
    target = torch.randn(5, 7, 3)
    point = target + 0.3 * torch.randn_like(target)
    torch.testing.assert_close(crps_ensemble(point[None], target), (point - target).abs().mean())
    ens = target[None] + 0.3 * torch.randn(64, *target.shape)
    assert crps_ensemble(ens, target) < (ens.mean(0) - target).abs().mean() + (ens - target).abs().mean()


def test_deepar_ensemble_levels_are_evenly_spaced_quantiles() -> None:
    """The DeepAR baseline's central-interval levels put its S members at the quantiles (m + 0.5) / S."""
    from families.llapdiff.baselines import ensemble_levels

    levels = ensemble_levels(8)
    lows = sorted((1 - lv / 100) / 2 for lv in levels)
    highs = sorted(1 - (1 - lv / 100) / 2 for lv in levels)
    assert lows + highs == pytest.approx([(m + 0.5) / 8 for m in range(8)])
    with pytest.raises(ValueError, match="even"):
        ensemble_levels(3)


def test_training_lowers_loss() -> None:
    """A few Adam steps on irregular regime data lower the denoising loss on a fixed noise draw."""
    data = regime_oscillators(16, history=24, horizon=8, missing_rate=0.5, seed=0)
    model = LLapDiff(LLapDiffConfig(num_channels=3, num_poles=4, hidden_size=16))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    args = (data["hist"], data["mask"], data["t_hist"], data["target"], data["t_query"])

    def fixed_loss() -> float:
        torch.manual_seed(0)
        with torch.no_grad():
            return model.loss(*args).item()

    before = fixed_loss()
    for _ in range(30):
        loss = model.loss(*args)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert fixed_loss() < before


def test_bad_inputs_raise_clear_errors() -> None:
    """Invalid configs, shapes, NaN observations, empty queries and bad rates raise ValueError."""
    with pytest.raises(ValueError, match="alpha_min"):
        LLapDiffConfig(alpha_min=0.0)
    with pytest.raises(ValueError, match="omega_max"):
        LLapDiffConfig(omega_max=4.0)
    model = LLapDiff(LLapDiffConfig(num_channels=2, num_poles=2, hidden_size=8))
    hist, mask, th = torch.randn(1, 6, 2), torch.ones(1, 6, 2), torch.linspace(-1, 0, 6)[None]
    with pytest.raises(ValueError, match="history"):
        model.loss(hist[..., :1], mask[..., :1], th, torch.randn(1, 3, 1), torch.ones(1, 3))
    bad = hist.clone()
    bad[0, 2, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        model.sample(bad, mask, th, torch.ones(1, 3))
    with pytest.raises(ValueError, match="t_query"):
        model.sample(hist, mask, th, torch.ones(1, 0))
    with pytest.raises(ValueError, match="finite"):
        laplace_basis(torch.tensor([[float("nan")]]), torch.ones(1, 1), torch.ones(1, 1))
    with pytest.raises(ValueError, match="missing_rate"):
        regime_oscillators(2, missing_rate=1.0)
    with pytest.raises(ValueError, match="cond_drop_prob"):
        LLapDiffConfig(cond_drop_prob=0.0)  # guidance without an unconditional model
    with pytest.raises(ValueError, match="step_spacing"):
        LLapDiffConfig(step_spacing="cosine")


def test_demo_quick_smoke(tmp_path) -> None:
    """The demo runs end to end in quick mode without the heavy baselines and writes results."""
    from families.llapdiff.demo import main

    assert main(["--quick", "--no-heavy", "--workers", "1", "--out", str(tmp_path)]) == 0
    res = load_results(tmp_path)
    assert res["seeds"] == 1 and res["wall_time_s"] > 0
    for r in res["results"]:
        # a deterministic forecast's CRPS is its MAE (a known answer for the CRPS estimator)
        assert r["gru_dt"]["crps"] == pytest.approx(r["gru_dt"]["mae"], abs=1e-6)
        for name in (
            "llapdiff",
            "llapdiff_x0",
            "llapdiff_lite",
        ):  # CRPS = E|X - y| - E|X - X'| / 2: with members this spread it falls below the mean's MAE
            assert 0.05 < r[name]["crps"] < r[name]["mae"]
        data = regime_oscillators(16, missing_rate=r["missing"], seed=1000)  # the demo's quick test split
        zero_fill = data["hist_clean"].abs().mean().item()  # imputing 0 everywhere scores about this
        assert r["impute_linear_mae"] < 0.35 * zero_fill  # smooth signals: interpolation is close
        assert r["impute_llapdiff_x0_mae"] < zero_fill  # inpainting uses the observed points


def test_latent_vae_and_lapformer_inpainting() -> None:
    """The SetVAE learns a latent that reconstructs its series, and latent inpainting returns the observed
    horizon points exactly while filling the others with finite values."""
    from families.llapdiff.latent import LapFormerLLapDiff, reconstruction_mae, train_latent

    train = regime_oscillators(24, seed=0)
    model = train_latent(train, vae_steps=300, steps=2, seed=0,
                         config=LLapDiffConfig(hidden_size=16, num_poles=2, sampling_steps=3))  # fmt: skip
    assert isinstance(model.diffusion, LapFormerLLapDiff)
    target = train["target"][:4]
    assert reconstruction_mae(model, target) < 0.4 * target.abs().mean().item()  # untrained: about 1.0x
    visible = torch.zeros(4, target.shape[1])
    visible[:, ::2] = 1.0
    s = model.sample(train["hist"][:4], train["mask"][:4], train["t_hist"][:4], train["t_query"][:4], 2,
                     y_obs=target, obs_mask=visible)  # fmt: skip
    assert s.shape == (2, *target.shape) and torch.isfinite(s).all()
    assert torch.equal(s[:, :, ::2], target[:, ::2].expand(2, -1, -1, -1))
    assert not torch.equal(s[:, :, 1::2], target[:, 1::2].expand(2, -1, -1, -1))


def test_weight_average_follows_its_warmed_up_decay() -> None:
    """Known answer: from weights 0, two updates at weights 1 with decay 0.5 give 1 - 0.1 * (2/11) (the
    warm-up caps the decay at (1 + t) / (10 + t)); `copy_to` writes the average into the module."""
    from families.llapdiff.diffusion import WeightAverage

    m = torch.nn.Linear(2, 1)
    torch.nn.init.zeros_(m.weight)
    avg = WeightAverage(m, 0.5)
    torch.nn.init.ones_(m.weight)
    avg.update(m)
    avg.update(m)
    avg.copy_to(m)
    assert torch.allclose(m.weight, torch.full_like(m.weight, 1 - 0.1 * 2 / 11))
    with pytest.raises(ValueError, match="decay"):
        WeightAverage(m, 1.0)
