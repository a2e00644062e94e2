"""Synthetic problems with exact likelihoods: Ehrlich-style sequence design and selective claims.

`pytorch-holo` (which ships the Ehrlich functions) pins numpy<2 and cannot be installed next to this
project's numpy 2.x, so `EhrlichLikeProblem` rebuilds the closed form from the paper's definition
(Stanton et al. 2024, "Closed-Form Test Functions for Biophysical Sequence Design"): a sequence is
feasible iff it uses no banned transition; the objective is the product over c spaced motifs of the
quantized best fraction of motif elements present, and 0 for infeasible sequences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class MarkovChainPolicy:
    """A (possibly position-dependent) first-order Markov chain over tokens, with exact log-likelihoods.

    init: (V,) first-token probabilities; trans: (L-1, V, V) per-position transition matrices.
    """

    init: np.ndarray
    trans: np.ndarray

    def __post_init__(self) -> None:
        if self.init.ndim != 1 or self.trans.ndim != 3 or self.trans.shape[1:] != (self.init.size,) * 2:
            raise ValueError(
                f"`init` must be (V,) and `trans` (L-1, V, V); got {self.init.shape} and {self.trans.shape}."
            )
        if (self.init <= 0).any() or (self.trans <= 0).any():
            raise ValueError("All probabilities must be > 0 so likelihood ratios stay finite; add leakage.")
        self.init = self.init / self.init.sum()
        self.trans = self.trans / self.trans.sum(axis=-1, keepdims=True)

    @property
    def length(self) -> int:
        return self.trans.shape[0] + 1

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """(n, L) int array of token sequences."""
        x = np.empty((n, self.length), dtype=np.int64)
        x[:, 0] = _categorical(np.broadcast_to(self.init, (n, self.init.size)), rng)
        for t in range(1, self.length):
            x[:, t] = _categorical(self.trans[t - 1][x[:, t - 1]], rng)
        return x

    def log_prob(self, x: np.ndarray) -> np.ndarray:
        """(n,) exact log-likelihood of each sequence."""
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != self.length:
            raise ValueError(f"`x` must have shape (n, {self.length}), got {x.shape}.")
        pos = np.arange(self.length - 1)
        return np.log(self.init[x[:, 0]]) + np.log(self.trans[pos, x[:, :-1], x[:, 1:]]).sum(axis=1)

    def max_log_ratio_over(self, other: MarkovChainPolicy) -> float:
        """sup_x log(self(x) / other(x)) by max-product dynamic programming (Viterbi), exact."""
        if other.trans.shape != self.trans.shape:
            raise ValueError("Both chains must share length and vocabulary.")
        best = np.log(self.init) - np.log(other.init)  # (V,) best prefix ratio ending in each token
        step = np.log(self.trans) - np.log(other.trans)  # (L-1, V, V)
        for t in range(self.length - 1):
            best = (best[:, None] + step[t]).max(axis=0)
        return float(best.max())


def _categorical(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of a (n, V) probability matrix."""
    cdf = probs.cumsum(axis=1)
    u = rng.uniform(size=(probs.shape[0], 1)) * cdf[:, -1:]
    return np.minimum((u > cdf).sum(axis=1), probs.shape[1] - 1)


