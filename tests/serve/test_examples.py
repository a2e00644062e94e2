"""The framework examples run against a live server (each skipped when its library is not installed)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from tests.serve.conftest import alone

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(path: Path, base_url: str, monkeypatch) -> dict:
    monkeypatch.setenv("LATENTWORKS_BASE_URL", f"{base_url}/v1")
    return runpy.run_path(str(path), run_name="__main__")


def test_langgraph_node_answers_like_agents_run(base_url, model, monkeypatch, capsys):
    """examples/serve_langgraph.py: the node's answer is the served pipeline's, with per-agent accounting."""
    pytest.importorskip("langgraph", reason="needs langgraph (the [serve-examples] extra)")
    ns = _run(EXAMPLES / "serve_langgraph.py", base_url, monkeypatch)
    question = "Mia has 12 pencils. She buys 7 more and gives 5 away. How many now?"
    out = ns["build"]().invoke({"question": question})
    expected = alone(model, "latent_mas:sequential", question)
    assert out["answer"] == expected.text and [a["name"] for a in out["agents"]] == [
        a.name for a in expected.agents
    ]
    assert "final:" in capsys.readouterr().out


def test_smolagents_model_answers_like_agents_run(base_url, model, monkeypatch, capsys):
    """examples/serve_smolagents.py: OpenAIServerModel gets the pipeline's text, and stop sequences cut it."""
    pytest.importorskip("smolagents", reason="needs smolagents (the [serve-examples] extra)")
    ns = _run(EXAMPLES / "serve_smolagents.py", base_url, monkeypatch)
    question = "What is 14 minus 6?"
    expected = alone(model, "latent_mas:sequential", question).text
    assert ns["ask"](ns["make_model"](), question) == expected
    assert ns["ask"](ns["make_model"](), question, stop=["\\boxed"]) == expected.split("\\boxed")[0]
    assert "up to the box:" in capsys.readouterr().out
