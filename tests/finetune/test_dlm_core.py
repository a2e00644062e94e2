"""DLM pieces that need no language model: envs, dialogue schema, rewards, data, evaluation accounting, configs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lbforaging", reason="DLM environments need `pip install lbforaging`")

from finetune.dlm.config import DLMConfig, load_config  # noqa: E402
from finetune.dlm.dialogue import (  # noqa: E402
    SCHEMA_VERSION,
    action_names,
    check_schema,
    execution_prompt,
    parse_action,
    parse_legal,
    render_action,
    render_observation,
    to_samples,
)
from finetune.dlm.envs import ENV_NAMES, IllegalActionError, make_env  # noqa: E402
from finetune.dlm.rewards import (  # noqa: E402
    PENALTY,
    agreement_reward,
    format_reward,
    legality_reward,
)
from finetune.dlm.rewards_online import make_env_return_reward  # noqa: E402

CONFIG_DIR = Path(__file__).parents[2] / "finetune" / "dlm" / "configs"


@pytest.fixture(autouse=True)
def _one_thread():
    """The MLP baselines run several times faster on one thread than on two contended ones."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


def _available_envs() -> list[str]:
    out = ["lbforaging"]
    try:
        import mpe2  # noqa: F401

        out.append("mpe")
    except ImportError:
        pass
    return out


@pytest.mark.parametrize("env_name", ENV_NAMES)
def test_every_action_round_trips_through_text(env_name):
    """Every action of every env renders to text and parses back to itself (also with case/space noise)."""
    for a, name in enumerate(action_names(env_name)):
        assert parse_action(env_name, render_action(env_name, a)) == a
        assert parse_action(env_name, f"  {name.upper()}.\n") == a
    assert parse_action(env_name, "north east") is None
    assert parse_action(env_name, "") is None
    assert parse_action(env_name, None) is None


@pytest.mark.parametrize("env_name", _available_envs())
def test_observation_text_round_trips_legal_actions(env_name):
    """The `legal:` line of a rendered observation parses back to the legal set, for every agent."""
    env = make_env(env_name, "6x6-2p-2f" if env_name == "lbforaging" else "spread-2")
    env.reset(3)
    for obs, legal in zip(env.observations(), env.legal_actions()):
        text = render_observation(env_name, obs, legal)
        assert parse_legal(env_name, text) == sorted(legal)
        assert json.loads(json.dumps(obs)) == obs  # observations are JSON-serialisable for the dataset


@pytest.mark.parametrize(
    "scenario", ["5x5-2p-1f", "6x6-2p-2f", "8x8-3p-2f-coop", "10x10-3p-3f-2s", "11x11-6p-4f"]
)
def test_lbf_scenarios_build_and_step(scenario):
    """Several LBF sizes, including the paper's 11x11-6p-4f, reset and step with legal actions."""
    env = make_env("lbforaging", scenario)
    env.reset(0)
    assert len(env.observations()) == env.n_agents
    rewards, done = env.step([lg[0] for lg in env.legal_actions()])
    assert len(rewards) == env.n_agents and isinstance(done, bool)


def test_unknown_env_and_scenario_raise_clear_errors():
    """Bad env names and scenarios name the problem and the accepted form."""
    with pytest.raises(ValueError, match="unknown environment 'smac'"):
        make_env("smac", "3s5z")
    with pytest.raises(ValueError, match="unknown lbforaging scenario"):
        make_env("lbforaging", "11x12-6p-4f")
    with pytest.raises(ValueError, match="outside the registered range"):
        make_env("lbforaging", "30x30-2p-1f")
    with pytest.raises(ValueError, match="unknown mpe scenario"):
        make_env("mpe", "tag-3")


def test_adapter_refuses_illegal_actions_and_restores_state():
    """LBF itself silently turns an illegal action into NONE; the adapter raises instead, and set_state replays."""
    env = make_env("lbforaging", "6x6-2p-2f")
    env.reset(1)
    legal = env.legal_actions()
    bad = next(a for a in range(6) if a not in legal[0])
    with pytest.raises(IllegalActionError):
        env.step([bad, legal[1][0]])
    state = env.get_state()
    obs = env.observations()
    env.step([lg[-1] for lg in legal])
    env.set_state(state)
    assert env.observations() == obs and env.legal_actions() == legal


