"""The thought-channel trainer (`finetune/thought_channel.py`), arith task and the whole command: the
training path is the inference path with gradients; the config is checked before anything loads; every
recipe runs a few steps on a tiny model; `finetune mas --task handoff` trains and saves a channel that
`load_model(NAME)` finds, with identical thoughts, on the base the adapter names."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import shutil
from pathlib import Path

import pytest
import torch

import agents
from agents import Graph, RunConfig, final_agent_view
from finetune import thought_channel as tc
from latent import load_model
from latent.kv_cache import layer_tensors
from latent.memory import WorkingMemory
from latentworks.cli import main

QUESTIONS = ["Tom has 3 apples and buys 4 more. How many apples?", "Ann has 9 pens and loses 2. How many?"]
RECIPES = Path(tc.__file__).parent / "recipes"
CHANNEL_RECIPES = sorted(f for f in RECIPES.rglob("*.yaml") if f.name != "arith-mini-v3.yaml")


@pytest.mark.parametrize("prompts", ["default", "compact"])
@pytest.mark.parametrize("graph", ["sequential", "hierarchical", Graph.hierarchical("latent")])
def test_final_agent_view_is_what_run_decodes_after(llama, graph, prompts):
    """The final agent's view plus its prompt, decoded greedily, gives `agents.run`'s latent_mas text."""
    cfg = RunConfig(method="latent_mas", latent_steps=3, max_new_tokens=6, threads=None, prompts=prompts)
    expected = [r.text for r in agents.run(graph, llama, QUESTIONS, config=cfg)]
    msgs, state = final_agent_view(graph, llama, QUESTIONS, cfg)
    st = llama.prefill(**llama.encode(msgs), state=state)
    assert llama.generate(state=st, max_new_tokens=6).texts == expected


@pytest.mark.parametrize("graph", ["sequential", "hierarchical"])
def test_grad_memory_equals_inference_memory_and_carries_gradients(llama, graph):
    """The differentiable working memory holds the inference memory's keys and values, with gradients."""
    cfg = RunConfig(method="latent_mas", latent_steps=2, threads=None)
    _, plain = final_agent_view(graph, llama, QUESTIONS, cfg)
    _, diff = final_agent_view(graph, llama, QUESTIONS, cfg, WorkingMemory(llama, grad=True))
    for (k0, v0), (k1, v1) in zip(layer_tensors(plain.cache), layer_tensors(diff.cache), strict=True):
        assert torch.allclose(k0, k1, atol=1e-5) and torch.allclose(v0, v1, atol=1e-5)
        assert k1.requires_grad and not k0.requires_grad


def _arith(tmp_path, **kw) -> tc.ThoughtChannelConfig:
    base = dict(
        task="arith",
        trainable="all",
        out_dir=str(tmp_path),
        latent_steps=2,
        latent_curriculum=[1, 2],
        batch_size=2,
        eval_n=0,
        graphs=["sequential"],
        problem_steps=[1],
    )
    return tc.ThoughtChannelConfig(**{**base, **kw})


def test_arith_latent_loss_reaches_every_layer(llama, tmp_path):
    """A latent arith batch's loss sends a finite, non-zero gradient to every weight, through the thoughts."""
    lm, _ = tc.prepare(_arith(tmp_path), llama)
    kind, loss, _ = tc.arith_batch(_arith(tmp_path, latent_frac=1.0), lm, 3, random.Random(0))
    assert kind == "latent"
    loss.backward()
    grads = [p.grad for p in lm.model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() and float(g.abs().sum()) > 0 for g in grads)
    for p in lm.model.parameters():
        p.grad = None
        p.requires_grad_(False)


def test_training_lowers_the_arith_latent_loss(tmp_path):
    """Thirty steps of latent batches on a tiny model lower its latent_mas loss on a held-back batch."""
    from latent.testing import tiny_model

    lm = tiny_model("llama", tmp_path / "m", hidden_size=32)
    cfg = _arith(tmp_path / "run", latent_frac=1.0, max_steps=30, lr=3e-3, warmup_steps=1, logging_steps=10)

    def probe():
        with torch.no_grad():
            return float(tc.arith_batch(cfg, lm, 10_000, random.Random(1))[1])

    before = probe()
    lm, log, _ = tc.train(cfg, lm)
    assert [e["step"] for e in log] == [10, 20, 30]
    assert probe() < 0.8 * before


