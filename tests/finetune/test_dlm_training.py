"""DLM pieces that need a (tiny, random, local) language model: constrained decoding, SFT, GRPO, LM evaluation."""

from __future__ import annotations

import json
import logging

import pytest
import torch

pytest.importorskip("lbforaging", reason="DLM environments need `pip install lbforaging`")
pytest.importorskip("trl", reason="DLM training needs `pip install trl`")

from finetune.dlm.config import DLMConfig, GRPORunConfig, SFTRunConfig  # noqa: E402
from finetune.dlm.data import collect_episodes  # noqa: E402
from finetune.dlm.decoding import LegalActionProcessor, action_token_ids, generate_actions  # noqa: E402
from finetune.dlm.dialogue import execution_prompt, parse_action, to_samples  # noqa: E402
from finetune.dlm.envs import make_env  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models on a shared CPU run several times faster on one thread than on two contended ones."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    from latent.testing import tiny_model

    return tiny_model("llama", tmp_path_factory.mktemp("dlm-tiny"))


@pytest.fixture(scope="module")
def samples():
    rows, _ = collect_episodes("lbforaging", "5x5-2p-1f", "good", episodes=2, seed=0)
    return to_samples(rows, teammate_prob=0.5)


def test_action_tokens_match_the_chat_template(tiny_lm):
    """The constrained trie uses the same ids the chat template produces for an assistant action turn."""
    tok = tiny_lm.tokenizer
    prompt = execution_prompt("lbforaging", {"level": 1, "foods": [], "agents": []}, [0, 1])
    head = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    for name, ids in zip(
        ("none", "north", "south", "west", "east", "load"), action_token_ids(tok, "lbforaging")
    ):
        full = tok.apply_chat_template(prompt + [{"role": "assistant", "content": name}], tokenize=False)
        tail = tok.encode(full, add_special_tokens=False)[len(tok.encode(head, add_special_tokens=False)) :]
        assert tail[: len(ids)] == ids


def test_constrained_decoding_only_emits_legal_actions(tiny_lm):
    """A random tiny LM under the legal-action processor always produces a legal action word."""
    env = make_env("lbforaging", "6x6-2p-2f")
    prompts, legal = [], []
    for seed in range(4):
        env.reset(seed)
        for obs, lg in zip(env.observations(), env.legal_actions()):
            prompts.append(execution_prompt("lbforaging", obs, lg))
            legal.append(lg)
    legal[0] = [5]  # a single legal action must be forced
    texts = generate_actions(tiny_lm, "lbforaging", prompts, legal, constrained=True)
    for text, lg in zip(texts, legal):
        assert parse_action("lbforaging", text) in lg
    assert parse_action("lbforaging", texts[0]) == 5
    with pytest.raises(ValueError, match="legal sets"):
        LegalActionProcessor(tiny_lm.tokenizer, "lbforaging", [[0]])(
            torch.zeros(2, 0, dtype=torch.long), torch.zeros(2, 9)
        )


def test_lm_evaluation_accounts_for_free_decoding_failures(tiny_lm):
    """Free decoding of a random LM is mostly invalid and counted; constrained decoding has zero invalid actions."""
    from finetune.dlm.evaluate import LMPolicy, run_episodes

    kw = dict(episodes=2, seed=0, max_steps=3)  # 3 steps x 2 episodes x 2 agents = 12 decisions
    free = run_episodes("lbforaging", "5x5-2p-1f", LMPolicy(tiny_lm, "free", False), **kw)
    assert free.decisions == 12 and free.unparseable + free.illegal > 0
    legal = run_episodes("lbforaging", "5x5-2p-1f", LMPolicy(tiny_lm, "constrained", True), **kw)
    assert legal.decisions == 12 and legal.invalid_rate == 0.0


def test_tokenizer_without_chat_template_is_refused(tiny_lm, tmp_path):
    """A model whose tokenizer lacks a chat template fails up front with a message naming the fix."""
    from finetune.dlm.sft import check_chat_model

    tok = tiny_lm.tokenizer
    saved, tok.chat_template = tok.chat_template, None
    try:
        with pytest.raises(ValueError, match="no chat template"):
            check_chat_model(tok, "my-base-model")
    finally:
        tok.chat_template = saved