class EhrlichLikeProblem:
    """Sequence design with banned transitions (the constraint) and spaced motifs (the objective)."""

    def __init__(
        self,
        vocab_size: int = 8,
        length: int = 16,
        num_motifs: int = 2,
        motif_length: int = 4,
        quantization: int = 4,
        banned_per_token: int = 3,
        seed: int = 0,
    ) -> None:
        if vocab_size < 3 or length < 2 or num_motifs < 1 or motif_length < 1:
            raise ValueError("Need vocab_size >= 3, length >= 2, num_motifs >= 1, motif_length >= 1.")
        if not 0 <= banned_per_token <= vocab_size - 2:
            raise ValueError(f"`banned_per_token` must be in [0, vocab_size-2], got {banned_per_token}.")
        if num_motifs * motif_length > length:
            raise ValueError("Motifs do not fit: need num_motifs * motif_length <= length.")
        rng = np.random.default_rng(seed)
        V = vocab_size
        self.vocab_size, self.length, self.quantization = V, length, quantization
        # token v may always go to itself and to v+1, so every motif stays reachable (ergodic)
        self.banned = np.zeros((V, V), dtype=bool)
        for v in range(V):
            choices = [u for u in range(V) if u not in (v, (v + 1) % V)]
            self.banned[v, rng.choice(choices, size=banned_per_token, replace=False)] = True
        self.motifs = [rng.choice(V, size=motif_length, replace=False) for _ in range(num_motifs)]
        span = length // num_motifs  # each motif's elements are spread over at most `span` positions
        self.spacings = []
        for _ in range(num_motifs):
            gaps = np.sort(rng.choice(np.arange(1, span), size=motif_length - 1, replace=False))
            self.spacings.append(np.concatenate([[0], gaps]))

    def infeasible(self, x: np.ndarray) -> np.ndarray:
        """(n,) bool: the sequence uses at least one banned transition (the loss is this indicator)."""
        return self.banned[x[:, :-1], x[:, 1:]].any(axis=1)

    def objective(self, x: np.ndarray) -> np.ndarray:
        """(n,) Ehrlich-style value in [0, 1]; 0 when infeasible."""
        value = np.ones(len(x))
        for motif, offs in zip(self.motifs, self.spacings):
            starts = np.arange(self.length - offs[-1])
            hits = (x[:, starts[:, None] + offs[None, :]] == motif[None, None, :]).mean(axis=2)  # (n, starts)
            h = hits.max(axis=1)
            value *= np.floor(h * self.quantization + 1e-9) / self.quantization
        return np.where(self.infeasible(x), 0.0, value)

    def safe_policy(self, leak: float = 0.002, seed: int = 0) -> MarkovChainPolicy:
        """Homogeneous chain that mostly respects the constraint: banned moves get `leak` mass in total."""
        rng = np.random.default_rng(seed)
        V = self.vocab_size
        trans = rng.dirichlet(np.ones(V) * 2.0, size=V) * ~self.banned
        trans = trans / trans.sum(axis=1, keepdims=True) * (1 - leak)
        n_banned = self.banned.sum(axis=1, keepdims=True).clip(min=1)
        trans = trans + self.banned * (leak / n_banned)
        trans = np.where(trans > 0, trans, 1e-12)
        return MarkovChainPolicy(np.full(V, 1.0 / V), np.repeat(trans[None], self.length - 1, axis=0))

    def optimized_policy(
        self,
        safe: MarkovChainPolicy,
        rounds: int = 3,
        num_samples: int = 4000,
        elite_frac: float = 0.2,
        smoothing: float = 0.05,
        seed: int = 0,
    ) -> MarkovChainPolicy:
        """Cross-entropy-method optimizer: refit a position-wise chain to the top samples each round.

        The final `smoothing` mass is spread uniformly over *all* tokens, so the optimizer is
        over-confident about unexplored (banned) moves: higher objective, much higher infeasibility.
        """
        rng = np.random.default_rng(seed)
        V, L = self.vocab_size, self.length
        policy = safe
        for _ in range(rounds):
            x = policy.sample(num_samples, rng)
            f = self.objective(x) + 1e-3 * rng.uniform(size=len(x))  # break ties at random
            elite = x[np.argsort(f)[-max(int(elite_frac * len(x)), 2) :]]
            init = np.bincount(elite[:, 0], minlength=V) + 0.5
            trans = np.full((L - 1, V, V), 0.5)
            np.add.at(trans, (np.arange(L - 1)[None, :], elite[:, :-1], elite[:, 1:]), 1.0)
            trans = trans / trans.sum(axis=-1, keepdims=True)
            policy = MarkovChainPolicy(init, (1 - smoothing) * trans + smoothing / V)
        return policy


def selective_claims(num_examples: int, num_claims: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Claims with confidence scores and truth labels whose false-discovery curve is non-monotone.

    Five kinds of claims (probability, score law): true high-confidence (0.42, U[0.6, 1]), false
    high-confidence (0.03, U[0.6, 1]), a false mid-confidence cluster (0.05, U[0.5, 0.6]), true
    mid-confidence (0.30, U[0.3, 0.5]) and false low-confidence (0.20, U[0, 0.3]). Lowering the
    threshold first adds the false cluster (the FDP jumps up), then many true claims (it falls back),
    then the false tail (it rises again). Returns scores (n, m) and is_false (n, m) bool.
    """
    if num_examples < 1 or num_claims < 1:
        raise ValueError("`num_examples` and `num_claims` must be >= 1.")
    rng = np.random.default_rng(seed)
    shape = (num_examples, num_claims)
    kind = rng.choice(5, size=shape, p=[0.42, 0.03, 0.05, 0.30, 0.20])
    low = np.array([0.6, 0.6, 0.5, 0.3, 0.0])[kind]
    high = np.array([1.0, 1.0, 0.6, 0.5, 0.3])[kind]
    scores = low + (high - low) * rng.uniform(size=shape)
    return scores, np.isin(kind, (1, 2, 4))


def configuration_losses(num_examples: int, num_configs: int, error_rate: float, seed: int = 0) -> np.ndarray:
    """(n, G) error indicators of G unrelated configurations (prompts, checkpoints, seeds) that all
    err at `error_rate`, preceded by a do-nothing option with loss 0 (column 0).

    The loss is as non-monotone in the configuration index as it can be: picking the best-looking
    configuration overfits, which is exactly where CRC's monotonicity assumption breaks.
    """
    if num_examples < 1 or num_configs < 1 or not 0 <= error_rate <= 1:
        raise ValueError("Need num_examples >= 1, num_configs >= 1 and error_rate in [0, 1].")
    rng = np.random.default_rng(seed)
    errs = (rng.uniform(size=(num_examples, num_configs)) < error_rate).astype(float)
    return np.concatenate([np.zeros((num_examples, 1)), errs], axis=1)


def fdp_losses(scores: np.ndarray, is_false: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """(n, G) false-discovery proportion of the kept claims per threshold (0 when nothing is kept)."""
    keep = scores[:, :, None] >= thresholds[None, None, :]  # (n, m, G)
    kept = keep.sum(axis=1)
    false_kept = (keep & is_false[:, :, None]).sum(axis=1)
    return np.where(kept > 0, false_kept / np.maximum(kept, 1), 0.0)


def kept_true(scores: np.ndarray, is_false: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """(n, G) number of true claims kept per threshold (the power of a threshold)."""
    keep = scores[:, :, None] >= thresholds[None, None, :]
    return (keep & ~is_false[:, :, None]).sum(axis=1)
