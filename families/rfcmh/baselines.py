"""Baselines on the same hashing network: cross-entropy, label smoothing, cleanlab filtering, and a
pytorch-metric-learning loss. All share RFCMH's encoders, so only the supervision differs."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .config import RFCMHConfig
from .model import RFCMH, check_pair, epoch_batches


def train_supervised_hashing(
    config: RFCMHConfig,
    x1: torch.Tensor,
    x2: torch.Tensor,
    labels: torch.Tensor,
    label_smoothing: float = 0.0,
    metric_loss: str | None = None,
) -> RFCMH:
    """Train both encoders with softmax cross-entropy through the shared linear head P (logits P(z)).

    `label_smoothing` > 0 gives the label-smoothing baseline (torch's built-in). `metric_loss="ms"`
    replaces cross-entropy with pytorch-metric-learning's MultiSimilarityLoss on both views' codes.
    """
    check_pair(x1, x2, labels, num_classes=config.num_classes)
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"`label_smoothing` must lie in [0, 1), got {label_smoothing}.")
    loss_fn = None
    if metric_loss == "ms":
        from pytorch_metric_learning import losses

        loss_fn = losses.MultiSimilarityLoss()
    elif metric_loss is not None:
        raise ValueError(f"`metric_loss` must be None or 'ms', got {metric_loss!r}.")
    torch.manual_seed(config.seed)
    model = RFCMH(config, (x1.shape[1], x2.shape[1]))
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    gen = torch.Generator().manual_seed(config.seed)
    for _ in range(config.epochs):
        for idx in epoch_batches(len(x1), config.batch_size, gen):
            z1, z2, y = model.represent(x1[idx], 0), model.represent(x2[idx], 1), labels[idx]
            if loss_fn is not None:
                loss = loss_fn(torch.cat([z1, z2]), torch.cat([y, y]))
            else:
                # logits scaled by 1/tau because z is unit-norm (|P z| would otherwise be small)
                logits = model.possibility_layer(torch.cat([z1, z2])) / config.tau
                loss = F.cross_entropy(logits, torch.cat([y, y]), label_smoothing=label_smoothing)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.eval()


@torch.no_grad()
def softmax_label_confidence(
    model: RFCMH, x1: torch.Tensor, x2: torch.Tensor, labels: torch.Tensor
) -> torch.Tensor:
    """Self-confidence of a CE-trained model in the given label (mean of both views): a label-error score."""
    tau = model.config.tau
    probs = [
        torch.softmax(model.possibility_layer(model.represent(x, m)) / tau, dim=1)
        for m, x in ((0, x1), (1, x2))
    ]
    return 0.5 * sum(p.gather(1, labels[:, None]).squeeze(1) for p in probs)


def cleanlab_issues(
    x1: torch.Tensor, x2: torch.Tensor, labels: torch.Tensor, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """cleanlab on out-of-fold logistic-regression probabilities of the concatenated views.

    Returns (issue mask, label-quality score); the mask drives the filtering baseline and the score
    is cleanlab's own label-error detector for the AUROC comparison.
    """
    from cleanlab.filter import find_label_issues
    from cleanlab.rank import get_label_quality_scores
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_predict

    X = torch.cat([x1, x2], dim=1).numpy()
    y = labels.numpy()
    clf = LogisticRegression(max_iter=500, C=1.0, random_state=seed)
    pred_probs = cross_val_predict(clf, X, y, cv=5, method="predict_proba")
    issues = find_label_issues(y, pred_probs)
    return issues, get_label_quality_scores(y, pred_probs)
