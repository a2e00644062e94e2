"""Tests of the ConFlux family: permutation and inverse, patch/unpatch identity, any number of variables."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from families.conflux import (
    ConFlux,
    ConFluxConfig,
    inverse_permutation,
    patchify,
    seriation_order,
    unpatchify,
)
from families.conflux.data import latent_factor_series, windows
from families.demo_cli import load_results


@pytest.mark.parametrize("method", ["spectral", "hclust", "none"])
def test_reordering_is_a_permutation_and_inverse_restores_input(method: str) -> None:
    """Every seriation returns a permutation; applying it then its inverse gives the input back exactly."""
    series, _ = latent_factor_series(300, 13, 3, seed=1)
    perm = seriation_order(series, method)
    assert sorted(perm.tolist()) == list(range(13))
    x = torch.randn(2, 13, 16)
    torch.testing.assert_close(x[:, torch.as_tensor(perm)][:, inverse_permutation(perm)], x, rtol=0, atol=0)


def test_spectral_order_groups_variables_of_the_same_factor() -> None:
    """After seriation, variables driven by the same latent factor form contiguous blocks."""
    series, group = latent_factor_series(1000, 32, 4, noise=0.3, seed=0)
    ordered = group[seriation_order(series, "spectral")]
    assert (np.diff(ordered) != 0).sum() == 3  # 4 blocks -> 3 boundaries
    assert (np.diff(group) != 0).sum() > 3  # the shuffled input was not already grouped


@pytest.mark.parametrize("num_vars", [1, 5, 8, 13])
def test_patch_then_unpatch_is_identity(num_vars: int) -> None:
    """patchify / unpatchify round-trips exactly, including N not divisible by p_v (padding)."""
    x = torch.randn(3, num_vars, 24)
    tokens = patchify(x, 4, 6)
    assert tokens.shape == (3, -(-num_vars // 4), 4, 24)
    torch.testing.assert_close(unpatchify(tokens, num_vars, 4, 6), x, rtol=0, atol=0)


def test_patch_groups_adjacent_variables_and_steps() -> None:
    """A token holds p_v adjacent variables x p_t adjacent steps (checked on an index tensor)."""
    x = torch.arange(2 * 6, dtype=torch.float32).view(1, 2, 6)  # 2 variables, 6 steps
    tokens = patchify(x, 2, 3)  # (1, 1, 2, 6)
    torch.testing.assert_close(tokens[0, 0, 0], torch.tensor([0.0, 1, 2, 6, 7, 8]))


def test_model_accepts_any_number_of_variables_and_is_order_equivariant() -> None:
    """One model forecasts N = 1, 7, 20 variables; with a stored order, outputs follow the caller's order."""
    model = ConFlux(ConFluxConfig(context_length=16, horizon=4, patch_len=4, max_variables=32))
    for n in (1, 7, 20):
        assert model(torch.randn(2, n, 16)).shape == (2, n, 4)
    x = torch.randn(2, 7, 16)
    perm = torch.tensor([3, 0, 6, 1, 5, 2, 4])
    with torch.no_grad():
        model.perm = torch.arange(7)
        seriated = model(x[:, perm])  # the caller pre-orders the variables; row j forecasts variable perm[j]
        model.perm = perm
        out = model(x)  # the model orders them itself and must hand back the caller's order
    torch.testing.assert_close(out[:, perm], seriated)
    torch.testing.assert_close(out, seriated[:, inverse_permutation(perm)])
    assert not torch.allclose(out, seriated)  # the order matters, so the check above can fail
    assert model.num_tokens(20) == 5 * 4


def test_training_lowers_loss() -> None:
    """A few Adam steps on shuffled latent-factor windows lower the forecast MSE."""
    series, _ = latent_factor_series(200, 8, 2, seed=3)
    x, y = (torch.from_numpy(a) for a in windows(series, 32, 8, stride=4))
    model = ConFlux(ConFluxConfig(context_length=32, horizon=8, patch_len=8, hidden_size=32))
    model.fit_order(series)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    with torch.no_grad():
        before = (model(x) - y).pow(2).mean().item()
    for _ in range(30):
        loss = (model(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < before


def test_bad_inputs_raise_clear_errors() -> None:
    """Invalid configs, shapes, NaNs, too many variables and non-permutations raise ValueError."""
    with pytest.raises(ValueError, match="multiple of `patch_len`"):
        ConFluxConfig(context_length=30, patch_len=8)
    with pytest.raises(ValueError, match="reorder"):
        ConFluxConfig(reorder="random")
    model = ConFlux(ConFluxConfig(context_length=16, horizon=4, patch_len=4, max_variables=8))
    with pytest.raises(ValueError, match="inputs"):
        model(torch.randn(2, 3, 15))
    with pytest.raises(ValueError, match="number of variables"):
        model(torch.randn(2, 9, 16))
    with pytest.raises(ValueError, match="NaN"):
        model(torch.full((1, 3, 16), float("nan")))
    with pytest.raises(ValueError, match="permutation"):
        inverse_permutation(np.array([0, 0, 1]))
    with pytest.raises(ValueError, match="NaN"):
        seriation_order(np.full((10, 3), np.nan))
    with pytest.raises(ValueError):
        windows(np.zeros((5, 2)), 4, 4)


def test_demo_quick_smoke(tmp_path) -> None:
    """The demo runs end to end in quick mode without the neuralforecast baselines and writes results."""
    pytest.importorskip("statsmodels", reason="macrodata ships with statsmodels")
    from families.conflux.demo import main

    assert main(["--quick", "--no-heavy", "--out", str(tmp_path)]) == 0
    syn = load_results(tmp_path)["synthetic"][0]
    # standardised series: forecasting the mean scores about 1, repeating the last value about 1.8; even
    # three optimizer steps must put ConFlux well under both (an untrained or broken forecaster does not)
    assert 0.05 < syn["conflux"]["mse"] < 0.95
    assert syn["conflux"]["mse"] < 0.6 * syn["naive_last"]["mse"]
