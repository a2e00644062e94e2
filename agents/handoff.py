"""Graphs and checks for hand-off tasks, where the information is split across agents.

Each of n upstream `holder` agents reads the question and its own share; the final `answerer` reads
the question and only what the holders hand on (`agents.run(..., shares=...)`). The holders fan in to
the answerer, so share i goes to holder i (graph order) and nothing else reads it.
"""

from __future__ import annotations

from agents.graph import Agent, Edge, Graph

HOLDER_ROLE = "holder"
ANSWERER_ROLE = "answerer"
PROMPT_SET = "handoff"  # agents/prompts/handoff.yaml has the two roles


def handoff_graph(
    n_shares: int, mode: str = "kv", holder_model: str | None = None, bridge: str | None = None
) -> Graph:
    """holder_0 .. holder_{n-1} -> answerer, every edge of hand-off `mode` (kv, latent or text).
    `holder_model`: the holders run that model key (the answerer runs "default"); `bridge`: the bridge
    their `latent` edges read through (a hand-off across two models)."""
    if not isinstance(n_shares, int) or n_shares < 1:
        raise ValueError(f"a hand-off graph needs at least one share, got {n_shares!r}.")
    holders = [Agent(f"holder_{i}", HOLDER_ROLE, holder_model) for i in range(n_shares)]
    edges = [Edge(h.name, "answerer", mode, bridge if mode == "latent" else None) for h in holders]
    name = f"handoff{n_shares}-{mode}" + (f"-from-{holder_model}" if holder_model else "")
    return Graph([*holders, Agent("answerer", ANSWERER_ROLE)], edges, name=name)


def upstream_agents(graph: Graph) -> list[str]:
    """The agents that can hold a share: every agent but the final one, in graph order."""
    return [n for n in graph.order() if n != graph.final]


def route_shares(graph: Graph, shares: list[list[str]] | None, n_rows: int) -> dict[str, list[str | None]]:
    """Agent name -> its share per row. `shares[r][i]` goes to the i-th upstream agent (graph order) of
    row r; the final agent gets none. A row must give exactly one share per upstream agent."""
    if shares is None:
        return {}
    if not isinstance(shares, list) or len(shares) != n_rows:
        got = len(shares) if isinstance(shares, list) else type(shares).__name__
        raise ValueError(f"`shares` needs one list of shares per question ({n_rows}), got {got}.")
    ups = upstream_agents(graph)
    for r, row in enumerate(shares):
        if not isinstance(row, list) or not all(isinstance(s, str) for s in row):
            raise ValueError(f"`shares[{r}]` must be a list of str (one per upstream agent).")
        if len(row) != len(ups):
            raise ValueError(
                f"`shares[{r}]` has {len(row)} shares but graph {graph.name!r} has {len(ups)} upstream agents "
                f"({ups}); build the graph with agents.handoff_graph({len(row)})."
            )
    return {name: [row[i] for row in shares] for i, name in enumerate(ups)}
