"""The reference HMoE translator: a frozen SELU MLP base plus one LoRA adapter per node of a KMeans tree.

Algorithm of the reference implementation (DBgroup-Edinburgh/embedding-translation), written from its
description; no code was copied:
1. base: an MLP (SELU, `layer_num` hidden layers) fitted with an L1 loss on all anchor pairs, then frozen;
2. tree: MiniBatchKMeans leaves on the source anchors, parents built bottom-up by KMeans on the child
   centroids (K leaves, up to 2K - 1 nodes);
3. adapters: for every node, a rank-r LoRA update of every linear layer of the frozen base, fitted on the
   node's anchors with  L_reg + 0.5 L_local + 0.7 L_dir  (regression = 0.5 (1 - cos) + MSE; local =
   mismatch of distances to the m nearest source neighbours; direction = residual energy off the
   target's first (mixing, first hop) or second (second hop of a chain) principal direction, over the
   targets' total variance);
4. routing: from the root, descend to the nearest child while it is unambiguous (d1 <= tau d2); an
   ambiguous input stops at the current node and uses that node's adapter;
5. translation confidence: TC(x) = exp(-d_NN(x) / sigma), d_NN the distance to the nearest training
   source and sigma the mean pairwise distance of the training sources.

Shapes: N = vectors, Dx = source dim, Dy = target dim.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .config import LoRAHMoEConfig
from .model import check_pairs


class SeluMLP(nn.Module):
    """Dx -> hidden (x layer_num) -> Dy with SELU between linear layers and Xavier initialisation."""

    def __init__(self, dx: int, dy: int, hidden: int, layer_num: int) -> None:
        super().__init__()
        dims = [dx] + [hidden] * layer_num + [dy]
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        for lin in self.layers:
            nn.init.xavier_uniform_(lin.weight)
            nn.init.zeros_(lin.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, lin in enumerate(self.layers):
            x = lin(x)
            if i < len(self.layers) - 1:
                x = F.selu(x)
        return x


class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update: W x + b + (alpha / r) x A B."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float) -> None:
        super().__init__()
        self.base = base
        self.scale = alpha / rank
        self.A = nn.Parameter(torch.randn(base.in_features, rank) * 0.01)
        self.B = nn.Parameter(torch.zeros(rank, base.out_features))  # zero: the adapter starts at the base

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.scale * (x @ self.A @ self.B)


def with_lora(base: SeluMLP, rank: int, alpha: float) -> SeluMLP:
    """A copy of the frozen base whose every linear layer carries a fresh LoRA update."""
    m = copy.deepcopy(base)
    for p in m.parameters():
        p.requires_grad_(False)
    m.layers = nn.ModuleList(LoRALinear(lin, rank, alpha) for lin in m.layers)
    return m


def lora_parameters(m: nn.Module) -> list[nn.Parameter]:
    """The trainable adapter matrices of a `with_lora` model."""
    return [p for n, p in m.named_parameters() if n.endswith((".A", ".B"))]


@dataclass
class TreeNode:
    """One node of the routing tree: centroid in source space, children, and the anchor rows it covers."""

    centroid: np.ndarray
    level: int
    rows: np.ndarray
    children: list[int] = field(default_factory=list)


def build_tree(X: np.ndarray, cfg: LoRAHMoEConfig) -> tuple[list[TreeNode], int]:
    """MiniBatchKMeans leaves, then parents by KMeans on child centroids, bottom-up; returns (nodes, root)."""
    from sklearn.cluster import KMeans, MiniBatchKMeans

    k = min(cfg.num_leaves, len(X))
    mbk = MiniBatchKMeans(n_clusters=k, batch_size=1024, n_init=3, random_state=cfg.seed).fit(X)
    labels = mbk.labels_
    leaf = cfg.num_levels - 1
    nodes = [TreeNode(mbk.cluster_centers_[i], leaf, np.flatnonzero(labels == i)) for i in range(k)]
    current = list(range(k))
    for level in range(cfg.num_levels - 2, -1, -1):
        n_parents = max(1, len(current) // cfg.branch_factor)
        cents = np.stack([nodes[i].centroid for i in current])
        if n_parents == 1:
            assign, parent_cents = np.zeros(len(current), dtype=int), cents.mean(0, keepdims=True)
        else:
            km = KMeans(n_clusters=n_parents, n_init=10, random_state=cfg.seed).fit(cents)
            assign, parent_cents = km.labels_, km.cluster_centers_
        parents = []
        for p in range(n_parents):
            kids = [current[i] for i in np.flatnonzero(assign == p)]
            rows = np.concatenate([nodes[c].rows for c in kids]) if kids else np.zeros(0, dtype=int)
            nodes.append(TreeNode(parent_cents[p], level, rows, kids))
            parents.append(len(nodes) - 1)
        current = parents
    if len(current) != 1:  # num_levels == 1 or degenerate sizes: put one root above what is left
        rows = np.concatenate([nodes[c].rows for c in current])
        nodes.append(TreeNode(X.mean(0), -1, rows, current))
        current = [len(nodes) - 1]
    return nodes, current[0]


def principal_directions(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First two principal directions of the targets, sign fixed so the largest coordinate is positive."""
    _, _, vt = np.linalg.svd(Y - Y.mean(0), full_matrices=False)
    u = vt[:2] if len(vt) >= 2 else np.vstack([vt[0], vt[0]])
    signs = np.sign(u[np.arange(2), np.abs(u).argmax(1)])
    u = u * signs[:, None]
    return u[0].astype(np.float32), u[1].astype(np.float32)