def test_curriculum_and_learning_rate_schedule(tmp_path):
    """Thoughts climb the curriculum over `curriculum_frac` of the steps; the learning rate warms up over
    `warmup_steps`, then falls along a cosine over `max_steps`."""
    cfg = _arith(tmp_path, max_steps=100, latent_steps=8, latent_curriculum=[1, 2, 4, 8], curriculum_frac=0.4)
    assert [cfg.thoughts_at(s) for s in (0, 9, 10, 25, 39, 40, 99)] == [1, 1, 2, 4, 8, 8, 8]
    assert cfg.lr_factor(0) == pytest.approx(1 / 20) and cfg.lr_factor(19) == pytest.approx(
        0.5 * (1 + math.cos(0.19 * math.pi))
    )
    assert cfg.lr_factor(50) == pytest.approx(0.5)


@pytest.mark.parametrize(
    "bad, message",
    [
        (dict(latent_steps=4, latent_curriculum=[1, 2]), "`latent_curriculum` must be counts >= 1 ending"),
        (dict(graphs=["ring"]), "`graphs`"),
        (dict(wrong_draft_frac=0.9, hint_frac=0.2), "`wrong_draft_frac` + `hint_frac`"),
        (dict(chat_template="gema"), "unknown chat template 'gema'"),
        (dict(levels=["relay"], working_levels=["sum"]), "`working_levels` must be among `levels`"),
        (dict(max_steps=10, stop_at=11), "`stop_at` must be in 0-`max_steps`"),
        (dict(kv_frac=1.5, batch_size=0), "`kv_frac` must be in [0, 1] && `batch_size` must be >= 1"),
        (dict(prompt_sets=[]), "`prompt_sets`"),
    ],
)
def test_a_bad_config_names_every_field_and_its_fix(tmp_path, bad, message):
    """Each invalid value is reported with its field's name (all problems in one error)."""
    with pytest.raises(ValueError) as err:
        _arith(tmp_path, **bad)
    assert all(part in str(err.value) for part in message.split(" && ")), str(err.value)


def test_the_name_and_out_dir_follow_the_base_and_task():
    """With no `name`, the result is saved as <base name>-<task>, under runs/<name> and (LoRA) the cache."""
    cfg = tc.ThoughtChannelConfig(base="smollm2-135m-instruct")
    assert (cfg.name, cfg.out_dir, cfg.builtin) == (
        "smollm2-135m-instruct-handoff",
        "runs/smollm2-135m-instruct-handoff",
        False,
    )
    assert cfg.export_path.parts[-2:] == ("models", "smollm2-135m-instruct-handoff")
    built = tc.ThoughtChannelConfig(base="builtin:arith-mini-v7", task="arith")
    assert (built.name, built.builtin, str(built.export_path)) == (
        "arith-mini-v7-arith",
        True,
        "runs/arith-mini-v7-arith/model",
    )


def _recipe_args(recipe: Path, base: str, out: Path) -> list[str]:
    return [
        "finetune",
        "mas",
        "--config",
        str(recipe),
        "--base",
        base,
        "--out-dir",
        str(out / "run"),
        "--export-dir",
        str(out / "model"),
        "--max-steps",
        "2",
        "--stop-at",
        "0",
        "--batch-size",
        "2",
        "--eval-n",
        "0",
        "--logging-steps",
        "1",
        "--threads",
        "1",
    ]