def test_mini_sft_then_grpo_on_a_tiny_model(samples, tmp_path, caplog):
    """One short SFT run changes every trainable weight; one GRPO step runs and logs the four rewards."""
    from safetensors.torch import load_file

    from finetune.dlm.grpo import run_grpo
    from finetune.dlm.sft import run_sft

    cfg = _tiny_sft_cfg(epochs=1)
    metrics = run_sft(cfg, samples[:16], tmp_path)  # 16 samples / batch 16 = one optimiser step
    assert metrics["samples"] == 16
    before, after = (
        load_file(str(tmp_path / "base" / "model.safetensors")),
        load_file(str(tmp_path / "sft" / "model.safetensors")),
    )
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed == list(before)
    # offline GRPO with the paper-style objective (loss "grpo", KL beta 0.04 to the SFT model) and LoRA
    from finetune.dlm.return_model import fit_return_model

    rows, _ = collect_episodes("lbforaging", "5x5-2p-1f", "good", episodes=2, seed=0)
    model, _ = fit_return_model("lbforaging", rows, epochs=2)
    gcfg = GRPORunConfig(max_steps=1, num_generations=4, batch_size=8, max_prompts=8, lora=True)
    assert (gcfg.loss_type, gcfg.beta, gcfg.return_reward) == ("grpo", 0.04, "model")
    execution = [s for s in samples if s["prompt"][1]["role"] == "user"]
    with caplog.at_level(logging.WARNING, logger="finetune.dlm.grpo"):
        gm = run_grpo(gcfg, execution, tmp_path / "sft", tmp_path, return_model=model)
    logged = gm["reward_last"]
    rewards = ("format_reward", "legality_reward", "agreement_reward", "return_model_reward")
    assert all(f"rewards/{f}/mean" in logged for f in rewards)
    # A one-step SFT of a random model emits no parseable action: every completion scores the penalty in
    # every reward, both groups tie, and GRPO has nothing to learn from. The counter and warning must say
    # so, and the merged weights must equal the SFT weights (zero advantage, KL zero at the reference).
    assert logged["reward"] == pytest.approx(-1.0 * sum(gcfg.reward_weights)) and logged["reward_std"] == 0
    assert (gm["zero_advantage_groups"], gm["groups"], gm["zero_advantage_steps"]) == (2, 2, 1)
    assert any("zero advantage" in r.getMessage() for r in caplog.records)
    sft_w, grpo_w = (load_file(str(tmp_path / d / "model.safetensors")) for d in ("sft", "grpo"))
    assert all(torch.allclose(sft_w[k], grpo_w[k], atol=1e-6) for k in sft_w)
    saved = json.loads((tmp_path / "grpo" / "dlm_grpo.json").read_text())
    assert saved["prompts"] == 8 and saved["loss_type"] == "grpo" and saved["beta"] == 0.04
    assert not (tmp_path / "grpo" / "adapter_config.json").exists()  # LoRA merged into a plain checkpoint


def test_sft_with_lora_saves_a_merged_model(samples, tmp_path):
    """`sft.lora=True` trains a peft adapter and saves it merged into a plain checkpoint with changed linears."""
    pytest.importorskip("peft", reason="LoRA needs `pip install peft`")
    from safetensors.torch import load_file

    from finetune.dlm.sft import run_sft

    cfg = _tiny_sft_cfg(epochs=1)
    cfg.lora, cfg.learning_rate = True, 1e-2  # a large step so the merged delta is visible after one update
    run_sft(cfg, samples[:16], tmp_path)
    assert not (tmp_path / "sft" / "adapter_config.json").exists()
    before, after = (
        load_file(str(tmp_path / "base" / "model.safetensors")),
        load_file(str(tmp_path / "sft" / "model.safetensors")),
    )
    key = next(k for k in before if k.endswith("q_proj.weight"))
    assert not torch.equal(before[key], after[key])
    assert torch.equal(before["model.embed_tokens.weight"], after["model.embed_tokens.weight"])


def _tiny_sft_cfg(**kw) -> SFTRunConfig:
    base = dict(
        hidden_size=32, num_hidden_layers=1, vocab_size=300, batch_size=16, max_length=256, warmup_steps=0
    )
    return SFTRunConfig(**(base | kw))


