"""Conditional-independence (CI) tests used by local covariate selection.

Every test answers `ci(a, b, cond) -> True` when `a` is independent of `b` given `cond`, caches the
answer, and counts the distinct tests it ran (`n_tests`): the cost measure the paper compares.
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx
import numpy as np
from scipy import stats

Key = tuple[int, int, frozenset]


class _CachedCI:
    """Shared caching and counting; subclasses implement `_independent`."""

    def __init__(self) -> None:
        self._cache: dict[Key, bool] = {}

    @property
    def n_tests(self) -> int:
        """Number of distinct CI tests run so far."""
        return len(self._cache)

    def __call__(self, a: int, b: int, cond: Iterable[int] = ()) -> bool:
        cond = frozenset(int(c) for c in cond)
        a, b = int(a), int(b)
        if a == b or a in cond or b in cond:
            raise ValueError(
                f"CI test ({a} _||_ {b} | {sorted(cond)}) needs distinct variables outside `cond`."
            )
        key = (min(a, b), max(a, b), cond)
        if key not in self._cache:
            self._cache[key] = self._independent(a, b, cond)
        return self._cache[key]

    def _independent(self, a: int, b: int, cond: frozenset) -> bool:
        raise NotImplementedError


class DSeparationOracle(_CachedCI):
    """Perfect CI oracle: d-separation in a DAG whose `latent` nodes are never conditioned on.

    Example:
        >>> g = nx.DiGraph([(0, 1), (1, 2)])
        >>> DSeparationOracle(g)(0, 2, [1])
        True
    """

    def __init__(self, graph: nx.DiGraph, latent: Iterable[int] = ()) -> None:
        super().__init__()
        if not nx.is_directed_acyclic_graph(graph):
            raise ValueError("`graph` must be a directed acyclic graph (networkx.DiGraph without cycles).")
        self.graph = graph
        self.latent = frozenset(latent)

    def _independent(self, a: int, b: int, cond: frozenset) -> bool:
        if {a, b} & self.latent or cond & self.latent:
            raise ValueError(
                "The oracle only answers tests among observed variables; a latent was asked for."
            )
        return bool(nx.is_d_separator(self.graph, {a}, {b}, set(cond)))


class FisherZTest(_CachedCI):
    """Fisher-z partial-correlation test (exact for linear-Gaussian data, a proxy otherwise).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> a = rng.normal(size=500); b = a + rng.normal(size=500)
        >>> FisherZTest(np.c_[a, b])(0, 1)
        False
    """

    def __init__(self, data: np.ndarray, alpha: float = 0.01) -> None:
        super().__init__()
        data = np.asarray(data, dtype=float)
        if data.ndim != 2 or data.shape[0] < 10:
            raise ValueError(f"`data` must be a 2-D array with at least 10 rows, got shape {data.shape}.")
        if not np.isfinite(data).all():
            raise ValueError("`data` contains NaN or inf; drop or impute those rows first.")
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"`alpha` must lie in (0, 1), got {alpha}.")
        self.n = data.shape[0]
        self.alpha = alpha
        self.corr = np.corrcoef(data, rowvar=False)

    def _independent(self, a: int, b: int, cond: frozenset) -> bool:
        idx = [a, b, *sorted(cond)]
        sub = self.corr[np.ix_(idx, idx)]
        prec = np.linalg.pinv(sub)
        r = -prec[0, 1] / np.sqrt(prec[0, 0] * prec[1, 1])
        r = float(np.clip(r, -0.999999, 0.999999))
        z = 0.5 * np.log1p(2 * r / (1 - r)) * np.sqrt(self.n - len(cond) - 3)
        p = 2 * (1 - stats.norm.cdf(abs(z)))
        return bool(p > self.alpha)