def regression_loss(pred: torch.Tensor, y: torch.Tensor, cfg: LoRAHMoEConfig) -> torch.Tensor:
    """L_reg: cosine term plus MSE, as weighted in the reference adapter stage."""
    cos = 1 - F.cosine_similarity(pred, y, dim=1).mean()
    return cfg.cosine_weight * cos + cfg.mse_weight * F.mse_loss(pred, y)


def _pairwise(z: torch.Tensor) -> torch.Tensor:
    """Euclidean distance matrix with a gradient that stays finite on the diagonal."""
    sq = (z * z).sum(1)
    return (sq[:, None] + sq[None] - 2 * z @ z.T).clamp_min(1e-12).sqrt()


def local_loss(pred: torch.Tensor, y: torch.Tensor, x: torch.Tensor, m: int) -> torch.Tensor:
    """L_local: |  ||f(x_i) - f(x_j)|| - ||y_i - y_j||  | over each row's m nearest source neighbours."""
    n = len(x)
    if n < 2:
        return pred.new_zeros(())
    k = min(m, n - 1)
    with torch.no_grad():
        d = torch.cdist(x, x)
        d.fill_diagonal_(float("inf"))
        nn_idx = d.topk(k, dim=1, largest=False).indices  # (n, k)
    # all pairwise distances by one matrix product each, then the neighbours' entries: the same values as
    # norms of gathered differences at a fraction of the memory and time
    f_pair = _pairwise(pred).gather(1, nn_idx)
    y_pair = _pairwise(y).gather(1, nn_idx)
    return (f_pair - y_pair).abs().mean()


def direction_loss(pred: torch.Tensor, y: torch.Tensor, u: torch.Tensor, scale: float) -> torch.Tensor:
    """L_dir: residual energy orthogonal to the principal direction u, over the targets' total variance.

    The fixed scale (not each residual's own energy) keeps the loss from being lowered by growing the
    on-axis part of the residual.
    """
    e = pred - y
    return ((e.pow(2).sum(1) - (e @ u).pow(2)).clamp_min(0) / scale).mean()


def _batches(n: int, size: int, steps: int, gen: torch.Generator):  # noqa: ANN202 -- index generator
    for _ in range(steps):
        yield torch.randperm(n, generator=gen)[:size] if n > size else torch.arange(n)