def test_sft_loss_covers_only_the_completion_tokens(samples, tmp_path):
    """Every label outside the assistant's action (+ end of turn) is masked; the action tokens are not."""
    from finetune.dlm.sft import build_sft_trainer

    trainer, _ = build_sft_trainer(_tiny_sft_cfg(epochs=1), samples[:16], tmp_path)
    tok = trainer.processing_class
    batch = next(iter(trainer.get_train_dataloader()))
    actions = {s["completion"][0]["content"] for s in samples}
    for ids, labels in zip(batch["input_ids"], batch["labels"]):
        kept = ids[labels != -100].tolist()
        assert kept and tok.eos_token_id in kept
        text = tok.decode(kept, skip_special_tokens=True).strip()
        assert text in actions, text  # exactly one action word: no observation or system token is trained
        assert (labels != -100).sum() < 0.25 * (ids != tok.pad_token_id).sum()


def test_tiny_sft_lowers_the_loss_and_raises_agreement_with_the_behaviour_actions(tmp_path):
    """On a tiny random model: completion loss on its data falls and greedy actions match the data more."""
    from finetune.dlm.decoding import generate_actions
    from finetune.dlm.sft import build_sft_trainer
    from latent.loading import load_model

    rows, _ = collect_episodes("lbforaging", "5x5-2p-1f", "good", episodes=6, seed=5)
    data = to_samples(rows, teammate_prob=0.0)[:96]

    def agreement(path) -> float:
        lm = load_model(str(path), device="cpu", realign="identity")
        texts = generate_actions(
            lm, "lbforaging", [s["prompt"] for s in data], [s["legal"] for s in data], True
        )
        return sum(parse_action("lbforaging", t) == s["action"] for t, s in zip(texts, data)) / len(data)

    trainer, base = build_sft_trainer(
        _tiny_sft_cfg(epochs=6, learning_rate=3e-3, hidden_size=64), data, tmp_path, with_eval=True
    )
    loss_before = trainer.evaluate()["eval_loss"]
    agree_before = agreement(base)
    trainer.train()
    loss_after = trainer.evaluate()["eval_loss"]
    trainer.model.save_pretrained(tmp_path / "sft")
    trainer.processing_class.save_pretrained(tmp_path / "sft")
    agree_after = agreement(tmp_path / "sft")
    assert loss_after < 0.7 * loss_before, (loss_before, loss_after)
    assert agree_after > agree_before + 0.1, (agree_before, agree_after)


_LETTERS = set("etaoin")


