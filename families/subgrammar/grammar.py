"""PCFGs with delimited subgrammars: sampling with exact log-probabilities, expected invocation counts,
and the exact linear KL decomposition over top-level subgrammars.

Paper: Schulz, Mitropolsky, Poggio, "Unraveling Syntax: How Language Models Learn Context-Free Grammars"
(v3: "Language Modeling and the Substructure of Grammars"), arXiv 2510.02524. Reference code (read only):
github.com/laschulz/pcfg-transformer-learning.

A subgrammar is the PCFG rooted at one nonterminal. When the top level invokes subgrammar i between the
delimiters s<i> ... e<i>, the chain rule splits the sequence log-likelihood into top-level tokens (start
delimiters and EOS) and segment tokens (content and end delimiter), so for any autoregressive model q
    KL(p || q) = KL_top + sum_i c_i KL_i,
with c_i the expected number of invocations of subgrammar i and KL_i the per-invocation KL of the segment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Rules = dict[str, list[tuple[tuple[str, ...], float]]]

BOS, EOS, PAD = "<bos>", "<eos>", "<pad>"


@dataclass
class Sample:
    """One string: tokens (no BOS/EOS), exact log p of the string, and its subgrammar segments.

    `segments` holds (subgrammar, start, end, log p_sub) with tokens[start:end] = content + end delimiter.
    """

    tokens: list[str]
    logp: float
    segments: list[tuple[str, int, int, float]]


class PCFG:
    """A PCFG whose top level invokes delimited subgrammars `sub_roots` as `s<X> X e<X>`."""

    def __init__(self, rules: Rules, start: str, sub_roots: tuple[str, ...]) -> None:
        problems = []
        for lhs, alts in rules.items():
            if not alts:
                problems.append(f"nonterminal {lhs!r} has no productions")
            elif abs(sum(p for _, p in alts) - 1) > 1e-9:
                problems.append(f"probabilities of {lhs!r} sum to {sum(p for _, p in alts):.4f}, not 1")
            if any(p <= 0 for _, p in alts):
                problems.append(f"{lhs!r} has a non-positive rule probability")
        if start not in rules:
            problems.append(f"start symbol {start!r} has no rules")
        problems += [f"subgrammar root {r!r} has no rules" for r in sub_roots if r not in rules]
        if problems:
            raise ValueError("Invalid PCFG: " + "; ".join(problems) + ".")
        self.rules, self.start, self.sub_roots = rules, start, tuple(sub_roots)
        if np.abs(np.linalg.eigvals(self.mean_matrix())).max() >= 1:
            raise ValueError(
                "the PCFG is not consistent (expected derivation size is infinite): lower the "
                "probabilities of recursive rules."
            )

    @property
    def nonterminals(self) -> list[str]:
        """All nonterminals, in rule order."""
        return list(self.rules)

    def terminals(self) -> list[str]:
        """All terminal symbols, sorted."""
        return sorted(
            {s for alts in self.rules.values() for rhs, _ in alts for s in rhs if s not in self.rules}
        )

    def subgrammar(self, root: str) -> PCFG:
        """The standalone PCFG rooted at `root` (its own delimiters added, for pretraining data)."""
        keep, todo = {}, [root]
        while todo:
            a = todo.pop()
            if a in keep:
                continue
            keep[a] = self.rules[a]
            todo += [s for rhs, _ in self.rules[a] for s in rhs if s in self.rules]
        top = f"TOP_{root}"
        return PCFG({top: [((f"s{root}", root, f"e{root}"), 1.0)], **keep}, top, (root,))

    # --- branching-process algebra --------------------------------------------------------------------
    def mean_matrix(self) -> np.ndarray:
        """M[a, b] = expected number of nonterminal b in one expansion of a (the branching-process mean)."""
        idx = {a: i for i, a in enumerate(self.rules)}
        m = np.zeros((len(idx), len(idx)))
        for a, alts in self.rules.items():
            for rhs, p in alts:
                for s in rhs:
                    if s in idx:
                        m[idx[a], idx[s]] += p
        return m

    def expected_invocations(self) -> dict[str, float]:
        """Expected number of times each nonterminal is expanded from the start: e_start (I - M)^{-1}."""
        m = self.mean_matrix()
        row = np.linalg.inv(np.eye(len(m)) - m)[self.nonterminals.index(self.start)]
        return dict(zip(self.nonterminals, row.tolist()))

    def decomposition_coefficients(self) -> dict[str, float]:
        """c_i of KL = KL_top + sum_i c_i KL_i: expected number of delimited invocations s<i> i e<i>.

        That is the expected count of the start delimiter, sum_a E[#a] sum_rules p(rule) #s<i>(rule); the
        subgrammar's own recursion is inside KL_i, not in c_i.
        """
        inv = self.expected_invocations()
        return {
            r: sum(inv[a] * p * rhs.count(f"s{r}") for a, alts in self.rules.items() for rhs, p in alts)
            for r in self.sub_roots
        }

    # --- sampling -------------------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator, max_len: int = 10_000) -> Sample | None:
        """Draw one string with its exact log-probability; None if it exceeds `max_len` tokens.

        The log-probability is that of the derivation, which equals the string's when the grammar is
        unambiguous (true for the grammars in data.py; `string_logprob_nltk` cross-checks it).
        """
        tokens: list[str] = []
        segments: list[tuple[str, int, int, float]] = []
        logp = 0.0
        stack: list[tuple[str, ...]] = [("sym", self.start)]
        open_segs: list[tuple[str, int, float]] = []
        while stack:
            kind, *rest = stack.pop()
            if kind == "close":  # the end delimiter has just been emitted
                root, s0, lp0 = open_segs.pop()
                segments.append((root, s0, len(tokens), logp - lp0))
                continue
            sym = rest[0]
            if sym not in self.rules:
                tokens.append(sym)
                if len(tokens) > max_len:
                    return None
                if sym.startswith("s") and sym[1:] in self.sub_roots:
                    open_segs.append((sym[1:], len(tokens), logp))
                elif sym.startswith("e") and sym[1:] in self.sub_roots:
                    stack.append(("close",))
                continue
            alts = self.rules[sym]
            k = rng.choice(len(alts), p=[p for _, p in alts])
            rhs, p = alts[k]
            logp += math.log(p)
            stack += [("sym", s) for s in reversed(rhs)]
        # top-level rule log-probs are counted in logp but belong to no segment: segment log p_sub only
        # accumulates rules used between s<X> and e<X>.
        return Sample(tokens, logp, sorted(segments, key=lambda s: s[1]))

    def sample_many(self, n: int, seed: int = 0, max_len: int = 90) -> list[Sample]:
        """n strings of at most `max_len` tokens (longer draws are rejected, i.e. p is conditioned on length)."""
        if n < 1:
            raise ValueError(f"`n` must be >= 1, got {n}.")
        rng = np.random.default_rng(seed)
        out: list[Sample] = []
        while len(out) < n:
            s = self.sample(rng, max_len)
            if s is not None:
                out.append(s)
        return out

    def to_nltk(self):
        """The same grammar as an `nltk.PCFG` (delimiters and terminals quoted)."""
        import nltk

        lines = []
        for a, alts in self.rules.items():
            rhs = " | ".join(
                " ".join(s if s in self.rules else f"'{s}'" for s in r) + f" [{p!r}]" for r, p in alts
            )
            lines.append(f"{a} -> {rhs}")
        return nltk.PCFG.fromstring("\n".join(lines))

    def string_logprob_nltk(self, tokens: list[str]) -> float:
        """Exact log p(string) by summing all parses with nltk's inside-chart parser (-inf if not in L)."""
        import nltk

        parser = nltk.InsideChartParser(self.to_nltk())
        total = sum(t.prob() for t in parser.parse_all(tokens))
        return math.log(total) if total > 0 else -math.inf

    def _language(self) -> dict[tuple[str, ...], float]:
        """String -> probability of a finite grammar (leftmost derivations; parses of one string are summed)."""
        out: dict[tuple[str, ...], float] = {}
        todo: list[tuple[tuple[str, ...], float]] = [((self.start,), 1.0)]
        while todo:
            seq, p = todo.pop()
            i = next((k for k, sym in enumerate(seq) if sym in self.rules), None)
            if i is None:
                out[seq] = out.get(seq, 0.0) + p
                continue
            todo += [(seq[:i] + rhs + seq[i + 1 :], p * q) for rhs, q in self.rules[seq[i]]]
        return out

    def enumerate_language(self, max_len: int = 30) -> list[Sample]:
        """Every string of a finite grammar with its exact probability and segments (raises if recursive)."""
        if np.linalg.matrix_power(self.mean_matrix(), len(self.rules) + 1).any():
            raise ValueError("enumerate_language needs a non-recursive (finite) grammar.")
        sub = {r: self.subgrammar(r)._language() for r in self.sub_roots}
        out = []
        for toks, p in self._language().items():
            if len(toks) > max_len:
                continue
            segs, i = [], 0
            while i < len(toks):
                if toks[i].startswith("s") and toks[i][1:] in self.sub_roots:
                    root = toks[i][1:]
                    j = toks.index(f"e{root}", i + 1)
                    segs.append((root, i + 1, j + 1, math.log(sub[root][toks[i : j + 1]])))
                    i = j
                i += 1
            out.append(Sample(list(toks), math.log(p), segs))
        return out


def kl_decomposition(
    samples: list[Sample], weights: list[float], logq: list[np.ndarray], grammar: PCFG
) -> dict[str, float]:
    """Split E_w[log p(x) - log q(x)] into KL_top and per-invocation KL_i over weighted strings.

    logq[k] holds log q of every token of `samples[k].tokens + [EOS]` given its prefix (BOS first). With
    weights = exact probabilities of a finite language this is exact; with weights 1/N on samples it is
    the Monte-Carlo estimate. Returns total, top, KL_<i>, the invocation counts c_<i> under the weights,
    and the recomposed KL_top + sum_i c_i KL_i.
    """
    if not samples or len(samples) != len(weights) or len(samples) != len(logq):
        raise ValueError("`samples`, `weights` and `logq` must be non-empty and of equal length.")
    w = np.asarray(weights, dtype=float)
    if (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
        raise ValueError("`weights` must be finite, non-negative and not all zero.")
    w = w / w.sum()
    total = top = 0.0
    sub = {r: 0.0 for r in grammar.sub_roots}
    count = {r: 0.0 for r in grammar.sub_roots}
    for s, wi, lq in zip(samples, w, logq):
        lq = np.asarray(lq, dtype=float)  # (T + 1,) incl. EOS
        if lq.shape != (len(s.tokens) + 1,):
            raise ValueError(
                f"logq entry has shape {lq.shape}; need one log-prob per token plus EOS "
                f"({len(s.tokens) + 1})."
            )
        in_seg = np.zeros(len(lq), dtype=bool)
        lp_segs = 0.0
        for root, a, b, lp_sub in s.segments:
            in_seg[a:b] = True
            sub[root] += wi * (lp_sub - lq[a:b].sum())
            count[root] += wi
            lp_segs += lp_sub
        total += wi * (s.logp - lq.sum())
        top += wi * ((s.logp - lp_segs) - lq[~in_seg].sum())
    kl_i = {r: sub[r] / count[r] if count[r] > 0 else float("nan") for r in sub}
    recomposed = top + sum(count[r] * kl_i[r] for r in sub if count[r] > 0)
    return {"total": total, "top": top, "recomposed": recomposed, **{f"KL_{r}": v for r, v in kl_i.items()},
            **{f"c_{r}": v for r, v in count.items()}}  # fmt: skip
