"""Bad input: each bad request is answered 4xx in OpenAI's error shape, naming the problem, while a good
client keeps getting right answers; a client that hangs up mid-stream leaves the server serving."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.serve.conftest import QUESTIONS, alone

CHAT = "/v1/chat/completions"
USER = [{"role": "user", "content": "What is 2 plus 2?"}]


def _body(**fields) -> bytes:
    return json.dumps({"model": "single", "messages": USER, **fields}).encode()


# (what is wrong, method, path, raw body, expected status, expected `param`, words the message must hold)
BAD = [
    ("malformed JSON", "POST", CHAT, b'{"model": "single", "messages": [', 400, None, "not valid JSON"),
    ("not an object", "POST", CHAT, b'["single"]', 400, None, "JSON object"),
    ("not UTF-8", "POST", CHAT, b"\xff\xfe{}", 400, None, "not valid JSON"),
    ("unknown model", "POST", CHAT, _body(model="gpt-9"), 404, "model", "not served"),
    ("model missing", "POST", CHAT, json.dumps({"messages": USER}).encode(), 400, "model", "required"),
    ("model not a string", "POST", CHAT, _body(model=3), 400, "model", "valid string"),
    ("empty messages", "POST", CHAT, _body(messages=[]), 400, "messages", "empty"),
    ("messages not a list", "POST", CHAT, _body(messages="hi"), 400, "messages", "valid list"),
    (
        "no user message",
        "POST",
        CHAT,
        _body(messages=[{"role": "system", "content": "x"}]),
        400,
        "messages",
        "no user",
    ),
    (
        "empty question",
        "POST",
        CHAT,
        _body(messages=[{"role": "user", "content": "  "}]),
        400,
        "messages[0].content",
        "empty",
    ),
    (
        "content a number",
        "POST",
        CHAT,
        _body(messages=[{"role": "user", "content": 7}]),
        400,
        "messages[0].content",
        "string",
    ),
    (
        "unknown role",
        "POST",
        CHAT,
        _body(messages=[{"role": "robot", "content": "x"}]),
        400,
        "messages[0].role",
        "robot",
    ),
    (
        "image part",
        "POST",
        CHAT,
        _body(messages=[{"role": "user", "content": [{"type": "image_url"}]}]),
        400,
        "messages[0].content",
        "image_url",
    ),
    ("negative max_tokens", "POST", CHAT, _body(max_tokens=-5), 400, "max_tokens", "between 1 and"),
    ("zero max_tokens", "POST", CHAT, _body(max_tokens=0), 400, "max_tokens", "between 1 and"),
    ("huge max_tokens", "POST", CHAT, _body(max_tokens=10**9), 400, "max_tokens", "between 1 and"),
    (
        "huge max_completion_tokens",
        "POST",
        CHAT,
        _body(max_completion_tokens=99999),
        400,
        "max_completion_tokens",
        "between 1 and",
    ),
    ("max_tokens a string", "POST", CHAT, _body(max_tokens="10"), 400, "max_tokens", "integer"),
    ("max_tokens a float", "POST", CHAT, _body(max_tokens=1.5), 400, "max_tokens", "integer"),
    ("stream a string", "POST", CHAT, _body(stream="yes"), 400, "stream", "boolean"),
    ("n > 1", "POST", CHAT, _body(n=2), 400, "n", "not supported"),
    (
        "tools",
        "POST",
        CHAT,
        _body(tools=[{"type": "function", "function": {"name": "f"}}]),
        400,
        "tools",
        "not supported",
    ),
    ("sampling", "POST", CHAT, _body(temperature=0.7), 400, "temperature", "greedy"),
    ("logprobs", "POST", CHAT, _body(logprobs=True), 400, "logprobs", "not supported"),
    (
        "json mode",
        "POST",
        CHAT,
        _body(response_format={"type": "json_object"}),
        400,
        "response_format",
        "not supported",
    ),
    ("unknown parameter", "POST", CHAT, _body(best_of=3), 400, "best_of", "unknown parameter"),
    ("too many stops", "POST", CHAT, _body(stop=list("abcde")), 400, "stop", "at most 4"),
    ("body over the limit", "POST", CHAT, _body(user="x" * 70_000), 413, None, "limit"),
    (
        "question too long",
        "POST",
        CHAT,
        _body(messages=[{"role": "user", "content": "1 + " * 800}]),
        400,
        "messages",
        "2048 tokens",
    ),
    ("unknown route", "POST", "/v1/completions", _body(), 404, None, "no route"),
    ("wrong method", "GET", CHAT, b"", 405, None, "not allowed"),
]


@pytest.fixture(scope="module")
def small_server(model):
    """A server with a 64 KB body limit (the default is 1 MB)."""
    from serve import ServeConfig, create_app
    from tests.serve.conftest import MODEL, ServerThread

    config = ServeConfig(model=MODEL, threads=1, max_body_bytes=64_000)
    server = ServerThread(create_app(config, model=model, warm_up=False))
    yield server.start()
    server.stop()


def _check(response: httpx.Response, status: int, param: str | None, words: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param and words in error["message"]
    assert error["type"] == "invalid_request_error"


def test_bad_requests_get_4xx_while_a_good_client_gets_right_answers(small_server, model):
    """30 bad requests, each answered 4xx in OpenAI's shape naming its problem, while another client's
    questions, asked at the same time, are all answered right."""
    expected = {q: alone(model, "single", q).text for q in QUESTIONS}
    good: list[bool] = []
    stop = threading.Event()

    def good_client() -> None:
        with httpx.Client(base_url=small_server, timeout=60) as c:
            while not stop.is_set() or len(good) < 3:
                q = QUESTIONS[len(good) % len(QUESTIONS)]
                r = c.post(CHAT, json={"model": "single", "messages": [{"role": "user", "content": q}]})
                good.append(
                    r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == expected[q]
                )

    thread = threading.Thread(target=good_client)
    thread.start()
    with httpx.Client(base_url=small_server, timeout=60) as c:
        for what, method, path, raw, status, param, words in BAD:
            r = c.request(method, path, content=raw, headers={"content-type": "application/json"})
            try:
                _check(r, status, param, words)
            except AssertionError as err:
                raise AssertionError(f"{what}: {err}") from None
    stop.set()
    thread.join(60)
    assert len(BAD) >= 15 and good and all(good), good
    assert httpx.get(f"{small_server}/health").json()["failed_batches"] == 0


def test_a_body_over_the_limit_without_content_length_is_refused(small_server):
    """A chunked upload (no Content-Length) is cut off at the limit too."""

    def chunks():
        yield b'{"model": "single", "messages": [{"role": "user", "content": "'
        for _ in range(100):
            yield b"x" * 1000
        yield b'"}]}'

    r = httpx.post(f"{small_server}{CHAT}", content=chunks(), timeout=60)
    _check(r, 413, None, "limit")


def test_a_client_leaving_mid_stream_leaves_the_server_serving(small_server, model):
    """Hang up after the first event of a stream; the server answers the next request right."""
    body = {
        "model": "latent_mas:sequential",
        "messages": [{"role": "user", "content": QUESTIONS[4]}],
        "stream": True,
    }
    for _ in range(3):
        with httpx.stream("POST", f"{small_server}{CHAT}", json=body, timeout=60) as r:
            first = next(r.iter_lines())
            assert (
                first.startswith("data: ")
                and json.loads(first[6:])["choices"][0]["delta"]["role"] == "assistant"
            )
        # leaving the block closes the connection before the answer's chunks are read
    r = httpx.post(f"{small_server}{CHAT}", json={**body, "stream": False}, timeout=60)
    assert (
        r.json()["choices"][0]["message"]["content"]
        == alone(model, "latent_mas:sequential", QUESTIONS[4]).text
    )
    health = httpx.get(f"{small_server}/health").json()
    assert health["status"] == "ok" and health["waiting"] == 0 and health["failed_batches"] == 0


def test_a_question_past_the_models_context_is_400_and_its_batch_mates_are_answered(serve_app, model):
    """A question that fits the token limit but not the model's context (every agent reads it) breaks its
    batch; run again alone it is answered 400 naming the context, and the question beside it is answered."""
    url = serve_app(max_batch=4, batch_wait_ms=500)  # both requests share one batch
    long_question = {
        "model": "latent_mas:sequential",
        "messages": [{"role": "user", "content": "1 + " * 300}],
    }
    good = {"model": "latent_mas:sequential", "messages": [{"role": "user", "content": QUESTIONS[6]}]}
    with ThreadPoolExecutor(2) as pool:
        bad_reply, good_reply = pool.map(
            lambda body: httpx.post(f"{url}{CHAT}", json=body, timeout=60), [long_question, good]
        )
    _check(bad_reply, 400, "messages", "context")
    assert (
        good_reply.json()["choices"][0]["message"]["content"]
        == alone(model, "latent_mas:sequential", QUESTIONS[6]).text
    )
    assert httpx.get(f"{url}/health").json()["failed_batches"] == 1
