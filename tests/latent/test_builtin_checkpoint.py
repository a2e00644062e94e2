"""The shipped built-in checkpoints (arith-mini = v5, arith-mini-v4, arith-mini-v3): load offline and
solve held-out problems as their cards say.

Margin: the card's accuracy is measured on 2 x 256 held-out test problems; this test re-scores the first
128 of the same problems (the generator is prefix-stable, and greedy outputs did not change with the
batch size), so the gap is sub-sampling noise. `margin` allows 2.5 binomial standard deviations at
n = 128 plus one problem, which is conservative because the 128 are drawn from the card's own 512.
For the shipped card: 21.1% on the first 128 against 28.3% on all 512, margin 10.7 points.
"""

import json
import time
from pathlib import Path

import pytest
import torch

from eval.tasks.arith_data import extract_boxed_int, make_problems

BUILTIN = Path(__file__).resolve().parents[2] / "latent" / "builtin_models"
N_PROBLEMS = 128


def margin(p: float, n: int = N_PROBLEMS) -> float:
    """2.5 standard deviations of a binomial proportion p at n, plus one problem."""
    return 2.5 * (p * (1 - p) / n) ** 0.5 + 1 / n


CARD_KEYS = (
    "name", "params", "size_bytes", "heldout_accuracy", "heldout_n", "heldout_steps", "seed", "train_command",
    "wall_time_s", "tokens_seen", "transformers_version",
)  # fmt: skip


@pytest.fixture(scope="module", params=["arith-mini", "arith-mini-v4", "arith-mini-v3"])
def ckpt(request) -> Path:
    return BUILTIN / request.param


@pytest.fixture(scope="module")
def card(ckpt) -> dict:
    assert (ckpt / "card.json").is_file(), f"missing shipped checkpoint card {ckpt / 'card.json'}"
    return json.loads((ckpt / "card.json").read_text())


def test_shipped_files_card_and_size(ckpt, card):
    """All files are present, the card has its keys, and the directory stays within 25 MB."""
    for name in ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
                 "tokenizer_config.json", "README.md", "loss_curve.png"):  # fmt: skip
        assert (ckpt / name).is_file(), name
    assert all(k in card for k in CARD_KEYS), sorted(set(CARD_KEYS) - set(card))
    total = sum(f.stat().st_size for f in ckpt.iterdir() if f.is_file())
    assert total <= 25 * 2**20, f"{total / 2**20:.1f} MB > 25 MB"
    assert card["name"] == ckpt.name and card["heldout_steps"] == [2, 3]
    assert f"{card['heldout_accuracy']:.1%}" in (ckpt / "README.md").read_text()  # card and model card agree


def test_loads_offline_and_solves_heldout_problems(ckpt, card):
    """Greedy, batched, on CPU: accuracy on 128 held-out problems >= card accuracy - margin, in < 60 s CPU."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from finetune.train_builtin import generate_solutions

    cpu0, wall0 = time.process_time(), time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(ckpt, local_files_only=True, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(ckpt, local_files_only=True)
    assert sum(p.numel() for p in model.parameters()) == card["params"]
    problems = make_problems(N_PROBLEMS, seed=card["heldout_eval"]["seed"], split="heldout",
                             steps=tuple(card["heldout_steps"]))  # fmt: skip
    texts = generate_solutions(model, tok, problems, role="solver", batch_size=64)
    acc = sum(extract_boxed_int(t) == p.answer for t, p in zip(texts, problems)) / len(problems)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    # CPU seconds, not wall seconds: the shared test machine can be oversubscribed many times over.
    assert cpu < 60, f"loading + solving took {cpu:.0f} s of CPU ({wall:.0f} s wall)"
    m = margin(card["heldout_accuracy"])
    assert card["heldout_accuracy"] - m > 0, "the card's accuracy is too low for this test to be able to fail"
    assert acc >= card["heldout_accuracy"] - m, (
        f"accuracy {acc:.3f} < card {card['heldout_accuracy']:.3f} - {m:.3f}"
    )