GARBAGE = [
    None,
    "",
    "   ",
    42,
    [],
    [{}],
    [{"role": "assistant"}],
    "north " * 200,
    "go north now",
    "\x00\x01",
    ["load"],
]


@pytest.mark.parametrize(
    "reward", [format_reward, legality_reward, agreement_reward, make_env_return_reward(2)]
)
def test_rewards_penalise_garbage_and_never_raise(reward):
    """Garbage, empty and over-long completions (and malformed columns) get PENALTY, never an exception."""
    env = make_env("lbforaging", "6x6-2p-2f")
    env.reset(0)
    state = json.dumps(env.get_state())
    n = len(GARBAGE)
    cols = dict(
        env=["lbforaging"] * n,
        legal=[[0, 1]] * n,
        action=[1] * n,
        scenario=["6x6-2p-2f"] * n,
        state=[state] * n,
        joint_actions=[[0, 0]] * n,
        agent=[0] * n,
    )
    assert reward(completions=GARBAGE, **cols) == [PENALTY] * n
    assert reward(completions=None) == []
    assert reward(completions=["north"], env=["lbforaging"], legal="oops", state=[None]) in ([PENALTY], [1.0])


def test_rewards_score_legal_illegal_and_agreement():
    """Legal vs illegal vs matching completions get the documented scores (conversational format)."""
    comps = [[{"role": "assistant", "content": w}] for w in ("north", "load", "east")]
    cols = dict(env=["lbforaging"] * 3, legal=[[0, 1, 4]] * 3, action=[1, 1, 1])
    assert format_reward(completions=comps, **cols) == [1.0, 1.0, 1.0]
    assert legality_reward(completions=comps, **cols) == [1.0, PENALTY, 1.0]
    assert agreement_reward(completions=comps, **cols) == [1.0, 0.0, 0.0]


def test_env_return_reward_prefers_loading_adjacent_food():
    """Loading a liftable adjacent food beats the logged `none` by the full food return (tanh-squashed)."""
    from finetune.dlm.envs import LBFEnv

    env = LBFEnv("6x6-2p-1f")
    env.reset(0)
    field = np.zeros((6, 6), dtype=int)
    field[2, 2] = 1
    env.set_state({"field": field.tolist(), "players": [[2, 3, 1], [5, 5, 1]], "t": 0, "food_spawned": 1.0})
    state = json.dumps(env.get_state())
    reward = make_env_return_reward(1)
    cols = dict(
        env=["lbforaging"] * 2,
        legal=[env.legal_actions()[0]] * 2,
        scenario=["6x6-2p-1f"] * 2,
        state=[state] * 2,
        joint_actions=[[0, 0]] * 2,
        agent=[0, 0],
    )
    load, wait = reward(completions=["load", "none"], **cols)  # the logged action is `none`
    assert load == pytest.approx(np.tanh(1.0)) and wait == 0.0


def test_dataset_card_samples_and_schema_check(tmp_path):
    """Data generation writes a card per tier; samples follow the schema; another schema version is refused."""
    from finetune.dlm.config import DataConfig
    from finetune.dlm.data import generate_dataset, load_dataset_dir

    card = generate_dataset(
        DataConfig(scenarios=["5x5-2p-1f"], tiers=["good", "poor"], episodes_per_tier=2), tmp_path
    )
    assert [s["tier"] for s in card["tiers"]] == ["good", "poor"]
    assert (tmp_path / "README.md").read_text().count("| 5x5-2p-1f |") == 2
    rows = list(load_dataset_dir(tmp_path, tiers=["good"]))
    samples = to_samples(rows, teammate_prob=1.0)
    assert len(samples) == 2 * len(rows)
    assert samples[1]["prompt"][1]["content"].startswith("teammate 0")  # centralised training context
    assert samples[0]["prompt"] == execution_prompt(
        "lbforaging", json.loads(rows[0]["obs"][0]), rows[0]["legal"][0]
    )
    for s in samples:
        assert parse_action("lbforaging", s["completion"][0]["content"]) == s["action"]
        assert s["action"] in s["legal"]
    check_schema(SCHEMA_VERSION)
    with pytest.raises(ValueError, match="does not match"):
        check_schema("dlm-dialogue/0")
    from datasets import load_from_disk

    ds = load_from_disk(str(tmp_path / "trajectories")).map(
        lambda r: {"schema_version": "dlm-trajectories/0"}
    )
    ds.save_to_disk(str(tmp_path / "old" / "trajectories"))
    with pytest.raises(ValueError, match="regenerate it"):
        load_dataset_dir(tmp_path / "old")


