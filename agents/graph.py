"""Agents and the graphs that connect them.

An edge `u -> v` carries a hand-off mode:
- `kv`: v reads everything u had in memory plus what u wrote (prompt and latent positions);
- `latent`: v reads only the latent thoughts among those positions (prompts hidden);
- `text`: u decodes text and v reads it in its prompt (text-based MAS).
Exactly one agent has no outgoing edge: the final agent, the only one that decodes the answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

HANDOFF_MODES = ("kv", "latent", "text")
PRESETS = ("sequential", "hierarchical")  # names `Graph.resolve` knows
# Each agent is a full model pass per question; the paper's graphs have 4. A file with thousands of
# agents is a mistake, refused at once instead of sitting silent through a huge run.
MAX_AGENTS = 64
MAX_EDGES = MAX_AGENTS * (MAX_AGENTS - 1) // 2  # every edge of a DAG on MAX_AGENTS agents


@dataclass
class Agent:
    """One agent: a name, a role (selects the system prompt) and, for mixed-model graphs, a model key."""

    name: str
    role: str
    model: str | None = None  # key into the `models` dict given to `agents.run`; None = "default"


@dataclass
class Edge:
    """A hand-off `src -> dst`; `bridge` names the trained `latent.bridge.Bridge` a `latent` edge between
    two different models reads the sender's thoughts through."""

    src: str
    dst: str
    mode: str = "kv"
    bridge: str | None = None


