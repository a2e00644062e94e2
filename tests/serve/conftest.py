"""A real uvicorn server on a free local port, in a thread, over the shipped built-in model (loaded once).

`serve_app(config, run_batch=None)` starts one and returns its base URL; every server started in a test
stops when the test ends."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("fastapi", reason="the serve tests need the [serve] extra")
pytest.importorskip("uvicorn", reason="the serve tests need the [serve] extra")

import uvicorn  # noqa: E402

from serve import ServeConfig, create_app  # noqa: E402

MODEL = "builtin:arith-mini"
QUESTIONS = [
    "Tom has 3 apples and buys 4 more. How many apples does he have?",
    "Mia has 12 pencils. She buys 7 more and gives 5 away. How many pencils does she have?",
    "What is 5 plus 9?",
    "A box holds 6 eggs. How many eggs are in 3 boxes?",
    "Sam had 20 coins and spent 8. How many coins are left?",
    "What is 14 minus 6?",
    "Ann reads 4 pages a day for 5 days. How many pages does she read?",
    "What is 7 plus 8 plus 2?",
]


class ServerThread:
    """uvicorn serving `app` on 127.0.0.1 with an OS-chosen port, until `stop()`."""

    def __init__(self, app) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="session")
def model():
    """The built-in model, one torch thread (the suite shares a small CPU)."""
    import torch

    from latent import load_model

    torch.set_num_threads(1)
    return load_model(MODEL)


@pytest.fixture
def serve_app(model):
    """Factory: start a server for `ServeConfig(model=MODEL, **settings)`; returns its base URL."""
    started: list[ServerThread] = []

    def start(run_batch=None, **settings) -> str:
        config = ServeConfig(model=MODEL, threads=1, **settings)
        app = create_app(config, model=model, run_batch=run_batch, warm_up=False)
        started.append(ServerThread(app))
        return started[-1].start()

    yield start
    for s in started:
        s.stop()


@pytest.fixture(scope="module")
def base_url(model):
    """One server with the default settings, shared by a module's tests."""
    app = create_app(ServeConfig(model=MODEL, threads=1), model=model, warm_up=False)
    server = ServerThread(app)
    yield server.start()
    server.stop()


_ALONE: dict = {}


def alone(model, pipeline: str, question: str, max_new_tokens: int = 256):
    """The `agents.run` result of one question alone: what the server must answer (cached per session:
    the tests ask the same questions again)."""
    import agents

    key = (id(model), pipeline, question, max_new_tokens)
    if key not in _ALONE:
        method, _, graph = pipeline.partition(":")
        runs = agents.run(
            graph or "sequential",
            model,
            [question],
            method=method,
            max_new_tokens=max_new_tokens,
            threads=None,
        )
        _ALONE[key] = runs[0]
    return _ALONE[key]