def _letter_reward(completions, **kwargs):
    """Tiny task: the share of completion characters among e, t, a, o, i, n."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [sum(ch in _LETTERS for ch in t) / max(len(t), 1) for t in texts]


def _sampled_reward(model_dir, prompts, draws: int = 8) -> float:
    """Mean tiny-task reward of `draws` seeded samples per prompt (temperature 1, 8 new tokens)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(str(model_dir)).eval()
    texts = [tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    torch.manual_seed(0)
    scores = []
    with torch.no_grad():
        for _ in range(draws):
            out = model.generate(
                **enc, do_sample=True, temperature=1.0, max_new_tokens=8, pad_token_id=tok.pad_token_id
            )
            scores += _letter_reward(
                tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            )
    return sum(scores) / len(scores)


def _tiny_grpo(samples, tmp_path, gcfg: GRPORunConfig, n_prompts: int):
    """One-epoch SFT of the tiny model, then GRPO on the letter reward over `n_prompts` execution prompts."""
    from datasets import Dataset

    from finetune.dlm.grpo import train_grpo
    from finetune.dlm.sft import run_sft

    run_sft(_tiny_sft_cfg(epochs=1), samples[:16], tmp_path)
    prompts = [s["prompt"] for s in samples if s["prompt"][1]["role"] == "user"][:n_prompts]
    dataset = Dataset.from_list([{"prompt": p} for p in prompts])
    return train_grpo(gcfg, tmp_path / "sft", dataset, [_letter_reward], tmp_path), prompts


def test_grpo_raises_a_tiny_task_reward_above_sft(samples, tmp_path):
    """Ten GRPO steps on a graded tiny reward must lift the sampled reward well above the SFT model's
    (measured: 0.17 -> 0.49); with the update removed the GRPO model is the SFT model and this fails."""
    gcfg = GRPORunConfig(
        max_steps=10,
        num_generations=8,
        batch_size=16,
        lora=False,
        beta=0.0,
        learning_rate=0.01,
        max_completion_length=8,
    )
    m, prompts = _tiny_grpo(samples, tmp_path, gcfg, n_prompts=8)
    assert m["groups"] == 20 and m["zero_advantage_groups"] < 5  # a graded reward: groups rarely tie
    before, after = _sampled_reward(tmp_path / "sft", prompts), _sampled_reward(tmp_path / "grpo", prompts)
    assert after > before + 0.1, (before, after)


def test_adaptive_entropy_control_reaches_the_trainer(samples, tmp_path):
    """The run's entropy settings must reach TRL: below its target the bonus grows by its delta each step,
    and the report names the control; a config that drops a field leaves the coefficient at 0."""
    gcfg = GRPORunConfig(
        max_steps=3,
        num_generations=4,
        batch_size=8,
        beta=0.0,
        max_completion_length=4,
        use_adaptive_entropy=True,
        entropy_target=1e3,  # far above any per-token entropy: the bonus must rise every step
        entropy_coef_delta=0.01,
    )
    m, _ = _tiny_grpo(samples, tmp_path, gcfg, n_prompts=4)
    assert [round(s["entropy_coef"], 6) for s in m["steps"]] == [0.01, 0.02, 0.03]
    assert m["entropy_control"] == {
        "adaptive": True,
        "entropy_coef_start": 0.0,
        "entropy_target": 1e3,
        "entropy_coef_delta": 0.01,
    }


def test_group_scoring_trainer_scores_as_trl_does(samples, tmp_path):
    """The trainer `grpo.score_prompts_once` picks must give TRL's own log-probabilities and entropies on
    a LoRA model (prompts repeated per group, completions of different lengths), and `false` must give
    TRL's trainer."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from finetune.dlm.group_trainer import GroupScoringGRPOTrainer
    from finetune.dlm.grpo import build_grpo_trainer
    from finetune.dlm.sft import run_sft

    run_sft(_tiny_sft_cfg(epochs=1), samples[:16], tmp_path)
    prompts = [s["prompt"] for s in samples if s["prompt"][1]["role"] == "user"][:2]
    gcfg = GRPORunConfig(max_steps=1, num_generations=4, batch_size=8, lora=True, temperature=0.8)
    data = Dataset.from_list([{"prompt": p} for p in prompts])
    trainer, _ = build_grpo_trainer(gcfg, tmp_path / "sft", data, [_letter_reward], tmp_path)
    assert type(trainer) is GroupScoringGRPOTrainer
    for name, p in trainer.model.named_parameters():  # LoRA B starts at zero: make the adapter matter
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.2)
    tok = trainer.processing_class
    texts = [tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    enc = tok(
        [t for t in texts for _ in range(4)], return_tensors="pt", padding=True, add_special_tokens=False
    )
    g = torch.Generator().manual_seed(0)
    completion = torch.randint(3, 200, (8, 3), generator=g)
    completion_mask = (torch.arange(3)[None] < torch.tensor([1, 2, 3, 3, 2, 1, 3, 1])[:, None]).long()
    ids = torch.cat([enc["input_ids"], completion.masked_fill(completion_mask == 0, tok.pad_token_id)], 1)
    mask = torch.cat([enc["attention_mask"], completion_mask], 1)
    ours = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, 3, compute_entropy=True)
    theirs = GRPOTrainer._get_per_token_logps_and_entropies(
        trainer, trainer.model, ids, mask, 3, compute_entropy=True
    )
    keep = completion_mask.bool()
    torch.testing.assert_close(ours[0][keep], theirs[0][keep], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours[1][keep], theirs[1][keep], atol=1e-5, rtol=1e-5)
    assert ours[2] is None
    prompt_ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts for _ in range(4)]
    read = []  # tokens through the embedding: the prompts once each, not once per completion
    hook = trainer.model.get_input_embeddings().register_forward_hook(
        lambda m, i, o: read.append(i[0].numel())
    )
    torch.manual_seed(3)
    sampled = trainer._generate_single_turn(prompt_ids, None, {}, 4)[0]
    n_ours, read[:] = sum(read), []
    torch.manual_seed(3)
    assert sampled == GRPOTrainer._generate_single_turn(trainer, prompt_ids, None, {}, 4)[0]
    hook.remove()
    assert n_ours < 0.5 * sum(read), (n_ours, sum(read))
    assert "generate" not in vars(trainer.model)
    off = GRPORunConfig(max_steps=1, num_generations=4, batch_size=8, score_prompts_once=False)
    assert (
        type(build_grpo_trainer(off, tmp_path / "sft", data, [_letter_reward], tmp_path / "off")[0])
        is GRPOTrainer
    )


def test_entropy_settings_are_checked():
    with pytest.raises(ValueError, match="entropy_target"):
        DLMConfig(grpo=GRPORunConfig(entropy_target=0.0))


def test_zero_advantage_counter_counts_tied_groups_and_warns(caplog):
    """Counts come from the whole log history, so a run resumed from a checkpoint (whose callback saw only
    the steps after the resume) still counts every step; each dead step warns as it is logged."""
    from finetune.dlm.grpo import ZeroAdvantageCounter

    c = ZeroAdvantageCounter(groups_per_step=4)
    state = type("S", (), {"global_step": 1})()
    history = [{"frac_reward_zero_std": f} for f in (1.0, 0.5, 0.0)] + [{"loss": 0.1}]  # no metric: no step
    with caplog.at_level(logging.WARNING, logger="finetune.dlm.grpo"):
        for logs in history[1:]:  # resumed after the first step: the callback never saw it
            c.on_log(None, state, None, logs=logs)
        assert not caplog.records  # no dead step among those logged live
        c.on_log(None, state, None, logs=history[0])
        s = c.summary(history)
    assert s == dict(zero_advantage_groups=6, groups=12, zero_advantage_steps=1, logged_steps=3)
    msgs = [r.getMessage() for r in caplog.records]
    assert sum("all 4 groups have tied rewards" in m for m in msgs) == 1 and any(
        "6 of 12 groups" in m for m in msgs
    )


def test_policy_shift_counts_changed_legal_choices_and_kl():
    """Known answers: identical models change nothing (KL 0); a model that swaps the preferred legal action
    changes every legal choice and its legal-action KL is the analytic KL of the two renormalised rows."""
    import math

    from eval.report import wilson
    from finetune.dlm.policy_shift import compare_first_actions

    sft = torch.log_softmax(torch.tensor([[2.0, 0.0, 0.0, 1.0], [0.0, 3.0, 0.0, 0.0]]), -1)
    same = compare_first_actions(sft, sft, first=[0, 1, 3], legal=[[0, 2], [1, 2]])
    assert same["legal_choice_changed"] == same["free_first_token_changed"] == 0
    assert same["kl_legal_actions_mean"] == pytest.approx(0.0, abs=1e-7)
    grpo = torch.log_softmax(torch.tensor([[0.0, 0.0, 0.0, 2.0], [0.0, 3.0, 0.0, 0.0]]), -1)
    moved = compare_first_actions(sft, grpo, first=[0, 1, 3], legal=[[0, 2], [1, 2]])
    assert moved["legal_choice_changed"] == 1 and moved["free_first_token_changed"] == 1  # row 0 only
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    g, f = (sig(-2), sig(2)), (sig(1), sig(-1))  # row 0, legal tokens 0 and 3: grpo and sft renormalised
    kl0 = sum(gi * math.log(gi / fi) for gi, fi in zip(g, f))
    assert moved["kl_legal_actions_mean"] == pytest.approx(kl0 / 2)  # row 1 is unchanged (KL 0)
    lo, hi = wilson(13, 240)
    assert 0.03 < lo < 13 / 240 < hi < 0.10
    # row 0: SFT picks action 0, GRPO action 2; row 1: both pick action 1
    at = compare_first_actions(sft, grpo, first=[0, 1, 3], legal=[[0, 2], [1, 2]], best=[2, 2])
    assert (at["sft_choice_is_reward_best"], at["grpo_choice_is_reward_best"]) == (0, 1)
    assert at["sft_choices"] == {0: 1, 1: 1} and at["grpo_choices"] == {1: 1, 2: 1}
    assert "sft_choice_is_reward_best" not in moved


def test_reward_best_action_weighs_the_grpo_rewards():
    """Known answers: a good-tier sample's logged action wins through the agreement reward unless the
    return model's advantage for another legal action outweighs it; a tier agreement does not cover
    scores 0 there (None), so the return model decides."""
    import json

    from finetune.dlm.policy_shift import reward_best_actions
    from finetune.dlm.rewards import reward_functions

    class Prefers:  # a return model whose advantage favours one action
        def __init__(self, action: int) -> None:
            self.action = action

        def advantage(self, obs, legal, a):
            return 3.0 if a == self.action else -1.0

    obs = json.dumps({"anything": 0})
    good = {"env": "lbforaging", "legal": [0, 1, 2, 3], "action": 1, "obs": obs, "tier": "good"}
    medium = good | {"tier": "medium"}
    funcs = reward_functions("model", ["good"], Prefers(3))
    assert reward_best_actions([good, medium], funcs, [0.5, 1.0, 1.0, 0.5]) == [1, 3]
    assert reward_best_actions([good], funcs, [0.5, 1.0, 0.1, 1.0]) == [3]
    assert reward_best_actions([medium], reward_functions("none", ["good"]), [0.5, 1.0, 1.0]) == [0]


def test_reward_best_labels_put_the_reward_best_action_in_the_completion(samples):
    """The supervised control's data: each sample keeps its prompt and gets the action the rewards score
    highest (here legality + a return model preferring `load` where legal, else `none`) as its completion,
    not the logged action."""
    from finetune.dlm.policy_shift import reward_best_labels
    from finetune.dlm.rewards import reward_functions

    class PrefersLoad:
        def advantage(self, obs, legal, a):
            return 2.0 if a == 5 else (1.0 if a == 0 else -1.0)

    picked = samples[:12]
    labelled = reward_best_labels(picked, reward_functions("model", ["good"], PrefersLoad()), [0, 1, 0, 1])
    for s, lab in zip(picked, labelled):
        want = 5 if 5 in s["legal"] else 0
        assert lab["prompt"] == s["prompt"] and lab["action"] == want
        assert parse_action("lbforaging", lab["completion"][0]["content"]) == want
    assert any(lab["action"] != s["action"] for s, lab in zip(picked, labelled))


def test_reward_by_action_averages_where_legal_and_counts_the_best():
    """Known answer: means are taken over the samples where an action is legal, and ties go to the first
    legal action as in `reward_best_actions`."""
    from finetune.dlm.policy_shift import reward_by_action

    table = reward_by_action([{1: 0.5, 2: -0.5}, {1: 0.0, 2: 0.0, 5: 1.0}, {2: 0.25}])
    assert table == {
        1: {"mean_reward": 0.25, "legal": 2, "best": 1},
        2: {"mean_reward": -0.25 / 3, "legal": 3, "best": 1},
        5: {"mean_reward": 1.0, "legal": 1, "best": 1},
    }


def test_grpo_prompts_are_the_draw_grpo_trains_on(tmp_path):
    """`grpo_prompts` (what reports use to find a run's training prompts) is the draw `grpo_dataset` trains
    on, seeded by the training seed, from execution-only prompts of the configured tiers."""
    from finetune.dlm.config import DataConfig
    from finetune.dlm.data import generate_dataset
    from finetune.dlm.grpo import grpo_dataset, grpo_prompts, grpo_samples

    generate_dataset(
        DataConfig(scenarios=["5x5-2p-1f"], tiers=["good", "poor"], episodes_per_tier=2), tmp_path
    )
    pool = grpo_samples(tmp_path, ["good"], seed=1)
    assert {s["tier"] for s in pool} == {"good"}
    assert all(len(s["prompt"]) == 2 for s in pool)  # system + own observation: no teammate turns
    picked = grpo_prompts(pool, 5, seed=1)
    assert [s["prompt"] for s in picked] == grpo_dataset(pool, 5, seed=1)["prompt"]
    assert [s["prompt"] for s in picked] != [s["prompt"] for s in grpo_prompts(pool, 5, seed=2)]


def test_run_rewards_reads_the_runs_grpo_settings(tmp_path):
    """A finished run's offline rewards come from its own config.json: three without a return model, none
    (None, None) for the online reward, and a missing return model is an error naming the file."""
    from finetune.dlm.policy_shift import run_rewards

    def config(reward: str) -> None:
        grpo = {"return_reward": reward, "agreement_tiers": ["good"], "reward_weights": [0.5, 1.0, 1.0, 0.5]}
        (tmp_path / "config.json").write_text(json.dumps({"grpo": grpo}))

    config("none")
    funcs, weights = run_rewards(tmp_path, 0, "lbforaging")
    assert len(funcs) == 3 and weights == [0.5, 1.0, 1.0, 0.5]
    config("online")
    assert run_rewards(tmp_path, 0, "lbforaging") == (None, None)
    config("model")
    with pytest.raises(FileNotFoundError, match="seed_1/return_lbforaging/return_model.pt"):
        run_rewards(tmp_path, 1, "lbforaging")


def test_shift_prompts_draw_the_same_execution_prompts_per_seed(tmp_path):
    """Every policy-shift report of a seed compares its models on one draw: execution-only prompts from
    every tier, the same for the same seed, another for another seed, capped at the pool size."""
    import random

    from finetune.dlm.config import DataConfig
    from finetune.dlm.data import generate_dataset, load_dataset_dir
    from finetune.dlm.policy_shift import shift_prompts

    generate_dataset(
        DataConfig(scenarios=["5x5-2p-1f"], tiers=["good", "poor"], episodes_per_tier=2), tmp_path
    )
    first, again = shift_prompts(tmp_path, 6, [0, 1]), shift_prompts(tmp_path, 6, [0])
    rows = list(load_dataset_dir(tmp_path, tiers=["good", "medium", "poor"]))
    drawn = random.Random("policy-shift|1").sample(to_samples(rows, teammate_prob=0.0, seed=1), 6)
    assert [s["prompt"] for s in first[1]] == [s["prompt"] for s in drawn]  # the committed reports' draw
    assert [s["prompt"] for s in first[0]] == [s["prompt"] for s in again[0]]
    assert [s["prompt"] for s in first[0]] != [s["prompt"] for s in first[1]]
    assert all(len(s["prompt"]) == 2 for s in first[0])  # system + own observation: no teammate turns
    pool = len(shift_prompts(tmp_path, 10_000, [0])[0])
    assert {s["tier"] for s in shift_prompts(tmp_path, pool, [0])[0]} == {"good", "poor"}
    # a fresh draw shares no prompt with the standard one, even when each takes half the pool
    half = pool // 2
    standard, fresh = shift_prompts(tmp_path, half, [0])[0], shift_prompts(tmp_path, half, [0], draw=1)[0]
    assert [s["prompt"] for s in fresh] == [
        s["prompt"] for s in shift_prompts(tmp_path, half, [0], draw=1)[0]
    ]
    assert fresh and not {str(s["prompt"]) for s in fresh} & {str(s["prompt"]) for s in standard}
    with pytest.raises(ValueError, match="ran out at draw 1"):
        shift_prompts(tmp_path, pool, [0], draw=1)


def test_run_grpo_prompts_reads_the_runs_own_draw(tmp_path):
    """Both DLM benches read a seed's GRPO prompts through the run's config.json: its tiers and its
    `max_prompts`, drawn as `latentworks dlm grpo` draws them."""
    from finetune.dlm.config import DataConfig
    from finetune.dlm.data import generate_dataset
    from finetune.dlm.grpo import grpo_prompts, grpo_samples
    from finetune.dlm.policy_shift import run_grpo_prompts

    generate_dataset(
        DataConfig(scenarios=["5x5-2p-1f"], tiers=["good", "poor"], episodes_per_tier=2), tmp_path / "data"
    )
    (tmp_path / "config.json").write_text(json.dumps({"grpo": {"tiers": ["poor"], "max_prompts": 4}}))
    picked = run_grpo_prompts(tmp_path, 3)
    want = grpo_prompts(grpo_samples(tmp_path / "data", ["poor"], 3), 4, 3)
    assert [s["prompt"] for s in picked] == [s["prompt"] for s in want] and len(picked) == 4
    assert {s["tier"] for s in picked} == {"poor"}
