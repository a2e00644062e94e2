"""What conditional independences alone can identify: adjustment in a PAG (Perkovic et al. 2018).

A CI-only method sees the independence model, not the DAG, so the most it can ever return is a set
that is valid in *every* DAG with latents sharing that model. Perkovic, Textor, Kalisch & Maathuis
(JMLR 2018, "Complete graphical characterization and construction of adjustment sets") show this is
exactly the generalized adjustment criterion (GAC) in the PAG:

    (0) amenability: every proper possibly directed path X ~> Y starts with a visible edge X -> D;
    (1) Z has no node of Forb = PossDe(W) for W != X on a proper possibly directed path X ~> Y;
    (2) Z blocks every proper definite-status non-causal path from X to Y;

and that such a Z exists iff the canonical set PossAn({X, Y}) minus Forb works. The effect is zero in
every such DAG when Y is not a possible descendant of X. This is the completeness target (the oracle
of what is identifiable); the true DAG is a stricter one that no CI-only method can reach.

Marks follow causal-learn: `marks[a, b]` is the endpoint at `a` of the edge a *-* b (0 = no edge).
No selection bias is assumed, so tails only occur on directed edges.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

TAIL, ARROW, CIRCLE = -1, 1, 2
ADJUST, ZERO, NOT_IDENTIFIABLE = "adjust", "zero", "not_identifiable"


class PAG:
    """A partial ancestral graph with the path queries the adjustment criterion needs."""

    def __init__(self, marks: np.ndarray) -> None:
        marks = np.asarray(marks)
        if marks.ndim != 2 or marks.shape[0] != marks.shape[1]:
            raise ValueError(f"`marks` must be a square matrix, got shape {marks.shape}.")
        if ((marks != 0) != (marks.T != 0)).any():
            raise ValueError("`marks` must have an endpoint at both ends of every edge.")
        self.m = marks
        self.n = marks.shape[0]
        self._adj = [set(int(b) for b in np.nonzero(marks[a])[0]) for a in range(self.n)]

    def adj(self, a: int) -> set[int]:
        return self._adj[a]

    def _poss_step(self, a: int, b: int) -> bool:
        """a *-* b can be read a -> b: no arrowhead at a."""
        return self.m[a, b] != ARROW

    def directed(self, a: int, b: int) -> bool:
        """a -> b."""
        return self.m[a, b] == TAIL and self.m[b, a] == ARROW

    def poss_de(self, start: set[int]) -> set[int]:
        """Possible descendants of `start` (itself included)."""
        seen, stack = set(start), list(start)
        while stack:
            a = stack.pop()
            for b in self._adj[a]:
                if b not in seen and self._poss_step(a, b):
                    seen.add(b)
                    stack.append(b)
        return seen

    def poss_an(self, start: set[int]) -> set[int]:
        """Possible ancestors of `start` (itself included)."""
        seen, stack = set(start), list(start)
        while stack:
            a = stack.pop()
            for b in self._adj[a]:
                if b not in seen and self._poss_step(b, a):
                    seen.add(b)
                    stack.append(b)
        return seen

    def de(self, v: int) -> set[int]:
        """Definite descendants of v along directed edges (v included)."""
        seen, stack = {v}, [v]
        while stack:
            a = stack.pop()
            for b in self._adj[a]:
                if b not in seen and self.directed(a, b):
                    seen.add(b)
                    stack.append(b)
        return seen

    def paths(self, x: int, y: int) -> Iterator[list[int]]:
        """Every simple path from x to y in the skeleton (x appears only at the start: proper)."""
        stack = [(x, [x])]
        while stack:
            a, path = stack.pop()
            for b in self._adj[a]:
                if b == y:
                    yield [*path, y]
                elif b not in path:
                    stack.append((b, [*path, b]))

    def is_possibly_directed(self, path: list[int]) -> bool:
        return all(self._poss_step(a, b) for a, b in itertools.pairwise(path))

    def is_collider(self, a: int, v: int, b: int) -> bool:
        return self.m[v, a] == ARROW and self.m[v, b] == ARROW

    def is_definite_noncollider(self, a: int, v: int, b: int) -> bool:
        """A tail at v on either edge, or a o-o shape a *-o v o-* b with a, b not adjacent."""
        if self.m[v, a] == TAIL or self.m[v, b] == TAIL:
            return True
        return self.m[v, a] == CIRCLE and self.m[v, b] == CIRCLE and b not in self._adj[a]

    def visible(self, a: int, b: int) -> bool:
        """Zhang (2008): a -> b is visible iff some c not adjacent to b reaches a by an edge into a,
        or by a collider path into a whose inner nodes are all parents of b."""
        if not self.directed(a, b):
            return False
        # walk back from a: state (current, previous); every inner node must be a collider and a parent of b
        stack = [(u, a, {a, u}) for u in self._adj[a] if self.m[a, u] == ARROW]
        while stack:
            u, prev, seen = stack.pop()
            if u != b and b not in self._adj[u]:
                return True  # u *-> (collider path) -> a, u not adjacent to b
            if u == b or not self.directed(u, b):
                continue
            for w in self._adj[u]:
                if w not in seen and self.is_collider(w, u, prev):
                    stack.append((w, u, seen | {w}))
        return False


def _causal_nodes_and_first_edges(g: PAG, x: int, y: int) -> tuple[set[int], set[int]]:
    """Nodes (other than x) on proper possibly directed paths x ~> y, and their first nodes after x."""
    nodes, firsts = set(), set()
    for p in g.paths(x, y):
        if g.is_possibly_directed(p):
            nodes |= set(p[1:])
            firsts.add(p[1])
    return nodes, firsts


def forbidden(g: PAG, x: int, y: int) -> set[int]:
    """Forb(X, Y): X and the possible descendants of every node on a proper possibly directed path."""
    nodes, _ = _causal_nodes_and_first_edges(g, x, y)
    return g.poss_de(nodes) | {x} if nodes else {x}


def is_amenable(g: PAG, x: int, y: int) -> bool:
    """Every proper possibly directed path from x to y starts with a visible edge x -> d."""
    _, firsts = _causal_nodes_and_first_edges(g, x, y)
    return all(g.visible(x, d) for d in firsts)


def _blocked(g: PAG, path: list[int], z: set[int]) -> bool:
    for a, v, b in zip(path, path[1:], path[2:], strict=False):
        if g.is_collider(a, v, b):
            if not (g.de(v) & z):
                return True
        elif v in z:  # a definite non-collider (the path has definite status) in Z blocks it
            return True
    return False


def _noncausal_definite_paths(g: PAG, x: int, y: int) -> list[list[int]]:
    out = []
    for p in g.paths(x, y):
        if g.is_possibly_directed(p):
            continue
        inner = list(zip(p, p[1:], p[2:], strict=False))
        if all(g.is_collider(a, v, b) or g.is_definite_noncollider(a, v, b) for a, v, b in inner):
            out.append(p)
    return out


def is_pag_adjustment(g: PAG, x: int, y: int, z: set[int] | frozenset) -> bool:
    """The generalized adjustment criterion in a PAG: valid in every DAG the PAG represents."""
    z = set(z)
    if x in z or y in z or not is_amenable(g, x, y) or z & forbidden(g, x, y):
        return False
    return all(_blocked(g, p, z) for p in _noncausal_definite_paths(g, x, y))


def pag_verdict(g: PAG, x: int, y: int) -> tuple[str, frozenset | None]:
    """What CI information identifies: zero, the canonical adjustment set, or not identifiable."""
    if y not in g.poss_de({x}):
        return ZERO, None
    if not is_amenable(g, x, y):
        return NOT_IDENTIFIABLE, None
    canon = g.poss_an({x, y}) - forbidden(g, x, y) - {x, y}
    if is_pag_adjustment(g, x, y, canon):
        return ADJUST, frozenset(canon)
    return NOT_IDENTIFIABLE, None


def brute_force_pag_sets(g: PAG, x: int, y: int) -> list[frozenset]:
    """Every set satisfying the PAG criterion (exponential; small graphs and tests only)."""
    if not is_amenable(g, x, y):
        return []
    forb = forbidden(g, x, y)
    paths = _noncausal_definite_paths(g, x, y)
    rest = [v for v in range(g.n) if v not in forb and v != y]
    return [
        frozenset(s)
        for k in range(len(rest) + 1)
        for s in itertools.combinations(rest, k)
        if all(_blocked(g, p, set(s)) for p in paths)
    ]
