"""smolagents' `OpenAIServerModel` pointing at a served LatentMAS pipeline.

    latentworks serve --model builtin:arith-mini          # in one shell
    python examples/serve_smolagents.py                   # in another

Any smolagents agent can take this `model`; the calls below are the model calls such an agent makes
(messages as content parts, stop sequences honoured). The built-in model only does arithmetic, so a
`CodeAgent` around it would not get far; point the server at a real checkpoint for agent loops.
Needs `pip install smolagents openai`. Set LATENTWORKS_BASE_URL when the server is elsewhere.
"""

from __future__ import annotations

import os

from smolagents import ChatMessage, MessageRole, OpenAIServerModel

BASE_URL = os.environ.get("LATENTWORKS_BASE_URL", "http://127.0.0.1:8000/v1")


def make_model(pipeline: str = "latent_mas:sequential") -> OpenAIServerModel:
    return OpenAIServerModel(model_id=pipeline, api_base=BASE_URL, api_key="not-needed")


def ask(model: OpenAIServerModel, question: str, stop: list[str] | None = None) -> str:
    message = ChatMessage(role=MessageRole.USER, content=[{"type": "text", "text": question}])
    return model.generate([message], stop_sequences=stop).content


if __name__ == "__main__":
    model = make_model()
    question = "Tom has 3 apples and buys 4 more. How many apples does he have?"
    print("answer:", ask(model, question).replace("\n", " "))
    print("up to the box:", ask(model, question, stop=["\\boxed"]).replace("\n", " "))
