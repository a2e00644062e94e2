"""The endpoint as the `openai` client and raw HTTP see it: same text as `agents.run`, streaming, usage."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.serve.conftest import QUESTIONS, alone

openai = pytest.importorskip("openai", reason="the client tests need the [serve] extra")

PIPELINES = ["latent_mas:sequential", "text_mas:sequential", "single"]


@pytest.fixture(scope="module")
def client(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0)


def test_models_lists_one_entry_per_pipeline(client):
    """GET /v1/models names every method x graph pipeline, and `single`."""
    assert [m.id for m in client.models.list().data] == PIPELINES


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_openai_client_gets_the_same_text_as_agents_run(client, model, pipeline):
    """Plain and streamed answers both equal `agents.run` on the same question, for each method."""
    question = QUESTIONS[1]
    expected = alone(model, pipeline, question)
    reply = client.chat.completions.create(model=pipeline, messages=[{"role": "user", "content": question}])
    assert reply.choices[0].message.content == expected.text
    assert reply.choices[0].finish_reason == "stop" and reply.model == pipeline
    stream = client.chat.completions.create(
        model=pipeline, messages=[{"role": "user", "content": question}], stream=True
    )
    pieces = [c.choices[0].delta.content or "" for c in stream if c.choices]
    assert "".join(pieces) == expected.text and len(pieces) > 3  # token by token, not one blob


def test_usage_gives_tokens_and_per_agent_accounting(client, model):
    """usage: tokens over every agent, and each agent's latent steps, KV bytes read and tokens."""
    expected = alone(model, "latent_mas:sequential", QUESTIONS[0])
    reply = client.chat.completions.create(
        model="latent_mas:sequential", messages=[{"role": "user", "content": QUESTIONS[0]}]
    )
    usage = reply.usage
    per_agent = usage.model_extra["agents"]
    assert [a["name"] for a in per_agent] == [a.name for a in expected.agents]
    assert usage.prompt_tokens == sum(a.prompt_tokens for a in expected.agents)
    assert usage.completion_tokens == expected.output_tokens == per_agent[-1]["output_tokens"]
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert [a["latent_steps"] for a in per_agent[:-1]] == [20, 20, 20]  # the upstream agents think
    assert per_agent[-1]["kv_bytes_in"] == expected.agents[-1].kv_bytes_in > 0


def test_raw_stream_is_openai_chunks_ending_with_done(base_url, model):
    """Raw SSE: `data: {chunk}` events, one id, a finish reason, the usage chunk when asked, `[DONE]`."""
    body = {
        "model": "single",
        "messages": [{"role": "system", "content": "ignored"}, {"role": "user", "content": QUESTIONS[2]}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [line[len("data: ") :] for line in r.iter_lines() if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["id"] for c in chunks} == {chunks[0]["id"]}
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1])
    assert text == alone(model, "single", QUESTIONS[2]).text


def test_last_user_message_is_the_question_and_content_parts_are_read(client, model):
    """Earlier turns are not read; a list of text parts (as smolagents sends) is the same question."""
    messages = [
        {"role": "user", "content": "What is 1 plus 1?"},
        {"role": "assistant", "content": "2"},
        {"role": "user", "content": [{"type": "text", "text": QUESTIONS[3]}]},
    ]
    reply = client.chat.completions.create(model="single", messages=messages)
    assert reply.choices[0].message.content == alone(model, "single", QUESTIONS[3]).text


def test_max_tokens_and_stop_cut_the_answer(client, model):
    """A small budget ends with finish_reason "length"; a stop sequence cuts before it, reason "stop"."""
    full = alone(model, "single", QUESTIONS[0]).text
    short = client.chat.completions.create(
        model="single", messages=[{"role": "user", "content": QUESTIONS[0]}], max_tokens=3
    )
    assert short.choices[0].finish_reason == "length"
    assert short.choices[0].message.content == alone(model, "single", QUESTIONS[0], max_new_tokens=3).text
    stop = full.split()[1]  # a token from the middle of the answer
    cut = client.chat.completions.create(
        model="single", messages=[{"role": "user", "content": QUESTIONS[0]}], stop=[stop]
    )
    assert cut.choices[0].message.content == full[: full.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_health_reports_the_batcher(base_url):
    """GET /health: status and what the batcher has done."""
    health = httpx.get(f"{base_url}/health").json()
    assert health["status"] == "ok" and health["waiting"] == 0 and health["failed_batches"] == 0