def test_every_recipe_names_its_command_and_runs_two_steps_per_stage_on_a_tiny_model(llama, tmp_path):
    """Each channel recipe opens with the command that runs it, loads (stages and all) into the config,
    and trains two steps per stage on the tiny model through `latentworks finetune mas` (a bridge recipe
    from a tiny sender of another width and tokenizer)."""
    from latent.testing import tiny_pair

    sender, receiver = tiny_pair(tmp_path / "pair")
    names = [f.name for f in CHANNEL_RECIPES]
    assert names == [
        "arith-mini-v4.yaml",
        "arith-mini-v5.yaml",
        "arith-mini-v6.yaml",
        "arith-mini-v7.yaml",
        "arith-mini-v8.yaml",
        "gemma-3-270m-handoff.yaml",
        "qwen2.5-coder-0.5b-instruct-handoff.yaml",
        "qwen2.5-coder-1.5b-instruct-handoff-to-qwen2.5-coder-0.5b-instruct-bridge.yaml",
        "qwen2.5-coder-1.5b-instruct-handoff.yaml",
        "smollm2-135m-instruct-handoff-to-qwen2.5-coder-0.5b-instruct-bridge.yaml",
        "smollm2-135m-instruct-handoff-wordings.yaml",
        "smollm2-135m-instruct-handoff.yaml",
        "smollm2-135m-instruct-to-qwen2.5-coder-0.5b-instruct-bridge.yaml",
    ]
    for f in CHANNEL_RECIPES:
        first = f.read_text().splitlines()[0]
        assert first == f"# latentworks finetune mas --config finetune/recipes/{f.name}", first
        out = tmp_path / f.stem
        bridge = f.stem.endswith("-bridge")
        args = _recipe_args(f, receiver.model.name_or_path if bridge else llama.model.name_or_path, out)
        assert main(args + (["--sender", sender.model.name_or_path] if bridge else [])) == 0, f.name
        card = json.loads((out / "model" / "card.json").read_text())
        full = tc.stage_configs(_namespace(f))
        assert len(card["stages"]) == len(full) and card["steps"] == 2 * len(full)
        assert full[-1].name == f.stem.replace("-v5", "") and not full[0].base.startswith("/")
        assert [s["config"]["seed"] for s in card["stages"]] == [c.seed for c in full]
        saved = "bridge_config.json" if bridge else "adapter_config.json" if "handoff" in f.stem else ""
        assert (out / "model" / (saved or "model.safetensors")).is_file()


def _namespace(recipe: Path):
    import argparse

    return argparse.Namespace(config=str(recipe), overrides=[])


