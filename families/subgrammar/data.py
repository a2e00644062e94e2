"""Grammars of the demo and tests (paper-style: a top level over three delimited subgrammars)."""

from __future__ import annotations

from .grammar import PCFG

_DIGITS = [(("0",), 0.2), (("1",), 0.2), (("2",), 0.2), (("3",), 0.2), (("4",), 0.1), (("5",), 0.1)]


def three_subgrammar_pcfg() -> PCFG:
    """Top level L0 -> S L0 | S over A (prefix arithmetic), B (a^n c b^n), C (x+).

    Follows the paper's KL-decomposition example (arithmetic, a^n c b^n, x+), with two changes: the
    arithmetic is in prefix notation so that every string has one parse (exact log p from the sampler),
    and the top level may repeat (0.3) so the coefficients c_i (expected invocations) differ from pi_i.
    """
    return PCFG(
        {
            "L0": [(("S", "L0"), 0.3), (("S",), 0.7)],
            "S": [(("sA", "A", "eA"), 0.3), (("sB", "B", "eB"), 0.3), (("sC", "C", "eC"), 0.4)],
            "A": [(("N",), 0.6), (("+", "A", "A"), 0.2), (("*", "A", "A"), 0.2)],
            "N": _DIGITS,
            "B": [(("a", "B", "b"), 0.6), (("c",), 0.4)],
            "C": [(("x", "C"), 0.8), (("x",), 0.2)],
        },
        start="L0",
        sub_roots=("A", "B", "C"),
    )


def finite_pcfg() -> PCFG:
    """A small non-recursive grammar whose whole language can be enumerated (for exact identities)."""
    return PCFG(
        {
            "L0": [(("S", "S"), 0.4), (("S",), 0.6)],
            "S": [(("sA", "A", "eA"), 0.5), (("sB", "B", "eB"), 0.5)],
            "A": [(("N",), 0.7), (("+", "N", "N"), 0.3)],
            "N": [(("1",), 0.5), (("2",), 0.5)],
            "B": [(("a", "c", "b"), 0.4), (("c",), 0.6)],
        },
        start="L0",
        sub_roots=("A", "B"),
    )
