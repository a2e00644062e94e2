"""The thought-channel trainer's bridge mode (`finetune/bridge_channel.py`): the answerer reads the question
only and k bridged thoughts per holder; `latentworks finetune mas --sender S --base R` trains the bridge
alone (both models frozen), saves it under its name in the model cache naming S and R, and evaluates the
hand-off rows across the pair; settings that do not apply are refused before anything loads."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from eval.tasks import handoff as th
from finetune import thought_channel as tc
from finetune.bridge_channel import bridge_state, setup
from latent.bridge import Bridge
from latent.testing import tiny_pair
from latentworks.cli import main


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return tiny_pair(tmp_path_factory.mktemp("pair"))


def test_the_answerer_reads_the_question_and_bridged_thoughts_only(pair):
    sender, receiver = pair
    cfg = tc.ThoughtChannelConfig(
        sender=sender.model.name_or_path, base=receiver.model.name_or_path, out_dir="x"
    )
    sender, bridge = setup(cfg, receiver)
    items = th.make_items("pick", 2, "train", seed=3)
    msgs, state = bridge_state(receiver, sender, bridge, items, k=3)
    text = json.dumps(msgs)
    assert all(it.question in text for it in items)
    assert not any(s in text or s.split()[-1].rstrip(".") in text for it in items for s in it.shares)
    assert state.length == 2 * 3 and state.last_hidden.shape[-1] == receiver.hidden_size


def test_finetune_mas_with_a_sender_trains_and_saves_a_bridge_by_name(pair, tmp_path, monkeypatch):
    sender, receiver = pair
    cache = tmp_path / "cache"
    monkeypatch.setenv("LATENTWORKS_CACHE", str(cache))
    for name, m in (("tiny-s", sender), ("tiny-r", receiver)):
        shutil.copytree(m.model.name_or_path, cache / "models" / name)
    init = Bridge.from_models(sender, receiver)
    argv = ["finetune", "mas", "--sender", "tiny-s", "--base", "tiny-r", "--levels", "relay", "--max-steps", "3",
            "--batch-size", "2", "--latent-curriculum", "2", "4", "--eval-n", "2", "--lr", "0.01",
            "--out-dir", str(tmp_path / "run")]  # fmt: skip
    assert main(argv) == 0
    saved = cache / "models" / "tiny-s-to-tiny-r-bridge"
    bridge = Bridge.from_pretrained("tiny-s-to-tiny-r-bridge")
    assert (bridge.sender, bridge.receiver) == ("tiny-s", "tiny-r")
    assert not torch.allclose(bridge.linear.weight, init.linear.weight)  # the bridge trained
    assert not (cache / "models" / "tiny-s-to-tiny-r-bridge-receiver").exists()  # the receiver did not
    card = json.loads((saved / "card.json").read_text())
    assert card["sender"] == "tiny-s" and card["eval_before"]
    assert set(card["eval_after"]["relay"]) == {
        "no_info", "oracle", "text_mas", "latent_only", "latent_only_random", "latent_only_other",
        "latent_only_const",
    }  # fmt: skip


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--task", "arith"], "`sender` trains a hand-off bridge: set `task` handoff"),
        (["--trainable", "all"], "`sender` keeps the base frozen"),
        (["--kv-frac", "0.5"], "`kv_frac` is not used with `sender`"),
    ],
)
def test_bridge_settings_that_do_not_apply_fail_before_anything_loads(
    tmp_path, monkeypatch, capsys, argv, message
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tc, "load_base", lambda cfg: pytest.fail("loaded a model"))
    assert main(["finetune", "mas", "--sender", "a", "--base", "b", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
