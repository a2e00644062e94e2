"""Local covariate selection (LCS): an adjustment set, "zero effect" or "not identifiable" from CI tests.

Paper: Liu, Li, Xie, Zeng, Zhang & Zhang, "Local Covariate Selection for Average Causal Effect
Estimation without Pretreatment and Causal Sufficiency Assumptions", ICML 2026, arXiv 2605.21548.
No public code. The paper's exact boundary and rules were not retrievable here; this file is OUR
reconstruction from standard, citable lemmas (see README "Choices"):

1. Boundary B = MB(X) u MB(Y), learned with grow-shrink from CI tests only.
2. Certify covariates in B as non-descendants of X (this replaces the pretreatment assumption):
   - collider rule (Claassen & Heskes 2011, minimal dependence): V _||_ U | S and V dep U | S+{X}
     => X is not an ancestor of V, U or S;
   - separation rule: V _||_ X | S with S certified => V certified (a directed path X -> V would
     stay open, since S holds no descendant of X);
   - ancestor rule (minimal independence): V dep U | S, V _||_ U | S+{T}, V, U, S certified
     => T is an ancestor of certified nodes, hence certified.
3. Entner-Hoyer-Spirtes rules with witness W and set Z restricted to certified covariates:
   - adjustment: W dep Y | Z and W _||_ Y | Z+{X}  => Z is a valid adjustment set;
   - zero effect: X _||_ Y | Z, or (W dep X | Z and W _||_ Y | Z), or Y itself certified;
   - otherwise "not identifiable".
Estimation on the returned set is a regression of Y on X and a polynomial of Z.

Notation: X treatment, Y outcome, B boundary, C certified non-descendants of X, k = max_cond_size.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .config import CovselConfig

logger = logging.getLogger(__name__)

CITest = Callable[[int, int, Iterable[int]], bool]  # True = independent

ADJUST, ZERO, NOT_IDENTIFIABLE = "adjust", "zero", "not_identifiable"


@dataclass
class CovselResult:
    """Verdict of the selector: `adjust` with `adjustment_set`, `zero`, or `not_identifiable`."""

    verdict: str
    adjustment_set: frozenset | None = None
    witness: int | None = None
    boundary: frozenset = field(default_factory=frozenset)
    certified: frozenset = field(default_factory=frozenset)
    n_tests: int = 0


def _subsets(pool: Sequence[int], max_size: int) -> Iterable[frozenset]:
    for k in range(min(max_size, len(pool)) + 1):
        for s in itertools.combinations(pool, k):
            yield frozenset(s)


def markov_blanket(ci: CITest, target: int, candidates: Iterable[int]) -> set[int]:
    """Grow-shrink Markov blanket of `target` among `candidates` (sound with a CI oracle)."""
    cands = [c for c in candidates if c != target]
    mb: list[int] = []
    changed = True
    while changed:  # grow: add anything still dependent on the target given the current blanket
        changed = False
        for v in cands:
            if v not in mb and not ci(target, v, mb):
                mb.append(v)
                changed = True
    for v in list(mb):  # shrink: drop false positives added early
        if ci(target, v, [u for u in mb if u != v]):
            mb.remove(v)
    return set(mb)


class LocalCovariateSelector:
    """Local, CI-test-only covariate selection that allows latents and post-treatment covariates.

    Example:
        >>> import networkx as nx
        >>> from families.covsel.citests import DSeparationOracle
        >>> g = nx.DiGraph([(0, 2), (1, 2), (3, 2), (3, 4), (2, 4)])  # 0, 1 -> X=2 <- 3 -> Y=4
        >>> res = LocalCovariateSelector().select(DSeparationOracle(g), x=2, y=4, covariates=[0, 1, 3])
        >>> res.verdict, sorted(res.adjustment_set)
        ('adjust', [0, 3])
    """

    def __init__(self, config: CovselConfig | None = None) -> None:
        self.config = config or CovselConfig()

    # ---- step 1: the local boundary ------------------------------------------------------------
    def boundary(self, ci: CITest, x: int, y: int, covariates: Sequence[int]) -> set[int]:
        """B = (MB(X) u MB(Y)) minus {X, Y}, or every covariate when `config.local` is False."""
        if not self.config.local:
            return set(covariates)
        everything = [*covariates, x, y]
        return (markov_blanket(ci, x, everything) | markov_blanket(ci, y, everything)) - {x, y}

    # ---- step 2: certify non-descendants of X --------------------------------------------------
    def certify(self, ci: CITest, x: int, y: int, pool: set[int]) -> set[int]:
        """Subset of `pool` (which may include Y) that is provably not a descendant of X."""
        if self.config.assume_pretreatment:
            return set(pool) - {y}
        k = self.config.max_cond_size
        k_sep = k if self.config.certify_sep_size is None else self.config.certify_sep_size
        cert: set[int] = set()
        nodes = sorted(pool)
        for v, u in itertools.combinations(nodes, 2):  # collider rule at X
            rest = [w for w in nodes if w not in (v, u)]
            sep = next((s for s in _subsets(rest, k_sep) if ci(v, u, s)), None)
            if sep is not None and not ci(v, u, sep | {x}):
                cert |= {v, u}  # S is certified too by the lemma, but a false independence would spread
        changed = True
        while changed:
            changed = False
            for v in [n for n in nodes if n not in cert]:  # separation rule
                if any(ci(v, x, s) for s in _subsets(sorted(cert - {v}), k)):
                    cert.add(v)
                    changed = True
            if self.config.use_ancestor_rule and not changed:
                changed = self._ancestor_rule(ci, nodes, cert, k)
        return cert

    @staticmethod
    def _ancestor_rule(ci: CITest, nodes: list[int], cert: set[int], k: int) -> bool:
        certified = sorted(cert)
        for t in [n for n in nodes if n not in cert]:
            for v, u in itertools.combinations(certified, 2):
                rest = [w for w in certified if w not in (v, u)]
                for s in _subsets(rest, max(k - 1, 0)):
                    if not ci(v, u, s) and ci(v, u, s | {t}):
                        cert.add(t)
                        return True
        return False

    # ---- step 3: identification rules ----------------------------------------------------------
    def identify(
        self, ci: CITest, x: int, y: int, cert: set[int]
    ) -> tuple[str, frozenset | None, int | None]:
        """Apply the adjustment rule, then the zero-effect rules, with Z drawn from certified covariates.

        Under a CI oracle the two verdicts exclude each other (the adjustment rule implies X is an
        ancestor of Y), so the order only matters with finite samples, where we trust the adjustment
        rule first because the zero rules fire on any false independence.
        """
        pool = sorted(cert - {y})
        k = self.config.max_cond_size
        # Largest sets first: under an oracle any order is sound, but with finite samples a weak
        # confounding path is easily missed, and a larger certified set blocks more of them.
        candidates = sorted(_subsets(pool, k), key=len, reverse=True)
        if len(pool) > k:  # also try the whole certified set once
            candidates.insert(0, frozenset(pool))
        for z in candidates:
            for w in pool:
                if w not in z and not ci(w, y, z) and ci(w, y, z | {x}):
                    return ADJUST, z, w
        if y in cert:  # Y certified as a non-descendant of X: no causal effect
            return ZERO, None, None
        for z in candidates:
            if ci(x, y, z):
                return ZERO, z, None
            for w in pool:
                if w not in z and ci(w, y, z) and not ci(w, x, z):
                    return ZERO, z, w
        return NOT_IDENTIFIABLE, None, None

    def select(self, ci: CITest, x: int, y: int, covariates: Sequence[int]) -> CovselResult:
        """Run boundary -> certification -> rules; `ci` must expose `n_tests` for cost reporting."""
        covariates = [int(c) for c in covariates]
        if x == y:
            raise ValueError(f"Treatment and outcome must differ, both are {x}.")
        if x in covariates or y in covariates:
            raise ValueError("`covariates` must not contain the treatment `x` or the outcome `y`.")
        if len(set(covariates)) != len(covariates):
            raise ValueError("`covariates` contains duplicates.")
        start = getattr(ci, "n_tests", 0)
        b = self.boundary(ci, x, y, covariates)
        cert = self.certify(ci, x, y, b | {y} if self.config.certify_outcome else b)
        verdict, z, w = self.identify(ci, x, y, cert)
        n = getattr(ci, "n_tests", 0) - start
        logger.info("LCS verdict=%s set=%s witness=%s |B|=%d tests=%d", verdict, z, w, len(b), n)
        return CovselResult(verdict, z if verdict == ADJUST else None, w, frozenset(b), frozenset(cert), n)


# ---- estimation ------------------------------------------------------------------------------------
def _design(data: np.ndarray, x: int, z: Sequence[int], degree: int) -> np.ndarray:
    cols = [np.ones(len(data)), data[:, x]]
    zs = [data[:, c] for c in z]
    cols += zs
    if degree >= 2:
        cols += [a * b for a, b in itertools.combinations_with_replacement(zs, 2)]
    if degree >= 3:
        cols += [v**3 for v in zs]
    return np.column_stack(cols)


def estimate_ace(data: np.ndarray, x: int, y: int, z: Iterable[int], degree: int = 1) -> float:
    """Regression-adjustment ACE: coefficient of X in Y ~ 1 + X + poly(Z) (effect linear in X)."""
    data = np.asarray(data, dtype=float)
    z = sorted(int(c) for c in z)
    if data.ndim != 2 or len(data) < len(z) + 3:
        raise ValueError(f"`data` must be 2-D with more rows than covariates, got shape {data.shape}.")
    if not np.isfinite(data[:, [x, y, *z]]).all():
        raise ValueError("`data` has NaN/inf in the columns used; clean them before estimating.")
    if degree not in (1, 2, 3):
        raise ValueError(f"`degree` must be 1, 2 or 3, got {degree}.")
    design = _design(data, x, z, degree)
    coef, *_ = np.linalg.lstsq(design, data[:, y], rcond=None)
    return float(coef[1])
