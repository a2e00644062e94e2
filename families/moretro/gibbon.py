"""Weight selection by a Gaussian process and GIBBON (botorch), as in the MORetro* paper.

Every weight vector that drove expansions is an observation: input = the weight on the simplex, output =
the hypervolume improvement its expansions brought to the target's front. A `SingleTaskGP` is fitted
on all observations so far, and the next batch of weights is chosen from Dirichlet candidates by
GIBBON (botorch's `qLowerBoundMaxValueEntropy`, a max-value entropy search whose batch term keeps the
chosen weights diverse), with greedy sequential selection over the discrete candidate set.

botorch is imported on first use, so the rest of the family works without it.
"""

from __future__ import annotations

import logging
import warnings

import numpy as np

from .data import hypervolume

logger = logging.getLogger(__name__)


def hv_improvement(before: list, after: list) -> float:
    """HV(after) - HV(before), both with one reference point just beyond the union's nadir."""
    pts = list(before) + list(after)
    if not pts:
        return 0.0
    ref = np.asarray(pts, dtype=float).max(axis=0) * 1.1 + 0.1
    return hypervolume(list(after), ref) - hypervolume(list(before), ref)


class GibbonWeightSelector:
    """Collects (weight, HV improvement) pairs and proposes new weights with a GP + GIBBON.

    Example:
        >>> sel = GibbonWeightSelector(n_objectives=2, seed=0)
        >>> for w, y in [((1, 0), 0.0), ((0, 1), 0.5), ((0.5, 0.5), 0.2)]:
        ...     sel.observe(np.array(w, float), y)
        >>> [round(float(v.sum()), 6) for v in sel.propose(2)]
        [1.0, 1.0]
    """

    def __init__(self, n_objectives: int, seed: int = 0, n_candidates: int = 256) -> None:
        self.m, self.n_candidates = n_objectives, n_candidates
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.X: list[np.ndarray] = []
        self.y: list[float] = []
        self.n_gp_fits = 0  # how many proposals came from the GP (the rest: too little signal yet)

    def observe(self, weight: np.ndarray, improvement: float) -> None:
        """Record the hypervolume improvement credited to `weight`."""
        self.X.append(np.asarray(weight, dtype=float))
        self.y.append(float(improvement))

    def propose(self, q: int) -> list[np.ndarray]:
        """q new weights on the simplex: GIBBON's choice when the observations vary, else random draws."""
        cands = self.rng.dirichlet(np.ones(self.m), size=self.n_candidates)
        y = np.asarray(self.y)
        if len(y) < 2 or np.ptp(y) <= 1e-12:  # a GP on constant outputs carries no information
            return list(cands[:q])
        import torch
        from botorch.acquisition.max_value_entropy_search import qLowerBoundMaxValueEntropy
        from botorch.fit import fit_gpytorch_mll
        from botorch.models import SingleTaskGP
        from botorch.optim import optimize_acqf_discrete
        from gpytorch.mlls import ExactMarginalLogLikelihood

        torch.manual_seed(self.seed + len(y))
        X = torch.as_tensor(np.stack(self.X), dtype=torch.double)
        Y = torch.as_tensor(y, dtype=torch.double).unsqueeze(-1)
        model = SingleTaskGP(X, Y)  # botorch standardises Y by default
        with warnings.catch_warnings():  # tiny data sets trigger botorch's conditioning warnings
            warnings.simplefilter("ignore")
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
            choices = torch.as_tensor(cands, dtype=torch.double)
            acq = qLowerBoundMaxValueEntropy(model, candidate_set=choices)
            picked, _ = optimize_acqf_discrete(acq, q=q, choices=choices)
        self.n_gp_fits += 1
        return [row for row in picked.numpy()]
