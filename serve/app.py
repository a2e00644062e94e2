"""The ASGI app: GET /v1/models, POST /v1/chat/completions (plain or streamed), GET /health.

`create_app(config)` loads the model (or takes one), serves one pipeline per method and graph, and
funnels every completion through one `Batcher`, so concurrent callers share batched `agents.run` calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Hashable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from serve.batcher import Batcher, QueueFull, Ticket
from serve.config import ServeConfig
from serve.errors import ApiError, BodyLimit, error_body, install_error_handlers
from serve.pipelines import PipelineRunner, pipelines_for
from serve.schemas import ChatRequest, completion_body, parse_chat_request, truncate_at_stop
from serve.stream import ChunkStream, token_pieces

logger = logging.getLogger(__name__)

__all__ = ["create_app"]


def create_app(
    config: ServeConfig,
    model: Any = None,
    run_batch: Callable[[Hashable, list[str]], list[Any]] | None = None,
    warm_up: bool = True,
) -> FastAPI:
    """The server for `config`. `model`: an already loaded `LatentModel` (default: load `config.model`);
    `run_batch`: replaces the `agents.run` call (tests use it to hold or fail a batch)."""
    pipelines = pipelines_for(config.methods, config.graph)
    if run_batch is None:
        import torch

        torch.set_num_threads(config.threads)  # as agents.run does with its `threads`
        if model is None:
            from latent import load_model

            model = load_model(config.model, dtype=config.dtype)
        runner = PipelineRunner(model, config, pipelines)
        if warm_up:
            runner.warm_up()
        run_batch = runner
    batcher = Batcher(
        run_batch,
        max_batch=config.max_batch,
        wait_s=config.batch_wait_ms / 1000,
        max_queue=config.max_queue,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(batcher.run())
        yield
        task.cancel()
        batcher.close()

    app = FastAPI(title="latentworks serve", lifespan=lifespan, docs_url="/docs", redoc_url=None)
    app.state.batcher, app.state.config, app.state.pipelines = batcher, config, pipelines
    app.state.tokenizer = getattr(model, "tokenizer", None)
    app.state.started = int(time.time())
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    app.add_api_route("/health", health, methods=["GET"])
    app.add_api_route("/v1/models", list_models, methods=["GET"])
    app.add_api_route("/v1/chat/completions", chat_completions, methods=["POST"])
    return app


async def health(request: Request) -> dict:
    """Liveness plus what the batcher has done (batches, largest batch, queue length)."""
    b: Batcher = request.app.state.batcher
    return {"status": "ok", "waiting": b.waiting, **vars(b.stats)}


async def list_models(request: Request) -> dict:
    """One entry per served pipeline."""
    created, config = request.app.state.started, request.app.state.config
    data = [
        {"id": pid, "object": "model", "created": created, "owned_by": "latentworks", "root": config.model}
        for pid in request.app.state.pipelines
    ]
    return {"object": "list", "data": data}


async def chat_completions(request: Request) -> Any:
    """Queue the question (429 when the queue is full) and answer it plainly or as a stream."""
    config: ServeConfig = request.app.state.config
    batcher: Batcher = request.app.state.batcher
    req = parse_chat_request(
        await request.body(), request.app.state.pipelines, config.max_tokens, config.max_tokens_limit
    )
    _check_length(req.question, request.app.state.tokenizer, config.max_question_tokens)
    try:
        ticket = batcher.submit((req.model, req.max_tokens), req.question)
    except QueueFull as full:
        raise ApiError(
            429,
            f"the server is busy ({full.waiting} requests waiting); retry after {full.retry_after} s",
            code="queue_full",
            headers={"Retry-After": str(full.retry_after)},
        ) from None
    if req.stream:
        return StreamingResponse(
            _stream(request, req, ticket),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
        )
    result = await _wait(request, batcher, ticket)
    text, finish = _answer(req, result)
    return JSONResponse(completion_body(req.model, text, finish, result))


def _check_length(question: str, tokenizer: Any, limit: int) -> None:
    """Refuse a question longer than `limit` tokens: every agent reads it, and one that outgrows the
    model's context would cost the whole batch (characters first, so a huge one is never tokenized)."""
    too_long = len(question) > 16 * limit
    if not too_long and tokenizer is not None:
        too_long = len(tokenizer(question, add_special_tokens=False)["input_ids"]) > limit
    if too_long:
        message = f"the question is longer than the server's limit of {limit} tokens; shorten it"
        raise ApiError(400, message, param="messages", code="question_too_long")


async def _wait(request: Request, batcher: Batcher, ticket: Ticket) -> Any:
    """The ticket's result; if the client disconnects first, its request leaves the queue."""
    gone = asyncio.create_task(_disconnected(request))
    try:
        await asyncio.wait({ticket.future, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not ticket.future.done():
            raise ApiError(499, "the client closed the connection", code="client_closed")
    finally:
        gone.cancel()
        batcher.cancel(ticket)  # a no-op once the result is in
    try:
        return ticket.future.result()
    except ValueError as err:  # this request failed on its own (a failed batch reruns one by one): its input
        message = f"the pipeline cannot run this request: {err}"
        raise ApiError(400, message, param="messages", code="request_not_runnable") from err
    except Exception as err:  # the server failed: answered 500, the server goes on
        message = f"the batch this request ran in failed ({type(err).__name__}: {err}); it may be retried"
        raise ApiError(500, message, code="batch_failed") from err


async def _disconnected(request: Request) -> None:
    """Returns when the client hangs up: the body is read, so the next ASGI message is the disconnect
    (waiting on it costs nothing, unlike polling `request.is_disconnected()` for every waiting request)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _answer(req: ChatRequest, result: Any) -> tuple[str, str]:
    """The final agent's text (cut at a stop sequence) and OpenAI's finish reason."""
    text, stopped = truncate_at_stop(result.text, req.stop)
    final = result.agents[-1] if result.agents else None
    hit_budget = final is not None and final.output_tokens >= req.max_tokens
    return text, "length" if hit_budget and not stopped else "stop"


async def _stream(request: Request, req: ChatRequest, ticket: Ticket) -> AsyncIterator[str]:
    """The event stream. It opens before the answer is ready; a client that leaves while it waits
    frees its queue place (`_wait`), one that leaves later ends only its own stream."""
    events = ChunkStream(req.model)
    yield events.start()
    try:
        result = await _wait(request, request.app.state.batcher, ticket)
    except ApiError as err:
        if err.status != 499:  # the batch failed: one error event in OpenAI's shape, then [DONE]
            for event in events.error(error_body(err.status, err.message, code=err.code)):
                yield event
        return  # else the client has gone
    text, finish = _answer(req, result)
    include_usage = bool(req.stream_options and req.stream_options.include_usage)
    for event in events.answer(
        token_pieces(text, request.app.state.tokenizer), finish, result, include_usage
    ):
        yield event
        await asyncio.sleep(0)  # let a disconnect be noticed between chunks