@dataclass
class Graph:
    """A DAG of agents. Validated on construction: names unique, modes known, acyclic, one final agent.

    Example:
        >>> g = Graph.sequential()                  # planner -> critic -> refiner -> judger, kv edges
        >>> g.order()
        ['planner', 'critic', 'refiner', 'judger']
    """

    agents: list[Agent]
    edges: list[Edge] = field(default_factory=list)
    name: str = "custom"

    def __post_init__(self) -> None:
        if len(self.agents) > MAX_AGENTS or len(self.edges) > MAX_EDGES:
            raise ValueError(
                f"invalid agent graph: {len(self.agents)} agents and {len(self.edges)} edges; a graph has at "
                f"most {MAX_AGENTS} agents and {MAX_EDGES} edges (each agent is a full model pass per "
                "question). Use fewer agents."
            )
        problems = []
        names = [a.name for a in self.agents]
        if not names:
            problems.append("the graph has no agents")
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            problems.append(f"duplicate agent names {dup}")
        for e in self.edges:
            if e.mode not in HANDOFF_MODES:
                problems.append(
                    f"edge {e.src}->{e.dst} has unknown hand-off mode {e.mode!r} (use one of {HANDOFF_MODES})"
                )
            for end in (e.src, e.dst):
                if end not in names:
                    problems.append(f"edge {e.src}->{e.dst} names unknown agent {end!r}")
            if e.src == e.dst:
                problems.append(f"edge {e.src}->{e.dst} is a self-loop")
            if e.bridge is not None and (e.mode != "latent" or not isinstance(e.bridge, str) or not e.bridge):
                problems.append(
                    f"edge {e.src}->{e.dst} names bridge {e.bridge!r} on a {e.mode!r} edge: a bridge carries "
                    "latent thoughts between two models, so it goes on a `latent` edge and names a bridge "
                    "(kv caches never cross models)"
                )
        if not problems:
            stuck = self._cycle_agents()
            if stuck:
                problems.append(
                    f"agents {stuck} form a cycle (or sit behind one); agent graphs must be acyclic (a DAG)"
                )
            finals = [n for n in names if not any(e.src == n for e in self.edges)]
            if len(finals) != 1:
                problems.append(
                    f"a graph needs exactly one final decoding agent (no outgoing edge); found {len(finals)}: {finals}"
                )
        if problems:
            raise ValueError("invalid agent graph: " + "; ".join(problems) + ".")

    # ------------------------------------------------------------------ structure
    def _cycle_agents(self) -> list[str]:
        """Agents a topological sort never reaches (on or after a cycle); [] for a DAG."""
        done = self._topological()
        return [a.name for a in self.agents if a.name not in done]

    def order(self) -> list[str]:
        """Agents in a topological order (stable: ties keep declaration order)."""
        out = self._topological()
        if len(out) != len(self.agents):
            raise ValueError(f"agents {self._cycle_agents()} form a cycle; agent graphs must be acyclic.")
        return out

    def _topological(self) -> list[str]:
        names = [a.name for a in self.agents]
        indeg = {n: 0 for n in names}
        for e in self.edges:
            indeg[e.dst] += 1
        out, ready = [], [n for n in names if indeg[n] == 0]
        while ready:
            n = ready.pop(0)
            out.append(n)
            for e in self.edges:
                if e.src == n:
                    indeg[e.dst] -= 1
                    if indeg[e.dst] == 0:
                        ready.append(e.dst)
            ready.sort(key=names.index)
        return out

    @property
    def final(self) -> str:
        return next(a.name for a in self.agents if not any(e.src == a.name for e in self.edges))

    def agent(self, name: str) -> Agent:
        return next(a for a in self.agents if a.name == name)

    def incoming(self, name: str) -> list[Edge]:
        return [e for e in self.edges if e.dst == name]

    # ------------------------------------------------------------------ presets and files
    @classmethod
    def sequential(cls, mode: str = "kv") -> Graph:
        """planner -> critic -> refiner -> judger (the LatentMAS paper's sequential MAS)."""
        roles = ["planner", "critic", "refiner", "judger"]
        edges = [Edge(a, b, mode) for a, b in zip(roles, roles[1:])]
        return cls([Agent(r, r) for r in roles], edges, name="sequential")

    @classmethod
    def hierarchical(cls, mode: str = "kv") -> Graph:
        """math, science and code experts run independently and fan in to a summarizer.

        `kv` edges hand the summarizer each expert's whole memory (prompt and thoughts), as the LatentMAS
        paper hands on its working memory. `latent` edges hand on the thoughts alone, after the summarizer's
        own prompt with the question (`examples/graphs/hierarchical_latent.yaml`; measured in BENCHMARKS.md)."""
        experts = ["math_expert", "science_expert", "code_expert"]
        agents = [Agent(r, r) for r in experts] + [Agent("summarizer", "summarizer")]
        name = "hierarchical" if mode == "kv" else f"hierarchical-{mode}"
        return cls(agents, [Edge(x, "summarizer", mode) for x in experts], name=name)

    def edge_list(self) -> list[str]:
        """Every edge as 'src->dst:mode', in order: what a run's manifest records of the graph it ran."""
        return [f"{e.src}->{e.dst}:{e.mode}" + (f"@{e.bridge}" if e.bridge else "") for e in self.edges]

    @classmethod
    def from_dict(cls, spec: dict) -> Graph:
        """{"name": ..., "agents": [{"name", "role", "model"?}], "edges": [{"src", "dst", "mode"?, "bridge"?}]}"""
        if not isinstance(spec, dict) or "agents" not in spec:
            raise ValueError("a graph spec must be a mapping with an `agents` list (and optional `edges`).")
        try:
            agents = [Agent(**a) for a in spec["agents"]]
            edges = [Edge(**e) for e in spec.get("edges", [])]
        except TypeError as err:
            raise ValueError(
                f"bad agent or edge entry in graph spec ({err}); agents take name, role, model and "
                "edges take src, dst, mode, bridge."
            ) from err
        return cls(agents, edges, name=spec.get("name", "custom"))

    @classmethod
    def from_file(cls, path: str | Path) -> Graph:
        """Load a graph from YAML or JSON."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no graph file at {str(path)!r}.")
        from latent.args import MAX_YAML_CHARS, load_yaml

        with open(path, "rb") as fh:  # a graph is a few lines: never read more than the limit allows
            raw = fh.read(4 * MAX_YAML_CHARS + 1)
        if len(raw) > 4 * MAX_YAML_CHARS:
            raise ValueError(
                f"graph file {path} is too large to read (at most {MAX_YAML_CHARS:,} characters). Fix the file."
            )
        text = raw.decode("utf-8", "replace")
        try:
            if path.suffix in (".yaml", ".yml"):
                spec = load_yaml(text, f"graph file {path}")
            else:
                spec = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"graph file {path} is not valid JSON: {err}. Fix the file.") from None
        except (
            ValueError
        ) as err:  # aliases that expand too far (the message names the file); JSON's digit limit
            msg = str(err)
            raise ValueError(
                msg + "." if str(path) in msg else f"graph file {path}: {msg}. Fix the file."
            ) from None
        except RecursionError:  # nesting past the parser's depth, JSON or YAML
            raise ValueError(f"graph file {path} is nested too deeply to read. Fix the file.") from None
        except Exception as err:  # yaml.YAMLError
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise ValueError(f"graph file {path} is not valid YAML ({first}). Fix the file.") from None
        return cls.from_dict(spec)

    @classmethod
    def resolve(cls, graph: str | Graph) -> Graph:
        """A preset name (`PRESETS`), a file path, or a Graph."""
        if isinstance(graph, Graph):
            return graph
        if graph == "sequential":
            return cls.sequential()
        if graph == "hierarchical":
            return cls.hierarchical()
        if not Path(graph).is_file():
            raise FileNotFoundError(
                f"no graph {graph!r}: use {', '.join(repr(p) for p in PRESETS)} or the path of a YAML/JSON "
                "graph file."
            )
        return cls.from_file(graph)
