"""Offline GRPO rewards read the dataset alone: the simulator is never built or stepped."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("lbforaging", reason="DLM environments need `pip install lbforaging`")

from finetune.dlm.data import collect_episodes  # noqa: E402
from finetune.dlm.dialogue import to_samples  # noqa: E402
from finetune.dlm.return_model import fit_return_model, returns_to_go  # noqa: E402
from finetune.dlm.rewards import PENALTY, make_agreement_reward, reward_functions  # noqa: E402


@pytest.fixture(scope="module")
def offline():
    good, _ = collect_episodes("lbforaging", "6x6-2p-2f", "good", 6, seed=3)
    poor, _ = collect_episodes("lbforaging", "6x6-2p-2f", "poor", 6, seed=4)
    rows = good + poor
    model, stats = fit_return_model("lbforaging", rows, epochs=15)
    return rows, to_samples(rows, teammate_prob=0.0), model, stats


def _columns(samples):
    keys = ("env", "scenario", "agent", "legal", "action", "joint_actions", "state", "obs", "tier")
    return {k: [s[k] for s in samples] for k in keys}


@pytest.fixture
def simulator_calls(monkeypatch):
    """Every way into a simulator (our adapters and lbforaging itself) records the call and raises."""
    import lbforaging.foraging.environment as lbf

    from finetune.dlm import envs

    calls: list[str] = []

    def forbid(name):
        def fail(*args, **kwargs):
            calls.append(name)
            raise RuntimeError(f"simulator touched: {name}")

        return fail

    monkeypatch.setattr(envs, "make_env", forbid("make_env"))
    for cls in (envs.LBFEnv, envs.MPESpreadEnv):
        for meth in ("__init__", "reset", "step", "set_state"):
            monkeypatch.setattr(cls, meth, forbid(f"{cls.__name__}.{meth}"))
    for meth in ("__init__", "reset", "step"):
        monkeypatch.setattr(lbf.ForagingEnv, meth, forbid(f"ForagingEnv.{meth}"))
    return calls


COMPLETIONS = ["north", "load", "none", "east", "jump", "", "south west"]


def test_offline_rewards_never_touch_the_simulator(offline, simulator_calls):
    _, samples, model, _ = offline
    batch = [s for s in samples[:40] for _ in range(2)]
    comps = [[{"role": "assistant", "content": COMPLETIONS[k % len(COMPLETIONS)]}] for k in range(len(batch))]
    for mode in ("model", "none"):
        funcs = reward_functions(mode, ["good"], model)
        assert len(funcs) == (4 if mode == "model" else 3)
        for f in funcs:
            scores = f(completions=comps, **_columns(batch))
            assert len(scores) == len(batch)
            assert all(v is None or (math.isfinite(v) and -1.0 <= v <= 1.0) for v in scores)
    assert simulator_calls == []


def test_the_online_reward_is_caught_by_the_same_guard(offline, simulator_calls):
    """The control: the opt-in online reward does step the simulator, and the guard sees it."""
    _, samples, model, _ = offline
    online = reward_functions("online", ["good"], None, env_horizon=2)[-1]
    scores = online(completions=["north"] * 4, **_columns(samples[:4]))
    assert simulator_calls and scores == [PENALTY] * 4  # every replay failed inside the patched simulator


def test_agreement_targets_only_good_tier_actions():
    agree = make_agreement_reward(["good"])
    cols = dict(env=["lbforaging"] * 4, action=[1, 1, 1, 1], tier=["good", "good", "poor", "medium"])
    assert agree(completions=["north", "south", "north", "north"], **cols) == [1.0, 0.0, None, None]
    assert agree(completions=["jump"], env=["lbforaging"], action=[1], tier=["poor"]) == [PENALTY]


def test_return_model_explains_returns_and_scores_from_the_data(offline):
    rows, samples, model, stats = offline
    assert stats["val_mse"] < stats["val_target_var"]  # better than predicting the mean
    g = returns_to_go(rows, 0.95)
    assert all(x >= 0 for x in g) and max(g) > 0
    funcs = reward_functions("model", ["good"], model)
    s = samples[0]
    legal_word = ["none", "north", "south", "west", "east", "load"][s["legal"][0]]
    illegal = [
        w for a, w in enumerate(["none", "north", "south", "west", "east", "load"]) if a not in s["legal"]
    ]
    comps = [legal_word] + illegal[:1]
    scores = funcs[-1](completions=comps, **_columns([s] * len(comps)))
    assert -1.0 < scores[0] < 1.0
    if illegal:
        assert scores[1] == PENALTY


def test_config_refuses_poor_tier_agreement_and_unknown_objectives():
    from finetune.dlm.config import load_config

    with pytest.raises(ValueError) as err:
        load_config(
            None,
            ["grpo.agreement_tiers=[good, poor]", "grpo.loss_type=ppo", "grpo.return_reward=simulator"],
        )
    msg = str(err.value)
    assert "agreement_tiers" in msg and "loss_type" in msg and "return_reward" in msg
    cfg = load_config(None, [])
    assert (cfg.grpo.loss_type, cfg.grpo.beta, cfg.grpo.return_reward) == ("grpo", 0.04, "model")
    assert "poor" not in cfg.grpo.tiers and cfg.grpo.agreement_tiers == ["good"]
