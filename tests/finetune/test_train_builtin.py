"""Tests of the built-in model recipe: a miniature retrain, exact resumption, configs and the SFT mask."""

import json
from pathlib import Path

import pytest
import torch
from transformers import PreTrainedTokenizerBase

from eval.tasks.arith_data import make_problems, to_messages
from finetune import train_builtin as tb

RECIPES = Path(__file__).resolve().parents[2] / "finetune" / "recipes"


def _tiny(tmp_path, **kw) -> tb.BuiltinConfig:
    # the --tiny preset: a 2-layer, 32-wide model and 4 packed rows of 128 tokens per step
    return tb.load_config(None, **{**tb.TINY_OVERRIDES, "out_dir": str(tmp_path), "threads": 1, **kw})


def test_miniature_retrain_loss_falls_and_exports(tmp_path):
    """`main(--tiny)` trains, the loss falls, and the exported directory has weights, tokenizer and card."""
    export = tmp_path / "export"
    rc = tb.main(["--tiny", "--out-dir", str(tmp_path / "run"), "--export-dir", str(export), "--max-steps", "40",
                  "--threads", "1"])  # fmt: skip
    assert rc == 0
    log = json.loads((tmp_path / "run" / "train_log.json").read_text())
    first, last = log[0]["loss"], log[-1]["loss"]
    assert last < 0.75 * first, f"loss did not fall enough: {first:.3f} -> {last:.3f}"
    for name in ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "card.json",
                 "README.md", "loss_curve.png"):  # fmt: skip
        assert (export / name).is_file(), name
    card = json.loads((export / "card.json").read_text())
    for key in ("name", "params", "size_bytes", "heldout_accuracy", "heldout_n", "heldout_steps", "seed",
                "train_command", "wall_time_s", "tokens_seen", "transformers_version"):  # fmt: skip
        assert key in card, key
    assert card["heldout_n"] == 2 * 4  # eval_n=4 per step count, steps (2, 3)
    assert 0.0 <= card["heldout_accuracy"] <= 1.0


def test_resume_matches_an_uninterrupted_run(tmp_path, monkeypatch):
    """A run killed after its step-10 checkpoint and resumed ends with the same weights as one never stopped."""
    full_model, *_ = tb.train_loop(_tiny(tmp_path / "full", max_steps=16, ckpt_every_steps=10))

    real_make_batch = tb.make_batch

    def crash_at_12(tok: PreTrainedTokenizerBase, cfg, step, progress):
        if step == 12:
            raise KeyboardInterrupt  # simulate the process being killed between checkpoints
        return real_make_batch(tok, cfg, step, progress)

    cfg = _tiny(tmp_path / "crash", max_steps=16, ckpt_every_steps=10)
    monkeypatch.setattr(tb, "make_batch", crash_at_12)
    with pytest.raises(KeyboardInterrupt):
        tb.train_loop(cfg)
    monkeypatch.setattr(tb, "make_batch", real_make_batch)
    resumed_model, _, state, _ = tb.train_loop(cfg, resume=True)
    assert state["step"] == 16
    for (name, a), b in zip(full_model.state_dict().items(), resumed_model.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=f"{name} differs after resume")


def test_sft_labels_cover_exactly_the_assistant_turn(tmp_path):
    """encode_sft's loss mask equals the chat template's `{% generation %}` assistant mask."""
    cfg = _tiny(tmp_path)
    tok = tb.build_tokenizer(cfg)
    p = make_problems(1, seed=0, steps=(3,))[0]
    ids, labels = tb.encode_sft(tok, p, "critic", "Plan: add 3.")
    enc = tok.apply_chat_template(
        to_messages(p, "critic", "Plan: add 3.") + [{"role": "assistant", "content": p.solution}],
        tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
    )  # fmt: skip
    assert ids == enc["input_ids"]
    assert [int(y != tb.IGNORE_INDEX) for y in labels] == enc["assistant_masks"]
    assert tok.decode([y for y in labels if y != tb.IGNORE_INDEX]) == p.solution + tok.eos_token


def test_packed_batches_are_deterministic_and_masked(tmp_path):
    """Batch i is a function of (seed, i); padding carries no loss; SFT rows hold loss on few tokens."""
    cfg = _tiny(tmp_path)
    tok = tb.build_tokenizer(cfg)
    a_ids, a_lab = tb.make_batch(tok, cfg, step=3, progress=0.9)
    b_ids, b_lab = tb.make_batch(tok, cfg, step=3, progress=0.9)
    assert torch.equal(a_ids, b_ids) and torch.equal(a_lab, b_lab)
    assert not torch.equal(a_ids, tb.make_batch(tok, cfg, step=4, progress=0.9)[0])
    assert (a_lab[a_ids == tok.pad_token_id] == tb.IGNORE_INDEX).all()
    assert (a_ids != tok.pad_token_id).float().mean() > 0.6  # first-fit packing keeps rows mostly full
    assert 0.05 < (a_lab != tb.IGNORE_INDEX).float().mean() < 0.5  # SFT: loss on the assistant turn only


def test_every_shipped_recipe_loads():
    """Every YAML under finetune/recipes/ (sub-folders too) opens with its command: the from-scratch one
    (arith-mini-v3) loads into BuiltinConfig; the others are thought-channel recipes
    (tests/finetune/test_thought_channel.py runs each of them)."""
    files = sorted(RECIPES.rglob("*.yaml"))
    shipped = {f"arith-mini-v{v}" for v in range(3, 9)} | {
        "gemma-3-270m-handoff",
        "smollm2-135m-instruct-handoff",
    }
    shipped |= {
        "smollm2-135m-instruct-handoff-wordings",
        "qwen2.5-coder-0.5b-instruct-handoff",
        "qwen2.5-coder-1.5b-instruct-handoff",
    }
    shipped |= {
        f"{s}-to-qwen2.5-coder-0.5b-instruct-bridge"
        for s in (
            "smollm2-135m-instruct",
            "smollm2-135m-instruct-handoff",
            "qwen2.5-coder-1.5b-instruct-handoff",
        )
    }
    assert {f.stem for f in files} == shipped
    for f in files:
        first = f.read_text().splitlines()[0]
        assert first.endswith(f"--config finetune/recipes/{f.name}"), first
        if first.startswith("# python -m finetune.train_builtin "):
            assert tb.load_config(f).name == f.stem == "arith-mini-v3"
        else:
            assert first.startswith("# latentworks finetune mas "), first


def test_bad_config_raises():
    """Invalid values and unknown keys raise ValueError naming every problem at once."""
    with pytest.raises(ValueError, match="hidden_size.*lr"):
        tb.BuiltinConfig(hidden_size=30, num_attention_heads=4, lr=-1.0)
    with pytest.raises(ValueError, match="unknown key `hiden_size`"):
        tb.load_config(None, hiden_size=8)