class _SpyEnv:
    """A 2-agent env whose legal sets alternate; it records every executed joint action."""

    env_name, scenario, n_agents, action_names, fallback_action = (
        "lbforaging",
        "spy",
        2,
        action_names("lbforaging"),
        0,
    )

    def __init__(self, *_):
        self.t, self.executed = 0, []

    def reset(self, seed):
        self.t = 0

    def observations(self):
        return [{"level": 1, "foods": [], "agents": []}] * 2

    def legal_actions(self):
        return [[0, 1], [0, 2]] if self.t % 2 == 0 else [[0, 3], [0, 4, 5]]

    def step(self, actions):
        for a, lg in zip(actions, self.legal_actions()):
            assert a in lg, "the evaluation loop stepped the env with an illegal action"
        self.executed.append(list(actions))
        self.t += 1
        return [0.0, 0.0], self.t >= 4

    def won(self):
        return False

    def team_reward(self, rewards):
        return sum(rewards)


class _ScriptedProposals:
    name = "scripted"

    def __init__(self):
        self.queue = ["north", "garbage!", "east", 5, "WEST", "north", None, "load"]

    def act(self, env_name, batch):
        return [self.queue.pop(0) for _ in batch]


def test_eval_loop_counts_every_invalid_action_before_stepping():
    """Unparseable and illegal proposals are counted and replaced by the fallback; legal ones are executed."""
    from finetune.dlm.evaluate import run_episodes

    spies = []

    def factory(env_name, scenario):
        spies.append(_SpyEnv())
        return spies[-1]

    stats = run_episodes("lbforaging", "spy", _ScriptedProposals(), episodes=1, seed=0, env_factory=factory)
    assert stats.decisions == 8
    assert stats.unparseable == 2  # "garbage!" (t0), None (t3)
    assert stats.illegal == 3  # "east" (t1), "WEST" and "north" (t2)
    assert stats.invalid_rate == pytest.approx(5 / 8)
    assert spies[0].executed == [[1, 0], [0, 5], [0, 0], [0, 5]]


def test_every_shipped_config_loads_and_bad_configs_fail_together():
    """All YAML presets (searched recursively) load into DLMConfig; one error lists every problem."""
    files = sorted(CONFIG_DIR.rglob("*.yaml"))
    assert len(files) == 9
    for f in files:
        assert isinstance(load_config(f), DLMConfig)
    with pytest.raises(ValueError) as err:
        load_config(None, ["data.env=smac", "grpo.batch_size=30", "sft.tiers=[great]"])
    msg = str(err.value)
    assert "data.env" in msg and "grpo.batch_size" in msg and "sft.tiers" in msg
    with pytest.raises(ValueError, match="unknown key"):
        load_config(None, ["sft.epoch=2"])


def test_bc_and_cql_train_and_act_legally():
    """BC (one MLP per agent) and independent CQL fit the offline data and only pick legal actions."""
    from finetune.dlm.baselines import features, train_bc, train_cql
    from finetune.dlm.evaluate import run_episodes

    rows, _ = _collect("5x5-2p-1f", "good", 3)
    bc = train_bc("lbforaging", rows, epochs=20, hidden=16)
    assert len(bc.nets) == 2
    cql = train_cql("lbforaging", rows, steps=50, hidden=16)
    obs, legal = json.loads(rows[0]["obs"][0]), rows[0]["legal"][0]
    assert len(features("lbforaging", obs, legal)) == 1 + 4 * 4 + 5 * 4 + 6
    for policy in (bc, cql):
        stats = run_episodes("lbforaging", "5x5-2p-1f", policy, episodes=2, seed=0)
        assert stats.invalid_rate == 0.0 and stats.decisions > 0
    with pytest.raises(ValueError, match="gamma"):
        train_cql("lbforaging", rows, steps=1, gamma=1.0)