def test_stages_chain_and_flags_win(tmp_path):
    """Stage i > 1 starts from stage i - 1's model; a recipe's stage settings apply in turn; flags win."""
    ns = _namespace(RECIPES / "arith-mini-v8.yaml")
    cfgs = tc.stage_configs(ns)
    assert [c.seed for c in cfgs] == [8, 9, 10] and [c.stop_at for c in cfgs] == [500, 0, 0]
    assert cfgs[1].base == str(cfgs[0].export_path) and cfgs[0].base == "builtin:arith-mini-v7"
    assert [c.eval_n for c in cfgs] == [0, 0, 100] and str(
        cfgs[-1].export_path
    ) == "latent/builtin_models/arith-mini-v8"
    ns.lr = 0.01
    assert {c.lr for c in tc.stage_configs(ns)} == {0.01}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--latent-steps", "8"], "`latent_curriculum` must be counts >= 1 ending at `latent_steps` (8)"),
        (["--levels", "relay", "--working-levels", "sum"], "`working_levels` must be among `levels`"),
        (["--task", "poem"], "invalid choice"),
        (["--chat-template", "gema"], "unknown chat template"),
    ],
)
def test_bad_flags_fail_before_anything_loads_or_is_written(tmp_path, monkeypatch, capsys, argv, message):
    """A bad flag ends as one `error:` line naming the setting, before any model loads or file is written."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tc, "load_base", lambda cfg: pytest.fail("loaded a model"))
    assert main(["finetune", "mas", "--base", "no/such/model", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def _thoughts(lm, text="Ann's code is 47. What is Ann's code?"):
    enc = lm.encode([[{"role": "user", "content": text}]])
    with torch.no_grad():
        return lm.think(lm.prefill(**enc), 4)[0]


def test_task_handoff_route_saves_a_channel_load_model_finds_by_name(llama, tmp_path, monkeypatch):
    """`latentworks finetune mas --task handoff` on a named base trains a LoRA + aligner, saves it in the
    cache under its name with the base named (not a path), and `load_model(NAME)` thinks the same thoughts,
    also once the adapter sits in the shipped-adapter folder and the cache copy is gone."""
    import latent.loading

    cache = tmp_path / "cache"
    monkeypatch.setenv("LATENTWORKS_CACHE", str(cache))
    shutil.copytree(llama.model.name_or_path, cache / "models" / "tiny-base")
    argv = [
        "finetune",
        "mas",
        "--task",
        "handoff",
        "--base",
        "tiny-base",
        "--levels",
        "relay",
        "--max-steps",
        "3",
        "--batch-size",
        "2",
        "--latent-curriculum",
        "2",
        "4",
        "--eval-n",
        "2",
        "--lr",
        "0.01",
        "--out-dir",
        str(tmp_path / "run"),
    ]
    assert main(argv) == 0
    saved = cache / "models" / "tiny-base-handoff"
    conf = json.loads((saved / "adapter_config.json").read_text())
    assert conf["base_model_name_or_path"] == "tiny-base" and (saved / "aligner.safetensors").is_file()
    card = json.loads((saved / "card.json").read_text())
    assert set(card["eval_after"]["relay"]) >= {"latent_only", "latent_only_other"} and card["eval_before"]
    trained = load_model("tiny-base-handoff")
    base = load_model("tiny-base")
    assert not torch.allclose(_thoughts(trained), _thoughts(base))  # the channel changed the thoughts
    shipped = tmp_path / "shipped"
    shutil.copytree(saved, shipped / "tiny-base-handoff")
    shutil.rmtree(saved)
    monkeypatch.setattr(latent.loading, "BUILTIN_DIR", shipped)
    torch.testing.assert_close(
        _thoughts(load_model("tiny-base-handoff")), _thoughts(trained), rtol=1e-5, atol=1e-5
    )


def test_a_resumed_run_ends_where_an_unbroken_one_does(llama, tmp_path):
    """Stopped by `stop_at` after a checkpoint, then resumed, a run ends where an unbroken run ends."""
    kw = dict(
        base=llama.model.name_or_path,
        levels=["relay"],
        max_steps=4,
        batch_size=2,
        latent_curriculum=[4],
        save_steps=2,
        text_until=0.5,
        logging_steps=1,
    )
    whole, _, _ = tc.train(
        tc.ThoughtChannelConfig(out_dir=str(tmp_path / "a"), **kw), load_model(llama.model.name_or_path)
    )
    tc.train(
        tc.ThoughtChannelConfig(out_dir=str(tmp_path / "b"), stop_at=3, **kw),
        load_model(llama.model.name_or_path),
    )
    again, log, _ = tc.train(
        tc.ThoughtChannelConfig(out_dir=str(tmp_path / "b"), resume=True, **kw),
        load_model(llama.model.name_or_path),
    )
    assert [e["step"] for e in log] == [1, 2, 3, 4]  # the checkpoint's log, then the resumed steps
    torch.testing.assert_close(_thoughts(again), _thoughts(whole), rtol=1e-4, atol=1e-5)


def test_autocast_bfloat16_runs_matmuls_in_bf16_and_keeps_float32_weights(llama, tmp_path):
    """`autocast: bfloat16` trains with bf16 matmuls (seen in a projection's output) on every batch kind,
    with finite losses, float32 weights and aligner, and float32 thoughts once trained."""
    lm = load_model(llama.model.name_or_path)
    seen: set[torch.dtype] = set()
    proj = next(m for n, m in lm.model.named_modules() if n.endswith("q_proj"))
    handle = proj.register_forward_hook(lambda mod, inp, out: seen.add(out.dtype))
    cfg = tc.ThoughtChannelConfig(
        base=llama.model.name_or_path,
        levels=["relay"],
        max_steps=4,
        batch_size=2,
        latent_curriculum=[2],
        latent_steps=2,
        text_until=0.5,
        oracle_frac=0.5,
        logging_steps=1,
        eval_n=0,
        autocast="bfloat16",
        out_dir=str(tmp_path / "run"),
    )
    trained, log, _ = tc.train(cfg, lm)
    handle.remove()
    assert torch.bfloat16 in seen
    assert all(math.isfinite(e["loss"]) for e in log) and len(log) == 4
    assert all(p.dtype == torch.float32 for p in trained.model.parameters())
    assert _thoughts(trained).dtype == torch.float32


def test_a_resumed_run_reads_the_base_evaluation_it_saved(llama, tmp_path, monkeypatch):
    """The held-out table of the base is computed once: a resumed run reads it from out_dir instead of
    evaluating the base again (on a real model that is an hour of work per resume)."""
    from finetune import channel_report

    calls = []
    evaluate = channel_report.evaluate

    def counting(*args, **kwargs):
        calls.append(args[0].name)
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(channel_report, "evaluate", counting)
    cfg = _arith(
        tmp_path / "run",
        base=llama.model.name_or_path,
        export_dir=str(tmp_path / "out"),
        eval_n=2,
        max_steps=1,
    )
    first = tc.train_stages([cfg])
    assert len(calls) == 2 and (tmp_path / "run" / "eval_before.json").is_file()  # before and after
    again = tc.train_stages([dataclasses.replace(cfg, resume=True)])
    assert len(calls) == 3  # only the trained model's table again
    assert again["eval_before"] == first["eval_before"]
    # a table saved under another decode budget is stale: the base is evaluated again
    tc.train_stages([dataclasses.replace(cfg, resume=True, max_new_tokens=7)])
    assert len(calls) == 5
    assert json.loads((tmp_path / "run" / "eval_before.json").read_text())["settings"]["max_new_tokens"] == 7


def test_a_built_in_card_counts_parameters_from_the_saved_weights(tmp_path):
    """`models list` reads `params` from a built-in model's card; the card counts them from the saved
    safetensors headers, and the count equals the loaded model's."""
    from finetune.channel_report import param_count
    from latent.testing import tiny_model

    lm = tiny_model("llama", tmp_path / "m", hidden_size=32)
    assert param_count(tmp_path / "m") == sum(p.numel() for p in lm.model.parameters())


def test_token_logp_reads_the_head_at_labelled_positions_only(llama):
    """The per-token log-probs equal a full-vocabulary pass over every position, where a label stands."""
    seqs = [
        tc.ids_and_labels(llama.tokenizer, [{"role": "user", "content": q}], "7")
        for q in ("What is 3 + 4?", "Say seven.")
    ]
    logp, keep = tc.token_logp(llama, seqs)
    ids, mask, labels = tc.left_pad(seqs, int(llama.tokenizer.pad_token_id))
    hidden, _ = llama.forward_embeds(llama.embed(ids), mask)
    full = llama.logits(hidden)[:, :-1].log_softmax(-1)
    lab = labels[:, 1:]
    expected = full.gather(-1, lab.clamp(min=0)[..., None])[..., 0]
    assert keep.any() and keep.equal(lab != tc.IGNORE)
    torch.testing.assert_close(logp[keep], expected[keep], rtol=1e-5, atol=1e-5)
    assert (logp[~keep] == 0).all()


def test_frozen_weights_held_in_bf16_give_autocasts_numbers_and_come_back(llama, tmp_path):
    """Under bf16 autocast a LoRA run holds its frozen Linear weights in bf16 (autocast would copy them at
    every call and keep each copy for the backward pass): the loss is the same number, the trainable
    weights stay float32, and the float32 tensors are back afterwards."""
    cfg = tc.ThoughtChannelConfig(
        task="handoff",
        base=llama.model.name_or_path,
        levels=["relay"],
        batch_size=2,
        latent_steps=2,
        latent_curriculum=[2],
        text_until=0.01,
        text_floor=0.0,
        oracle_frac=0.0,
        autocast="bfloat16",
        out_dir=str(tmp_path),
    )
    lm, _ = tc.prepare(cfg, load_model(llama.model.name_or_path))
    linears = [m for m in lm.model.modules() if isinstance(m, torch.nn.Linear)]
    before = {id(m): m.weight for m in linears}

    def loss():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return tc.handoff_batch(cfg, lm, 5, random.Random(0), [])[1]

    plain = loss()
    with tc.frozen_linears_in_bf16([lm.model]):
        frozen = [m for m in linears if not m.weight.requires_grad]
        assert frozen and all(m.weight.dtype == torch.bfloat16 for m in frozen)
        assert all(m.weight.dtype == torch.float32 for m in linears if m.weight.requires_grad)
        held = loss()
    torch.testing.assert_close(held, plain, rtol=0, atol=0)
    assert all(m.weight is before[id(m)] and m.weight.dtype == torch.float32 for m in linears)


def test_held_out_evaluation_logs_one_line_per_finished_row(llama, tmp_path, caplog):
    """Held-out evaluation runs for up to an hour on a CPU: each finished row is logged as it completes."""
    import logging

    from finetune import channel_report

    cfg = _arith(tmp_path, eval_n=2)
    with caplog.at_level(logging.INFO, logger="finetune.channel_report"):
        table = channel_report.evaluate(cfg, llama)
    lines = [r.getMessage() for r in caplog.records if r.name == "finetune.channel_report"]
    rows = [(g, name, c) for g, cells in table.items() for name, c in cells.items()]
    assert len(lines) == len(rows) >= 3
    for (graph, name, cell), line in zip(rows, lines, strict=True):
        assert line.startswith(f"held-out {graph} {name}: {cell['correct']}/{cell['n']} (")


@pytest.mark.parametrize("native", [True, False])
def test_autocast_auto_takes_bf16_only_where_the_cpu_computes_it(monkeypatch, caplog, native):
    """`auto` resolves to bf16 on a CPU with bf16 instructions and to float32 elsewhere (where bf16 is
    emulated: 40x slower per step measured); an explicit bfloat16 there warns and names the fix."""
    import logging

    import latent.loading

    monkeypatch.setattr(latent.loading, "native_bf16_cpu", lambda: native)
    cpu = torch.device("cpu")
    assert tc.autocast_dtype("auto", cpu) == (torch.bfloat16 if native else None)
    assert tc.autocast_dtype("none", cpu) is None
    with caplog.at_level(logging.WARNING, logger=tc.__name__):
        assert tc.autocast_dtype("bfloat16", cpu) == torch.bfloat16
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert bool(warned) is not native
    assert all("--autocast auto" in w for w in warned)
    assert tc.autocast_dtype("auto", torch.device("cuda")) == torch.bfloat16


@pytest.mark.parametrize("budget, expected", [(0, 24), (128, 128)])
def test_handoff_evaluation_decodes_with_the_configured_budget(
    llama, tmp_path, monkeypatch, budget, expected
):
    """`max_new_tokens` sets the held-out hand-off rows' decode budget (a model that shows its working on sum
    needs more than the table's default 24); 0 keeps the default."""
    from eval.tasks import handoff_rows
    from finetune import channel_report

    seen = []

    def spy(lm, items, name, k, max_new_tokens, batch, pair=None):
        seen.append(max_new_tokens)
        return handoff_rows.Row(name, 0, len(items), 0, 0.0)

    monkeypatch.setattr(handoff_rows, "run_row", spy)
    cfg = tc.ThoughtChannelConfig(
        base=llama.model.name_or_path,
        out_dir=str(tmp_path),
        eval_n=2,
        levels=["relay"],
        max_new_tokens=budget,
    )
    channel_report.evaluate(cfg, llama)
    assert seen and set(seen) == {expected}


def test_a_stopped_held_out_evaluation_resumes_from_its_finished_rows(llama, tmp_path, monkeypatch):
    """Each finished row is saved as it ends; a stopped evaluation under the same settings runs only the rows
    it lacks, and one under other settings runs them all (a Qwen table is an hour of CPU per run)."""
    import agents
    from finetune import channel_report

    cfg = _arith(tmp_path, base=llama.model.name_or_path, eval_n=2)
    partial = tmp_path / "eval_after.partial.json"
    run, calls = agents.run, []

    def stops_at_the_second_row(*args, **kwargs):
        calls.append(kwargs["config"].method)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return run(*args, **kwargs)

    monkeypatch.setattr(agents, "run", stops_at_the_second_row)
    with pytest.raises(KeyboardInterrupt):
        channel_report.evaluate(cfg, llama, partial=partial)
    first, saved = calls[0], json.loads(partial.read_text())["rows"]["sequential"]
    assert list(saved) == [first]
    calls.clear()
    monkeypatch.setattr(agents, "run", lambda *a, **kw: calls.append(kw["config"].method) or run(*a, **kw))
    table = channel_report.evaluate(cfg, llama, partial=partial)
    assert calls == [m for m in agents.METHODS if m != first]
    assert table["sequential"][first] == saved[first] and list(table["sequential"]) == list(agents.METHODS)
    calls.clear()
    channel_report.evaluate(dataclasses.replace(cfg, max_new_tokens=5), llama, partial=partial)
    assert calls == list(agents.METHODS)
