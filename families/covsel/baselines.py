"""Baselines: adjust-all, adjust-none, EHS rules, causal-learn FCI + PAG adjustment, DoWhy on the true graph.

causal-learn and dowhy are optional; they are imported inside the functions that use them.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Sequence

import networkx as nx
import numpy as np

from .config import CovselConfig
from .data import CausalInstance
from .model import ADJUST, NOT_IDENTIFIABLE, ZERO, CovselResult, LocalCovariateSelector
from .pag import PAG, pag_verdict

logger = logging.getLogger(__name__)

_TAIL, _ARROW, _CIRCLE = -1, 1, 2  # causal-learn PAG endpoint codes; graph[a, b] is the mark at a


def ehs_select(ci, x: int, y: int, covariates: Sequence[int], max_cond_size: int = 3) -> CovselResult:
    """Entner-Hoyer-Spirtes rules under the pretreatment assumption, on the same local boundary."""
    cfg = CovselConfig(max_cond_size=max_cond_size, assume_pretreatment=True)
    return LocalCovariateSelector(cfg).select(ci, x, y, covariates)


def _oracle_cit_class(graph: nx.DiGraph, observed: Sequence[int]):
    """A causal-learn CIT class answering with d-separation among observed columns (p = 1 or 0)."""
    from causallearn.utils.cit import NO_SPECIFIED_PARAMETERS_MSG, CIT_Base

    obs = list(observed)

    class _Oracle(CIT_Base):
        def __init__(self, data, **kwargs):
            super().__init__(data, **kwargs)
            self.check_cache_method_consistent("covsel_dsep", NO_SPECIFIED_PARAMETERS_MSG)

        def __call__(self, a, b, condition_set=None):
            xs, ys, cond, key = self.get_formatted_XYZ_and_cachekey(a, b, condition_set)
            if key not in self.pvalue_cache:
                sep = nx.is_d_separator(graph, {obs[xs[0]]}, {obs[ys[0]]}, {obs[c] for c in cond})
                self.pvalue_cache[key] = float(sep)
            return self.pvalue_cache[key]

    return _Oracle


def run_fci(
    data: np.ndarray | None, inst: CausalInstance | None = None, alpha: float = 0.01
) -> tuple[np.ndarray, int]:
    """causal-learn FCI on the observed columns; oracle mode when `data` is None. Returns (PAG marks, #tests)."""
    from causallearn.search.ConstraintBased.FCI import fci
    from causallearn.utils.cit import register_ci_test

    if data is None:
        if inst is None:
            raise ValueError("Oracle FCI needs `inst` (the true graph) when `data` is None.")
        obs = inst.observed
        register_ci_test("covsel_dsep", _oracle_cit_class(inst.graph, obs))
        placeholder = np.zeros((2, len(obs)))
        method, kwargs = "covsel_dsep", {}
    else:
        placeholder, method, kwargs = data, "fisherz", {}
    import causallearn.search.ConstraintBased.FCI as fci_mod

    counter: dict[str, object] = {}
    original = fci_mod.CIT

    def _tracking_cit(*args, **kw):  # keep a handle on the CIT object to count its cached tests
        obj = original(*args, **kw)
        counter["cit"] = obj
        return obj

    fci_mod.CIT = _tracking_cit
    try:  # causal-learn prints every orientation to stdout and warns on tiny placeholders
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g, _ = fci(placeholder, method, alpha, verbose=False, show_progress=False, **kwargs)
    finally:
        fci_mod.CIT = original
    n_tests = len(counter["cit"].pvalue_cache) - 1 if "cit" in counter else -1  # minus the data-hash key
    return np.asarray(g.graph), n_tests


def _poss_reach(marks: np.ndarray, start: set[int], forward: bool, avoid: set[int] = frozenset()) -> set[int]:
    """Nodes reachable from `start` along possibly directed edges (forward) or backwards."""
    seen, stack = set(start), list(start)
    while stack:
        a = stack.pop()
        for b in np.nonzero(marks[a])[0]:
            b = int(b)
            if b in seen or b in avoid:
                continue
            # a *-* b is possibly directed a -> b iff the mark at a is not an arrowhead
            ok = marks[a, b] != _ARROW if forward else marks[b, a] != _ARROW
            if ok:
                seen.add(b)
                stack.append(b)
    return seen


def pag_adjustment(marks: np.ndarray, x: int, y: int) -> tuple[str, frozenset | None]:
    """Verdict from a PAG: zero if Y is not a possible descendant of X; otherwise the canonical set.

    Simplifications (documented in the README): visibility uses only Zhang's first condition (a
    node U *-> X not adjacent to V), and the blocking of definite-status non-causal paths is not
    checked, so this baseline can be unsound; the demo measures how often.
    """
    if y not in _poss_reach(marks, {x}, forward=True):
        return ZERO, None
    adj = lambda a: {int(b) for b in np.nonzero(marks[a])[0]}  # noqa: E731
    for v in adj(x):
        if marks[x, v] == _ARROW or y not in _poss_reach(marks, {v}, True, avoid={x}):
            continue  # not the first edge of a proper possibly causal path
        directed = marks[x, v] == _TAIL and marks[v, x] == _ARROW
        visible = any(marks[x, u] == _ARROW and u not in adj(v) for u in adj(x) - {v})
        if not (directed and visible):
            return NOT_IDENTIFIABLE, None
    cn = (_poss_reach(marks, {x}, True) - {x}) & _poss_reach(marks, {y}, False, avoid={x})
    forb = _poss_reach(marks, cn, True) | {x}
    anc = _poss_reach(marks, {x, y}, forward=False)
    return ADJUST, frozenset(anc - forb - {x, y})


def fci_select(
    data: np.ndarray | None, inst: CausalInstance, alpha: float = 0.01, exact: bool = False
) -> CovselResult:
    """Global baseline: FCI over all observed variables, then PAG adjustment. Indices are the instance's.

    `exact=True` reads the PAG with the complete generalized adjustment criterion (`pag.pag_verdict`);
    the default is the simplified reading above.
    """
    obs = inst.observed
    if data is not None and data.shape[1] != len(obs):
        raise ValueError(f"`data` must hold the {len(obs)} observed columns (in order), got {data.shape[1]}.")
    marks, n_tests = run_fci(data, inst if data is None else None, alpha)
    pos = {v: i for i, v in enumerate(obs)}  # FCI column of each observed instance node
    if exact:
        verdict, z = pag_verdict(PAG(marks), pos[inst.x], pos[inst.y])
    else:
        verdict, z = pag_adjustment(marks, pos[inst.x], pos[inst.y])
    z_orig = frozenset(obs[i] for i in z) if z is not None else None
    return CovselResult(verdict, z_orig, n_tests=n_tests)


def dowhy_true_graph_ace(data: np.ndarray, inst: CausalInstance) -> float | None:
    """DoWhy back-door identification on the TRUE graph (latents unobserved), linear-regression estimate."""
    import pandas as pd
    from dowhy import CausalModel

    names = [f"v{i}" for i in range(data.shape[1])]
    df = pd.DataFrame(data[:, inst.observed], columns=[names[i] for i in inst.observed])
    g = nx.relabel_nodes(inst.graph, {i: names[i] for i in inst.graph.nodes})
    model = CausalModel(data=df, treatment=names[inst.x], outcome=names[inst.y], graph=g)
    estimand = model.identify_effect(proceed_when_unidentifiable=False)
    if not estimand.get_backdoor_variables():
        if estimand.estimands.get("backdoor") is None:
            return None
    est = model.estimate_effect(estimand, method_name="backdoor.linear_regression")
    return float(est.value)
