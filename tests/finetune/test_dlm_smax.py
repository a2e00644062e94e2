"""SMAX adapter (jaxmarl): observations round-trip to text, strict legality, scripted expert wins battles."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("jaxmarl", reason="the SMAX adapter needs `pip install jaxmarl` (JAX on CPU)")

from finetune.dlm.dialogue import (  # noqa: E402
    action_names,
    parse_action,
    parse_legal,
    parse_smax_observation,
    render_action,
    render_observation,
)
from finetune.dlm.envs import IllegalActionError, make_env  # noqa: E402
from finetune.dlm.envs_smax import smax_expert  # noqa: E402


@pytest.fixture(scope="module")
def battle():
    """One 3m battle played by the scripted expert: (env after it, per-step observations and legal sets)."""
    env = make_env("smax", "3m")
    env.reset(0)
    rng = np.random.default_rng(0)
    views, done = [], False
    while not done:
        views.append((env.observations(), env.legal_actions(), env.get_state()))
        _, done = env.step(smax_expert(env, rng))
    return env, views


def test_smax_observations_round_trip_to_text(battle):
    _, views = battle
    for obs, legal, _ in views:
        for o, lg in zip(obs, legal):
            assert json.loads(json.dumps(o)) == o
            text = render_observation("smax", o, lg)
            assert parse_smax_observation(text) == o
            assert parse_legal("smax", text) == sorted(lg)
    for a in range(len(action_names("smax"))):
        assert parse_action("smax", render_action("smax", a)) == a


def test_smax_text_matches_the_simulator(battle):
    """Offsets and shooting legality agree with jaxmarl's unit positions and attack ranges."""
    env, views = battle
    checked = 0
    for obs, _, state in views:
        pos = np.array(state["pos"])
        for i, o in enumerate(obs):
            for u in o["enemies"]:
                d = pos[env.n_agents + u["id"] - 1] - pos[i]
                assert abs(u["dx"] - d[0]) <= 0.25 and abs(u["dy"] - d[1]) <= 0.25
                checked += 1
    assert checked > 10
    shootable = [any(k >= 5 for agent in lg for k in agent) for _, lg, _ in views]
    assert not shootable[0] and any(shootable)  # armies start out of range and close in


def test_smax_expert_wins_and_illegal_actions_are_refused(battle):
    env, views = battle
    assert env.won() and len(views) < env.max_steps
    env.reset(1)
    legal = env.legal_actions()
    bad = next(k for k in range(5, 5 + env.n_enemies) if k not in legal[0])
    with pytest.raises(IllegalActionError):
        env.step([bad] + [4] * (env.n_agents - 1))


def test_unseen_3s_vs_3z_is_registered_and_bad_names_fail():
    env = make_env("smax", "3s_vs_3z")
    env.reset(0)
    assert env.n_agents == 3 and env.observations()[0]["type"] == "stalker"
    with pytest.raises(ValueError, match="unknown smax scenario"):
        make_env("smax", "9z")


def test_battles_of_one_scenario_share_the_compiled_env_and_stay_independent(battle):
    """Every 3m battle reuses one jaxmarl env (compiled once); stepping one leaves another untouched."""
    played, views = battle
    a, b = make_env("smax", "3m"), make_env("smax", "3m")
    assert a._env is b._env is played._env
    a.reset(0)
    b.reset(5)
    before = b.get_state()
    rng = np.random.default_rng(0)
    for obs, legal, state in views[:5]:  # the fixture's battle, replayed on a second object
        assert a.get_state() == state and a.observations() == obs and a.legal_actions() == legal
        a.step(smax_expert(a, rng))
    assert b.get_state() == before