def _collect(scenario, tier, episodes):
    from finetune.dlm.data import collect_episodes

    return collect_episodes("lbforaging", scenario, tier, episodes=episodes, seed=0)


def test_cli_data_stage_writes_card_and_is_resumable(tmp_path):
    """`latentworks dlm data` writes the dataset + card, then skips on a second call (resumable stages)."""
    import argparse

    from finetune.dlm.cli import add_arguments, run

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    argv = [
        "data",
        "--run-dir",
        str(tmp_path),
        "--set",
        "data.episodes_per_tier=1",
        "--set",
        "data.tiers=[good]",
    ]
    assert run(parser.parse_args(argv)) == 0
    card = tmp_path / "data" / "card.json"
    stamp = card.stat().st_mtime_ns
    assert run(parser.parse_args(argv)) == 0
    assert card.stat().st_mtime_ns == stamp
    timings = json.loads((tmp_path / "timings.json").read_text())
    assert set(timings) == {"data"}


def test_eval_and_grpo_stages_need_the_sft_model_of_every_training_seed(tmp_path):
    """Re-evaluating a finished run (`latentworks dlm eval --force`) finds the per-seed SFT models, and a
    missing seed is named before anything loads."""
    from finetune.dlm.cli import require_sft

    cfg = load_config(None, [f"run_dir={tmp_path}", "train_seeds=[0,1]"])
    for seed in (0, 1):
        (tmp_path / f"seed_{seed}" / "sft").mkdir(parents=True)
    (tmp_path / "seed_0" / "sft" / "dlm_sft.json").write_text("{}")
    with pytest.raises(FileNotFoundError) as err:
        require_sft(cfg)
    assert "seed_1" in str(err.value) and "seed_0" not in str(err.value)
    (tmp_path / "seed_1" / "sft" / "dlm_sft.json").write_text("{}")
    require_sft(cfg)  # every seed trained: no error


def test_eval_of_the_prompted_pretrained_model_alone_needs_no_training_run():
    """`dlm eval --set eval.methods=[Prompted]` on a pretrained base evaluates the un-finetuned model without
    SFT models; any selection that includes a DLM row, or a scratch base (written by SFT), still needs them."""
    from finetune.dlm.cli import eval_needs_sft

    def needs(*overrides: str) -> bool:
        return eval_needs_sft(load_config(None, ["sft.model=smollm2-135m-instruct", *overrides]))

    assert not needs("eval.methods=[Prompted]")
    assert not needs("eval.methods=[Prompted,BC,Scripted]")
    assert needs()  # every method
    assert needs("eval.methods=[DLM-GRPO]")
    assert needs("eval.methods=[Prompted,DLM]")
    assert needs("eval.methods=[D]")  # a prefix of the DLM labels selects them
    assert eval_needs_sft(load_config(None, ["eval.methods=[Prompted]"]))  # scratch base


def test_env_return_reward_keeps_every_legal_mpe_action_above_the_penalty():
    """MPE returns are about -1 per step; the relative, squashed score still ranks any legal action above garbage."""
    pytest.importorskip("mpe2", reason="MPE needs `pip install mpe2`")
    env = make_env("mpe", "spread-2")
    env.reset(5)
    state = json.dumps(env.get_state())
    reward = make_env_return_reward(3)
    n = 6
    cols = dict(
        env=["mpe"] * n,
        legal=[list(range(5))] * n,
        scenario=["spread-2"] * n,
        state=[state] * n,
        joint_actions=[[0, 0]] * n,
        agent=[0] * n,
    )
    scores = reward(completions=["stay", "left", "right", "down", "up", "jump"], **cols)
    assert scores[0] == 0.0  # the logged action itself
    assert all(PENALTY < x < 1.0 for x in scores[:5]) and scores[5] == PENALTY
