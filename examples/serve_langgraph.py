"""A LangGraph graph whose `solve` node asks a served LatentMAS pipeline, through the OpenAI client.

    latentworks serve --model builtin:arith-mini          # in one shell
    python examples/serve_langgraph.py                    # in another

The node maps `{"question"}` to `{"answer", "agents"}`: plain strings and numbers, so any LangGraph
checkpointer can store the state (no tensors in it). Needs `pip install langgraph openai`.
Set LATENTWORKS_BASE_URL when the server is elsewhere (default http://127.0.0.1:8000/v1).
"""

from __future__ import annotations

import os
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from openai import OpenAI

BASE_URL = os.environ.get("LATENTWORKS_BASE_URL", "http://127.0.0.1:8000/v1")
PIPELINE = "latent_mas:sequential"


class State(TypedDict, total=False):
    question: str
    answer: str
    agents: list[dict]  # per-agent accounting from `usage.agents`
    final: str


def solve(state: State) -> State:
    """One LatentMAS run (planner -> critic -> refiner -> judger) behind the endpoint."""
    client = OpenAI(base_url=BASE_URL, api_key="not-needed")
    reply = client.chat.completions.create(
        model=PIPELINE, messages=[{"role": "user", "content": state["question"]}]
    )
    return {"answer": reply.choices[0].message.content, "agents": reply.usage.model_extra["agents"]}


def extract(state: State) -> State:
    """An ordinary Python node after it: the number inside \\boxed{...}."""
    text = state["answer"]
    start = text.rfind("\\boxed{")
    return {"final": text[start + 7 : text.find("}", start)] if start >= 0 else text.strip()}


def build():
    graph = StateGraph(State)
    graph.add_node("solve", solve)
    graph.add_node("extract", extract)
    graph.add_edge(START, "solve")
    graph.add_edge("solve", "extract")
    graph.add_edge("extract", END)
    return graph.compile()


if __name__ == "__main__":
    out = build().invoke({"question": "Mia has 12 pencils. She buys 7 more and gives 5 away. How many now?"})
    print("answer:", out["answer"].replace("\n", " "))
    print("final:", out["final"])
    for a in out["agents"]:
        print(
            f"  {a['name']:<8} latent steps {a['latent_steps']:>2}  KV bytes in {a['kv_bytes_in']:>8}  tokens out {a['output_tokens']}"
        )
