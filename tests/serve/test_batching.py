"""Batching: concurrent requests share one `agents.run`, each answer equal to its answer alone; the queue
limit answers 429 with Retry-After; a client that leaves frees its place; a failed batch is answered 500."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from agents.results import AgentStats, Result
from serve.batcher import Batcher, QueueFull
from tests.serve.conftest import QUESTIONS, alone


def _ask(base_url: str, pipeline: str, question: str, **extra) -> httpx.Response:
    body = {"model": pipeline, "messages": [{"role": "user", "content": question}], **extra}
    return httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60)


@pytest.mark.parametrize("pipeline", ["latent_mas:sequential", "text_mas:sequential"])
def test_concurrent_requests_run_as_one_batch_and_equal_alone(serve_app, model, pipeline):
    """8 concurrent questions run as one batch of 8 (a long wait window lets them all join), and each
    answer is the text `agents.run` gives that question alone."""
    url = serve_app(max_batch=8, batch_wait_ms=2000)
    with ThreadPoolExecutor(len(QUESTIONS)) as pool:
        replies = list(pool.map(lambda q: _ask(url, pipeline, q), QUESTIONS))
    texts = [r.json()["choices"][0]["message"]["content"] for r in replies]
    assert texts == [alone(model, pipeline, q).text for q in QUESTIONS]
    health = httpx.get(f"{url}/health").json()
    assert health["batches"] == 1 and health["largest_batch"] == 8


def test_different_budgets_batch_apart(serve_app, model):
    """Requests with different max_tokens never share a batch (each decodes to its own budget)."""
    url = serve_app(max_batch=8, batch_wait_ms=500)
    budgets = [3, 256, 3, 256]
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda i: _ask(url, "single", QUESTIONS[i], max_tokens=budgets[i]), range(4)))
    texts = [r.json()["choices"][0]["message"]["content"] for r in replies]
    assert texts == [alone(model, "single", QUESTIONS[i], max_new_tokens=budgets[i]).text for i in range(4)]
    assert httpx.get(f"{url}/health").json()["batches"] == 2


class Gate:
    """A scripted `run_batch`: holds every batch until `release()`, answers "echo: <question>"."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.entered = threading.Event()
        self.sizes: list[int] = []

    def __call__(self, key, questions):
        self.sizes.append(len(questions))
        self.entered.set()
        assert self.open.wait(30), "the test never released the batch"
        return [
            Result(q, f"echo: {q}", "single", "sequential", [AgentStats("judger", "judger")])
            for q in questions
        ]

    def release(self) -> None:
        self.open.set()


def _wait_for(url: str, field: str, value: int) -> None:
    deadline = time.monotonic() + 10
    while httpx.get(f"{url}/health").json()[field] != value:
        assert time.monotonic() < deadline, f"/health {field} never reached {value}"
        time.sleep(0.02)


def _open_request(url: str, question: str) -> socket.socket:
    """A chat request sent over a bare socket, left open so the test can hang up at will."""
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps({"model": "single", "messages": [{"role": "user", "content": question}]}).encode()
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    sock = socket.create_connection((host, int(port)))
    sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return sock


def test_full_queue_answers_429_and_a_leaving_client_frees_its_place(serve_app):
    """max_queue=1: with one batch running and one request waiting, the next gets 429; once the waiting
    client disconnects its place is free, and a new request is queued and answered."""
    gate = Gate()
    url = serve_app(run_batch=gate, max_batch=1, max_queue=1, batch_wait_ms=0)
    with ThreadPoolExecutor(4) as pool:
        running = pool.submit(_ask, url, "single", "first")
        assert gate.entered.wait(10)
        leaving = _open_request(url, "second")  # a raw client that will hang up while it waits
        _wait_for(url, "waiting", 1)
        assert _ask(url, "single", "refused").status_code == 429  # "second" holds the only place
        leaving.close()
        _wait_for(url, "waiting", 0)  # the server noticed the disconnect
        third = pool.submit(_ask, url, "single", "third")
        _wait_for(url, "waiting", 1)
        gate.release()
        assert running.result().json()["choices"][0]["message"]["content"] == "echo: first"
        assert third.result().json()["choices"][0]["message"]["content"] == "echo: third"
    assert gate.sizes == [1, 1]  # "second" never ran


def test_429_names_the_queue_and_retry_after(serve_app):
    """The refused request's body has OpenAI's error shape and the Retry-After header a whole second."""
    gate = Gate()
    url = serve_app(run_batch=gate, max_batch=1, max_queue=1, batch_wait_ms=0)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(_ask, url, "single", "first")
        assert gate.entered.wait(10)
        second = pool.submit(_ask, url, "single", "second")
        _wait_for(url, "waiting", 1)
        r = _ask(url, "single", "third")
        assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
        assert r.json()["error"]["type"] == "rate_limit_error" and r.json()["error"]["code"] == "queue_full"
        gate.release()
        assert first.result().status_code == second.result().status_code == 200


def test_a_request_that_breaks_its_batch_fails_alone(serve_app):
    """A batch that raises is run again one request at a time: the request that breaks it gets an
    OpenAI-shaped 500 naming the error, the others in its batch their answers, and the server goes on."""

    def picky(key, questions):
        if "poison" in questions:
            raise RuntimeError("cannot read poison")
        return [
            Result(q, f"echo: {q}", "single", "sequential", [AgentStats("judger", "judger")])
            for q in questions
        ]

    url = serve_app(run_batch=picky, max_batch=4, batch_wait_ms=500)  # the three share one batch
    with ThreadPoolExecutor(3) as pool:
        replies = list(pool.map(lambda q: _ask(url, "single", q), ["a", "poison", "b"]))
    assert [r.status_code for r in replies] == [200, 500, 200]
    assert [
        replies[0].json()["choices"][0]["message"]["content"],
        replies[2].json()["choices"][0]["message"]["content"],
    ] == ["echo: a", "echo: b"]
    error = replies[1].json()["error"]
    assert "cannot read poison" in error["message"] and error["type"] == "server_error"
    health = httpx.get(f"{url}/health").json()
    assert health["failed_batches"] == 1 and health["batches"] == 2  # a and b, each alone
    assert _ask(url, "single", "c").json()["choices"][0]["message"]["content"] == "echo: c"


def test_batcher_groups_by_key_up_to_max_batch():
    """The batcher alone: same-key requests up to max_batch per run, other keys apart, results in order."""
    runs = []

    def run_batch(key, items):
        runs.append((key, list(items)))
        return [f"{key}:{i}" for i in items]

    async def main():
        b = Batcher(run_batch, max_batch=3, wait_s=0.05, max_queue=100)
        task = asyncio.create_task(b.run())
        tickets = [b.submit("a" if i % 3 else "b", i) for i in range(8)]
        results = await asyncio.gather(*(t.future for t in tickets))
        with pytest.raises(QueueFull):  # max_queue counts waiting requests
            full = Batcher(run_batch, max_batch=1, wait_s=1, max_queue=1)
            full.submit("a", 1)
            full.submit("a", 2)
        task.cancel()
        b.close()
        return results

    results = asyncio.run(main())
    assert results == [f"{'a' if i % 3 else 'b'}:{i}" for i in range(8)]
    assert sorted(len(items) for _, items in runs) == [2, 3, 3]  # b: 0,3,6 ; a: 1,2,4 then 5,7
    assert all(len({k}) == 1 for k, _ in runs)
