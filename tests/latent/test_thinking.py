"""Thinking models: the template switch, the thinking budget, and what scoring reads (a tiny Qwen3-style
tokenizer and template, `latent.testing.tiny_thinking_model`)."""

import pytest
import torch

from latent.testing import tiny_thinking_model
from latent.thinking import ThinkingBudget, strip_thinking, template_thinks, think_ids


@pytest.fixture(scope="module")
def thinker():
    return tiny_thinking_model()


def test_strip_thinking_keeps_only_the_answer():
    """Closed blocks go, a block opened by the prompt goes up to its `</think>`, an unclosed block (cut off
    while thinking) goes to the end; text without tags is unchanged."""
    assert strip_thinking("<think>\n2+2 is 4, \\boxed{5}?\n</think>\n\nThe answer is \\boxed{4}.") == (
        "The answer is \\boxed{4}."
    )
    assert strip_thinking("so 3 + 4 = 7\n</think>\n\\boxed{7}") == "\\boxed{7}"
    assert strip_thinking("<think>\nLet me count: 1, 2, \\boxed{3}") == ""
    assert strip_thinking("Answer: 12 <think>") == "Answer: 12"
    assert strip_thinking("plain \\boxed{9}  ") == "plain \\boxed{9}  "


def test_scoring_reads_the_answer_after_the_thinking():
    """A boxed number inside the thinking is not the answer; the one after `</think>` is."""
    from eval.scoring import score
    from eval.tasks import Item

    item = Item(id="t", question="2 + 2?", gold="4", kind="math")
    assert score(item, "<think>maybe \\boxed{5}</think>\nSo \\boxed{4}.").correct
    assert not score(item, "<think>it is \\boxed{4}</think>\nSo \\boxed{5}.").correct
    assert not score(item, "<think>it is \\boxed{4}").correct  # cut off while thinking: no answer


def test_enable_thinking_reaches_the_chat_template(thinker):
    """`chat_template_kwargs={"enable_thinking": False}` closes the thinking block in the prompt, as Qwen3's
    template does; without it the prompt ends at the assistant turn."""
    msgs = [[{"role": "user", "content": "Tom has 23 apples."}]]
    on = thinker.tokenizer.decode(thinker.encode(msgs)["input_ids"][0])
    off = thinker.tokenizer.decode(
        thinker.encode(msgs, chat_template_kwargs={"enable_thinking": False})["input_ids"][0]
    )
    assert on.endswith("<|im_start|>assistant\n")
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_template_thinks_follows_the_switch_and_the_template(thinker, llama):
    """A Qwen3-style template thinks unless switched off; a tokenizer without the tags never does."""
    assert template_thinks(thinker.tokenizer, None) and template_thinks(thinker.tokenizer, True)
    assert not template_thinks(thinker.tokenizer, False)
    assert not template_thinks(llama.tokenizer, True) and think_ids(llama.tokenizer) is None


def test_budget_forces_the_end_of_thinking_after_budget_tokens(thinker):
    """With the thinking block open (by the prompt here), every row's token right after `budget` generated
    tokens is `</think>`, and a row that already closed it is left alone."""
    open_id, close_id = think_ids(thinker.tokenizer)
    enc = thinker.encode(["Tom has 23 apples.", "Mia had 12 pencils"])
    free = thinker.generate(**enc, max_new_tokens=8, eos_token_id=-5)
    assert not (free.tokens[:, 3] == close_id).any()  # the case is exercised: it would not close there
    budget = ThinkingBudget(open_id, close_id, 3, opened_by_prompt=True)
    out = thinker.generate(**enc, max_new_tokens=8, eos_token_id=-5, logits_processor=[budget])
    assert out.tokens[:, 3].tolist() == [close_id, close_id]
    assert torch.equal(out.tokens[:, :3], free.tokens[:, :3])
    closed = torch.tensor([[close_id, 5, 6], [7, 8, 9]])
    scores = budget(closed, torch.zeros(2, 10 + close_id))
    assert torch.equal(scores[0], torch.zeros(10 + close_id)) and scores[1].argmax() == close_id


def test_budget_leaves_rows_that_never_started_thinking(thinker):
    """Without `<think>` in the generated tokens (and not opened by the prompt) the budget forces nothing."""
    open_id, close_id = think_ids(thinker.tokenizer)
    scores = torch.randn(2, 400)
    generated = torch.tensor([[1, 2, 3, 4], [open_id, 2, 3, 4]])
    out = ThinkingBudget(open_id, close_id, 3)(generated, scores)
    assert torch.equal(out[0], scores[0]) and out[1].argmax() == close_id


def test_thinking_run_gets_its_budget_on_top_of_max_new_tokens(thinker, monkeypatch):
    """`agents.run` on a thinking model decodes up to `thinking_budget + max_new_tokens` with the budget
    processor; switched off, it decodes `max_new_tokens` with none, and the template closes the block."""
    import agents

    seen = []
    real = type(thinker).generate

    def spy(self, *a, **k):
        seen.append((k["max_new_tokens"], [type(p).__name__ for p in k.get("logits_processor", ())]))
        return real(self, *a, **k)

    monkeypatch.setattr(type(thinker), "generate", spy)
    q = ["Tom has 3 apples and buys 4 more. How many?"]
    agents.run("sequential", thinker, q, method="single", max_new_tokens=4, thinking_budget=3)
    agents.run("sequential", thinker, q, method="single", max_new_tokens=4, enable_thinking=False)
    assert seen == [(7, ["ThinkingBudget"]), (4, [])]
