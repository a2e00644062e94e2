"""Tiny GPT-2 language models on PCFG strings: training, per-subgrammar KL curves, CKA alignment.

Paper: arXiv 2510.02524 (see grammar.py). The model is Hugging Face `GPT2LMHeadModel` built from a
config in code (learned absolute positions, tied embeddings, as in the reference code's nanoGPT).

Letters: B = batch, T = tokens (BOS + string + EOS), V = vocabulary, D = hidden size.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from .config import SubgrammarConfig
from .grammar import BOS, EOS, PAD, PCFG, Sample, kl_decomposition

if TYPE_CHECKING:
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)


class Vocab:
    """Token <-> id map: PAD=0, BOS=1, EOS=2, then the grammar's terminals."""

    def __init__(self, terminals: list[str]) -> None:
        self.itos = [PAD, BOS, EOS, *terminals]
        self.stoi = {t: i for i, t in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def encode_batch(self, samples: list[Sample]) -> torch.Tensor:
        """(B, T) ids of BOS + tokens + EOS, right-padded with PAD."""
        seqs = [[1, *(self.stoi[t] for t in s.tokens), 2] for s in samples]
        out = torch.zeros(len(seqs), max(map(len, seqs)), dtype=torch.long)
        for i, q in enumerate(seqs):
            out[i, : len(q)] = torch.tensor(q)
        return out


def build_model(cfg: SubgrammarConfig, vocab_size: int, seed: int = 0) -> torch.nn.Module:
    """A tiny GPT-2 (no dropout: the runs are too short to overfit 5k strings)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    hf = GPT2Config(
        vocab_size=vocab_size, n_positions=cfg.max_position_embeddings, n_embd=cfg.hidden_size,
        n_layer=cfg.num_hidden_layers, n_head=cfg.num_attention_heads, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=True,
    )  # fmt: skip
    return GPT2LMHeadModel(hf)


@torch.no_grad()
def token_logprobs(
    model: torch.nn.Module, vocab: Vocab, samples: list[Sample], batch: int = 128
) -> list[np.ndarray]:
    """log q(x_t | x_<t) for every token and the final EOS of each sample (BOS is given)."""
    model.eval()
    out: list[np.ndarray] = []
    for i in range(0, len(samples), batch):
        ids = vocab.encode_batch(samples[i : i + batch])  # (B, T)
        logits = model(input_ids=ids, attention_mask=(ids != 0).long()).logits  # (B, T, V)
        lp = torch.log_softmax(logits[:, :-1].double(), -1).gather(-1, ids[:, 1:, None])[..., 0]  # (B, T-1)
        for k, s in enumerate(samples[i : i + batch]):
            out.append(lp[k, : len(s.tokens) + 1].numpy())
    model.train()
    return out


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA (Kornblith et al. 2019) between feature matrices (N, P) and (N, Q)."""
    if x.shape[0] != y.shape[0] or x.shape[0] < 2:
        raise ValueError(f"CKA needs the same number (>= 2) of rows, got {x.shape[0]} and {y.shape[0]}.")
    x, y = x - x.mean(0), y - y.mean(0)
    hsic = np.linalg.norm(x.T @ y) ** 2
    denom = np.linalg.norm(x.T @ x) * np.linalg.norm(y.T @ y)
    return float(hsic / denom) if denom > 0 else 0.0


@torch.no_grad()
def grammar_alignment(model: torch.nn.Module, vocab: Vocab, samples: list[Sample], grammar: PCFG) -> float:
    """CKA between last-layer hidden states and one-hot subgrammar membership (top level or root i) per token."""
    model.eval()
    ids = vocab.encode_batch(samples)
    hid = model(input_ids=ids, attention_mask=(ids != 0).long(), output_hidden_states=True).hidden_states[-1]
    model.train()
    feats, labels = [], []
    for k, s in enumerate(samples):
        lab = np.zeros(len(s.tokens), dtype=int)  # 0 = top level
        for root, a, b, _ in s.segments:
            lab[a - 1 : b - 1] = 1 + grammar.sub_roots.index(root)  # content + end delimiter (no BOS shift)
        feats.append(hid[k, 1 : len(s.tokens) + 1].numpy())  # hidden state at each string token
        labels.append(lab)
    lab = np.concatenate(labels)
    return linear_cka(np.concatenate(feats), np.eye(1 + len(grammar.sub_roots))[lab])


@dataclass
class TrainResult:
    """Per-subgrammar KL curves (nats per invocation), total KL per string, and final alignment."""

    steps: list[int] = field(default_factory=list)
    curves: dict[str, list[float]] = field(default_factory=dict)
    final: dict[str, float] = field(default_factory=dict)
    cka: float = float("nan")


def _train_steps(model: PreTrainedModel, opt, vocab: Vocab, pool: list[Sample], steps: int, cfg: SubgrammarConfig,
                 rng: np.random.Generator, hook=None) -> None:  # fmt: skip
    for step in range(1, steps + 1):
        ids = vocab.encode_batch([pool[i] for i in rng.integers(0, len(pool), cfg.batch_size)])  # (B, T)
        labels = ids.masked_fill(ids == 0, -100)
        loss = model(input_ids=ids, attention_mask=(ids != 0).long(), labels=labels).loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if hook is not None:
            hook(step)


def train_and_track(grammar: PCFG, cfg: SubgrammarConfig, seed: int = 0) -> TrainResult:
    """Optionally pretrain on standalone subgrammars, then train on the grammar, tracking KL_top and KL_i."""
    vocab = Vocab(grammar.terminals())
    train = grammar.sample_many(cfg.num_train, seed=seed, max_len=cfg.max_position_embeddings - 2)
    test = grammar.sample_many(cfg.num_test, seed=10_000 + seed, max_len=cfg.max_position_embeddings - 2)
    model = build_model(cfg, len(vocab), seed)
    opt = torch.optim.AdamW(
        model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay, betas=(0.9, 0.95)
    )
    rng = np.random.default_rng(seed)
    res = TrainResult()

    def evaluate(step: int) -> None:
        if step % cfg.eval_every and step != cfg.train_steps:
            return
        d = kl_decomposition(test, [1.0] * len(test), token_logprobs(model, vocab, test), grammar)
        res.steps.append(step)
        for k, v in d.items():
            res.curves.setdefault(k, []).append(v)

    if cfg.pretrain_steps:
        pool = [s for r in grammar.sub_roots
                for s in grammar.subgrammar(r).sample_many(cfg.num_train // len(grammar.sub_roots), seed=seed,
                                                           max_len=cfg.max_position_embeddings - 2)]  # fmt: skip
        _train_steps(model, opt, vocab, pool, cfg.pretrain_steps, cfg, rng)
    evaluate(0)
    _train_steps(model, opt, vocab, train, cfg.train_steps, cfg, rng, evaluate)
    res.final = {k: v[-1] for k, v in res.curves.items()}
    res.cka = grammar_alignment(model, vocab, test[:200], grammar)
    return res
