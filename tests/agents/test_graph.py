"""Graph validation, presets and files: bad graphs fail before any model runs."""

import json
from pathlib import Path

import pytest

from agents import Agent, Edge, Graph
from agents.latentmas import resolve_models


def test_presets_have_the_paper_topologies():
    """Sequential is a chain into the judger; hierarchical fans three experts into a summarizer."""
    seq, hier = Graph.sequential(), Graph.hierarchical()
    assert seq.order() == ["planner", "critic", "refiner", "judger"] and seq.final == "judger"
    assert hier.final == "summarizer"
    assert sorted(e.src for e in hier.incoming("summarizer")) == [
        "code_expert",
        "math_expert",
        "science_expert",
    ]
    assert all(not hier.incoming(x) for x in ("math_expert", "science_expert", "code_expert"))


def test_hierarchical_edge_modes_are_named_and_recorded():
    """`hierarchical` hands on the experts' whole memories; `Graph.hierarchical("latent")` and the example
    file hand on their thoughts alone; the name says which, and the edge list records it."""
    kv, lat = Graph.resolve("hierarchical"), Graph.hierarchical("latent")
    example = Graph.from_file(Path(__file__).parents[2] / "examples" / "graphs" / "hierarchical_latent.yaml")
    assert (kv.name, lat.name, example.name) == ("hierarchical", "hierarchical-latent", "hierarchical-latent")
    assert example.edge_list() == lat.edge_list() and [a.name for a in lat.agents] == [
        a.name for a in kv.agents
    ]
    assert {e.mode for e in lat.edges} == {"latent"} and kv.edge_list()[0] == "math_expert->summarizer:kv"
    assert Graph.sequential().edge_list() == [
        "planner->critic:kv",
        "critic->refiner:kv",
        "refiner->judger:kv",
    ]


def test_cycle_no_final_unknown_mode_are_errors():
    """A cycle, two final agents, and an unknown hand-off mode each raise a ValueError naming it."""
    a, b, c = Agent("a", "planner"), Agent("b", "critic"), Agent("c", "judger")
    with pytest.raises(ValueError, match="cycle"):
        Graph([a, b, c], [Edge("a", "b"), Edge("b", "a"), Edge("b", "c")])
    with pytest.raises(ValueError, match="exactly one final"):
        Graph([a, b, c], [Edge("a", "c")])
    with pytest.raises(ValueError, match="unknown hand-off mode"):
        Graph([a, c], [Edge("a", "c", "telepathy")])
    with pytest.raises(ValueError, match="unknown agent"):
        Graph([a, c], [Edge("a", "zed")])


def test_custom_graph_from_yaml_and_json(tmp_path):
    """Any DAG loads from YAML or JSON, and the order respects every edge."""
    spec = {
        "name": "diamond",
        "agents": [
            {"name": n, "role": r}
            for n, r in [("p", "planner"), ("m", "math_expert"), ("s", "science_expert"), ("j", "judger")]
        ],
        "edges": [
            {"src": "p", "dst": "m"},
            {"src": "p", "dst": "s", "mode": "latent"},
            {"src": "m", "dst": "j"},
            {"src": "s", "dst": "j", "mode": "text"},
        ],
    }
    (tmp_path / "g.json").write_text(json.dumps(spec))
    import yaml

    (tmp_path / "g.yaml").write_text(yaml.safe_dump(spec))
    for f in ("g.json", "g.yaml"):
        g = Graph.from_file(tmp_path / f)
        order = g.order()
        assert all(order.index(e.src) < order.index(e.dst) for e in g.edges) and g.final == "j"


def test_mismatched_models_on_kv_edge_fail_before_running(tiny_models):
    """A kv edge between models of different hidden size or tokenizer is rejected up front."""
    g = Graph(
        [Agent("p", "planner", model="small"), Agent("j", "judger", model="big")], [Edge("p", "j", "kv")]
    )
    with pytest.raises(ValueError, match="cannot share latent memory"):
        resolve_models(g, {"small": tiny_models["llama"], "big": tiny_models["gpt2"]})
    text = Graph(
        [Agent("p", "planner", model="small"), Agent("j", "judger", model="big")], [Edge("p", "j", "text")]
    )
    assert (
        resolve_models(text, {"small": tiny_models["llama"], "big": tiny_models["gpt2"]})["j"]
        is tiny_models["gpt2"]
    )
    with pytest.raises(ValueError, match="not in `model`"):
        resolve_models(g, {"small": tiny_models["llama"]})


def test_a_graph_of_thousands_of_agents_is_refused_at_once():
    """2,000 agents: one error naming the count and the limit, in well under a second."""
    import time

    from agents.graph import MAX_AGENTS, Agent, Edge, Graph

    agents = [Agent(f"a{i}", "planner") for i in range(1999)] + [Agent("a1999", "judger")]
    edges = [Edge(f"a{i}", f"a{i + 1}") for i in range(1999)]
    start = time.perf_counter()
    with pytest.raises(ValueError, match=f"at most {MAX_AGENTS} agents"):
        Graph(agents, edges)
    assert time.perf_counter() - start < 0.5