class LoRAHMoE:
    """Fitted reference HMoE; call it on (N, Dx) source vectors to get (N, Dy) unit-norm translations.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(120, 6)); Y = np.tanh(X @ rng.normal(size=(6, 5)))
        >>> h = LoRAHMoE.fit(X, Y, LoRAHMoEConfig(hidden_dim=16, base_steps=20, lora_steps=5))
        >>> h(X).shape, len(h.adapters) > 0
        ((120, 5), True)
    """

    def __init__(self, base: SeluMLP, nodes: list[TreeNode], root: int, adapters: dict, cfg: LoRAHMoEConfig):
        self.base, self.nodes, self.root, self.adapters, self.cfg = base, nodes, root, adapters, cfg

    @classmethod
    def fit(cls, X: np.ndarray, Y: np.ndarray, cfg: LoRAHMoEConfig | None = None) -> LoRAHMoE:
        """Fit base (L1), build the tree, fit one adapter per node with enough anchors."""
        cfg = cfg or LoRAHMoEConfig()
        check_pairs(X, Y)
        gen = torch.Generator().manual_seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(Y, dtype=torch.float32)
        base = SeluMLP(X.shape[1], Y.shape[1], cfg.hidden_dim, cfg.layer_num)
        opt = torch.optim.Adam(base.parameters(), lr=cfg.base_lr)
        for idx in _batches(len(X), cfg.batch_size, cfg.base_steps, gen):
            opt.zero_grad()
            F.l1_loss(base(xt[idx]), yt[idx]).backward()
            opt.step()
        base.eval()
        for p in base.parameters():
            p.requires_grad_(False)
        nodes, root = build_tree(np.asarray(X, dtype=np.float64), cfg)
        u = torch.as_tensor(principal_directions(np.asarray(Y))[0 if cfg.dir_channel == "u1" else 1])
        yc = np.asarray(Y) - np.asarray(Y).mean(0)
        dir_scale = float((yc**2).sum(1).mean()) + 1e-8
        adapters = {}
        for i, node in enumerate(nodes):
            if len(node.rows) < cfg.min_node_samples:
                continue
            model = with_lora(base, cfg.lora_rank, cfg.lora_alpha)
            opt = torch.optim.Adam(lora_parameters(model), lr=cfg.lora_lr)
            xs, ys = xt[node.rows], yt[node.rows]
            for idx in _batches(len(xs), cfg.batch_size, cfg.lora_steps, gen):
                opt.zero_grad()
                pred = model(xs[idx])
                loss = regression_loss(pred, ys[idx], cfg)
                if cfg.local_weight > 0:
                    loss = loss + cfg.local_weight * local_loss(pred, ys[idx], xs[idx], cfg.local_nn_m)
                if cfg.dir_weight > 0:
                    loss = loss + cfg.dir_weight * direction_loss(pred, ys[idx], u, dir_scale)
                loss.backward()
                opt.step()
            model.eval()
            adapters[i] = model
        return cls(base, nodes, root, adapters, cfg)

    def route(self, X: np.ndarray) -> np.ndarray:
        """Node index per row: descend from the root while the nearest child is unambiguous."""
        out = np.empty(len(X), dtype=int)
        for r, x in enumerate(np.asarray(X, dtype=np.float64)):
            cur, used = self.root, self.root if self.root in self.adapters else -1
            while self.nodes[cur].children:
                kids = self.nodes[cur].children
                d = np.linalg.norm(np.stack([self.nodes[c].centroid for c in kids]) - x, axis=1)
                order = np.argsort(d)
                if len(kids) > 1 and d[order[0]] > self.cfg.tau * d[order[1]]:
                    break  # ambiguous between the two nearest children: stay at this node
                cur = kids[order[0]]
                if cur in self.adapters:
                    used = cur
            out[r] = used  # -1: no node on the path had enough anchors, use the base alone
        return out

    def __call__(self, X: np.ndarray) -> np.ndarray:
        """Translate rows of `X` (routing, then the chosen node's adapter) and normalise to the sphere."""
        check_pairs(np.asarray(X))
        nodes = self.route(X)
        xt = torch.as_tensor(X, dtype=torch.float32)
        out = torch.zeros(len(X), self.base.layers[-1].out_features)
        with torch.no_grad():
            for n in np.unique(nodes):
                mask = torch.as_tensor(nodes == n)
                out[mask] = (self.adapters[n] if n >= 0 else self.base)(xt[mask])
        return F.normalize(out, dim=1).numpy().astype(np.float64)

    def variant(self, tau: float | None = None, adapters: bool = True) -> LoRAHMoE:
        """The same fitted weights with another routing threshold, or the frozen base alone."""
        cfg = self.cfg if tau is None else replace(self.cfg, tau=tau)
        return LoRAHMoE(self.base, self.nodes, self.root, self.adapters if adapters else {}, cfg)

    def num_trainable(self) -> int:
        """Adapter weights over all nodes (the frozen base is counted by `num_base`)."""
        return sum(p.numel() for m in self.adapters.values() for p in lora_parameters(m))

    def num_base(self) -> int:
        """Weights of the frozen base MLP."""
        return sum(p.numel() for p in self.base.parameters())


@dataclass
class TranslationConfidence:
    """TC(x) = exp(-d_NN(x) / sigma): distance to the nearest training source over the mean pairwise distance.

    Example:
        >>> X = np.eye(3)
        >>> tc = TranslationConfidence.fit(X)
        >>> float(tc.score(X[:1])[0])
        1.0
    """

    X: np.ndarray
    sigma: float

    @classmethod
    def fit(cls, X: np.ndarray, pairs: int = 5000, seed: int = 0) -> TranslationConfidence:
        """Keep the training sources; sigma = mean distance over up to `pairs` random distinct pairs."""
        check_pairs(X)
        if len(X) < 2:
            raise ValueError("TranslationConfidence needs at least 2 training vectors to estimate sigma.")
        rng = np.random.default_rng(seed)
        i, j = rng.integers(0, len(X), pairs), rng.integers(0, len(X), pairs)
        keep = i != j
        sigma = float(np.linalg.norm(X[i[keep]] - X[j[keep]], axis=1).mean())
        return cls(np.asarray(X, dtype=np.float64), max(sigma, 1e-12))

    def delta(self, Q: np.ndarray) -> np.ndarray:
        """Distance of each row of Q to its nearest training source."""
        q = np.asarray(Q, dtype=np.float64)
        d2 = (q**2).sum(1)[:, None] - 2 * q @ self.X.T + (self.X**2).sum(1)[None]
        return np.sqrt(np.maximum(d2.min(1), 0.0))

    def score(self, Q: np.ndarray) -> np.ndarray:
        """Confidence in (0, 1]; 1 on a training source."""
        return np.exp(-self.delta(Q) / self.sigma)
