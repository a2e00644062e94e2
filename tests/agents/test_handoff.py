"""Hand-off routing: each share reaches only its own holder; the final agent never reads share text."""

import pytest
import torch

import agents
from eval.tasks.handoff import make_items
from latent import LatentModel

ITEMS = make_items("pick", 4, "test", seed=3)


def _record_encodes(model: LatentModel, monkeypatch: pytest.MonkeyPatch):
    """Every `encode` call's decoded rows, in call order (one call per agent turn)."""
    calls = []
    real = model.encode

    def spy(messages, *a, **k):
        enc = real(messages, *a, **k)
        ids = enc["input_ids"]
        calls.append(
            [model.tokenizer.decode(ids[r][enc["attention_mask"][r].bool()]) for r in range(ids.shape[0])]
        )
        return enc

    monkeypatch.setattr(model, "encode", spy)
    return calls


@pytest.mark.parametrize("mode", ["kv", "latent"])
def test_final_agent_token_ids_hold_no_share_text(llama, monkeypatch, mode):
    calls = _record_encodes(llama, monkeypatch)
    g = agents.handoff_graph(2, mode)
    agents.run(
        g, llama, [it.question for it in ITEMS], prompts="handoff", latent_steps=2, max_new_tokens=2,
        shares=[it.shares for it in ITEMS], threads=1,
    )  # fmt: skip
    assert len(calls) == 3  # holder_0, holder_1, answerer
    for r, it in enumerate(ITEMS):
        assert it.shares[0] in calls[0][r] and it.shares[1] not in calls[0][r]
        assert it.shares[1] in calls[1][r] and it.shares[0] not in calls[1][r]
        assert it.question in calls[2][r]
        for share in it.shares:
            assert share not in calls[2][r], "a share reached the final agent's token ids"


def test_final_agent_view_reads_no_share(llama):
    """The training path (`final_agent_view`) routes the same way: the answerer's messages hold no share."""
    from agents.config import RunConfig
    from latent.memory import WorkingMemory

    cfg = RunConfig(prompts="handoff", latent_steps=2, threads=1)
    mem = WorkingMemory(llama)
    msgs, state = agents.final_agent_view(
        agents.handoff_graph(2, "latent"), llama, [it.question for it in ITEMS], cfg, mem,
        shares=[it.shares for it in ITEMS],
    )  # fmt: skip
    assert state is not None
    for r, it in enumerate(ITEMS):
        text = " ".join(m["content"] for m in msgs[r])
        assert all(s not in text for s in it.shares)
    holder_ids = [s.token_ids for s in mem.segments if s.kind == "prompt"]
    assert len(holder_ids) == 2


def test_shares_must_match_the_upstream_agents(llama):
    g = agents.handoff_graph(2, "kv")
    with pytest.raises(ValueError, match="upstream agents"):
        agents.run(g, llama, ["q?"], prompts="handoff", shares=[["only one"]], threads=1)
    with pytest.raises(ValueError, match="one list of shares per question"):
        agents.run(g, llama, ["q?", "r?"], prompts="handoff", shares=[["a", "b"]], threads=1)


def test_other_and_mean_controls_change_what_the_final_agent_reads(llama):
    """`thoughts="other"` gives row r another row's memory; `mean` gives every row the same memory."""
    qs, sh = [it.question for it in ITEMS], [it.shares for it in ITEMS]
    g = agents.handoff_graph(2, "latent")
    kw = dict(prompts="handoff", latent_steps=2, max_new_tokens=4, shares=sh, threads=1, do_sample=False)
    real = agents.run(g, llama, qs, **kw)
    other = agents.run(g, llama, qs, thoughts="other", **kw)
    assert [r.agents[-1].kv_bytes_in for r in real] == [r.agents[-1].kv_bytes_in for r in other]
    with pytest.raises(ValueError, match="single-question batch"):
        agents.run(
            g,
            llama,
            qs[:3],
            thoughts="other",
            batch_size=2,
            **{k: v for k, v in kw.items() if k != "shares"},
            shares=sh[:3],
        )


def test_mean_rows_gives_every_row_the_same_cache(llama):
    st = llama.prefill(**llama.encode([[{"role": "user", "content": q}] for q in ("a b c", "d e f")]))
    m = st.mean_rows()
    from latent.kv_cache import layer_tensors

    for (k, v), (k0, v0) in zip(layer_tensors(m.cache), layer_tensors(st.cache)):
        torch.testing.assert_close(k[0], k[1])
        torch.testing.assert_close(k[0], k0.mean(0))
        torch.testing.assert_close(v[0], v0.mean(0))
