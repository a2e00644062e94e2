"""The chat-completions request as the server accepts it, and the response bodies it writes.

Parsing is strict (a string where a number belongs is refused, not coerced) and every refusal is an
`ApiError` naming the parameter. Parameters the server cannot honour (`n > 1`, tools, sampling, ...) are
refused plainly rather than ignored, so a client never believes it got what it did not."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from serve.errors import ApiError

__all__ = ["ChatRequest", "completion_body", "parse_chat_request", "usage_body"]

ROLES = ("system", "developer", "user", "assistant", "tool")
AGENT_FIELDS = (
    "name",
    "role",
    "prompt_tokens",
    "memory_positions",
    "output_tokens",
    "latent_steps",
    "kv_bytes_in",
    "wall_s",
)


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    type: str
    text: str | None = None


class Message(BaseModel):
    # fields such as `name` or `tool_calls` in earlier turns are allowed: only the last user message is read
    model_config = ConfigDict(extra="ignore", strict=True)
    role: Literal[ROLES]  # type: ignore[valid-type]
    content: str | list[TextPart] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    include_usage: bool = False


class ChatRequest(BaseModel):
    """The accepted body of POST /v1/chat/completions; any other key is refused by name."""

    model_config = ConfigDict(extra="forbid", strict=True)
    model: str
    messages: list[Message]
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    user: str | None = None
    seed: int | None = None
    metadata: dict[str, str] | None = None
    # accepted only at values that change nothing (checked in `_refuse_unsupported`)
    n: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    logit_bias: dict[str, float] | None = None
    response_format: dict[str, Any] | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    functions: list[Any] | None = None
    function_call: Any = None
    parallel_tool_calls: bool | None = None
    _question: str = PrivateAttr(default="")  # filled by `parse_chat_request`

    @property
    def question(self) -> str:
        """The last user message's text: what the agent graph answers."""
        return self._question


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _union_tag(part: object) -> bool:
    """pydantic names the branch of a union in an error's location (`str`, `list[TextPart]`)."""
    return isinstance(part, str) and (part in ("str", "int", "float", "bool", "none") or "[" in part)


def _validation_error(err: ValidationError) -> ApiError:
    first = err.errors()[0]
    param = _loc(tuple(p for p in first["loc"] if not _union_tag(p)))
    got = first.get("input")
    shown = json.dumps(got)[:80] if not isinstance(got, dict) else "an object"
    if first["type"] == "extra_forbidden":
        message = f"unknown parameter `{param}`: this server does not read it. Remove it"
        return ApiError(400, message, param=param, code="unknown_parameter")
    if first["type"] == "missing":
        return ApiError(400, f"`{param}` is required", param=param, code="missing_parameter")
    message = f"`{param}`: {first['msg'].lower()}, got {shown}"
    return ApiError(400, message, param=param, code="invalid_type")


def parse_chat_request(
    raw: bytes, served: dict[str, Any], max_tokens: int, max_tokens_limit: int
) -> ChatRequest:
    """A checked `ChatRequest` from the raw body, or an `ApiError` naming the first problem."""
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ApiError(
            400, f"the body is not valid JSON ({err}); send a JSON object", code="invalid_json"
        ) from None
    if not isinstance(body, dict):
        raise ApiError(
            400, f"the body must be a JSON object, got a {type(body).__name__}", code="invalid_json"
        )
    try:
        req = ChatRequest.model_validate(body)
    except ValidationError as err:
        raise _validation_error(err) from None
    if req.model not in served:
        raise ApiError(
            404,
            f"model {req.model!r} is not served here; served: {', '.join(served)} (GET /v1/models)",
            param="model",
            code="model_not_found",
        )
    _refuse_unsupported(req)
    req.max_tokens = _budget(req, max_tokens, max_tokens_limit)
    req._question = _question(req)
    return req


def _budget(req: ChatRequest, default: int, limit: int) -> int:
    name = "max_completion_tokens" if req.max_completion_tokens is not None else "max_tokens"
    value = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    if value is None:
        return default
    if not 1 <= value <= limit:
        raise ApiError(
            400, f"`{name}` must be between 1 and {limit}, got {value}", param=name, code="invalid_value"
        )
    return value


def _refuse_unsupported(req: ChatRequest) -> None:
    """Parameters this server cannot honour, refused by name with what to send instead."""
    checks = [
        ("n", req.n not in (None, 1), "one completion per request; send `n: 1` or leave it out"),
        ("tools", bool(req.tools), "no tool calling; leave `tools` out and call tools in your framework"),
        ("tool_choice", req.tool_choice not in (None, "none"), "no tool calling; leave `tool_choice` out"),
        ("functions", bool(req.functions), "no function calling; leave `functions` out"),
        ("function_call", req.function_call not in (None, "none"), "no function calling; leave it out"),
        (
            "temperature",
            (req.temperature or 0) != 0,
            "greedy decoding only (so a batched answer equals "
            "the answer alone); send `temperature: 0` or leave it out",
        ),
        ("top_p", req.top_p not in (None, 1, 1.0), "greedy decoding only; send `top_p: 1` or leave it out"),
        ("presence_penalty", (req.presence_penalty or 0) != 0, "no penalties; leave `presence_penalty` out"),
        (
            "frequency_penalty",
            (req.frequency_penalty or 0) != 0,
            "no penalties; leave `frequency_penalty` out",
        ),
        ("logprobs", bool(req.logprobs), "no log-probabilities; leave `logprobs` out"),
        ("top_logprobs", req.top_logprobs is not None, "no log-probabilities; leave `top_logprobs` out"),
        ("logit_bias", bool(req.logit_bias), "no logit bias; leave `logit_bias` out"),
        (
            "response_format",
            (req.response_format or {"type": "text"}).get("type") != "text",
            "plain text answers only; leave `response_format` out",
        ),
    ]
    for param, refused, why in checks:
        if refused:
            raise ApiError(
                400,
                f"`{param}` is not supported: this server gives {why}",
                param=param,
                code="unsupported_parameter",
            )
    if isinstance(req.stop, list) and len(req.stop) > 4:
        raise ApiError(
            400, f"`stop` takes at most 4 sequences, got {len(req.stop)}", param="stop", code="invalid_value"
        )


def _question(req: ChatRequest) -> str:
    """The last user message's text: the question the agent graph answers."""
    if not req.messages:
        raise ApiError(
            400,
            "`messages` is empty; send at least one user message",
            param="messages",
            code="empty_messages",
        )
    index = next((i for i in range(len(req.messages) - 1, -1, -1) if req.messages[i].role == "user"), None)
    if index is None:
        raise ApiError(
            400,
            "`messages` has no user message; the last user message is the question",
            param="messages",
            code="no_user_message",
        )
    content = req.messages[index].content
    if isinstance(content, list):
        others = sorted({p.type for p in content if p.type != "text"})
        if others:
            raise ApiError(
                400,
                f"only text content is supported, got parts of type {others}",
                param=f"messages[{index}].content",
                code="unsupported_content",
            )
        content = "\n".join(p.text or "" for p in content)
    if not content or not content.strip():
        raise ApiError(
            400,
            "the last user message is empty; put the question in it",
            param=f"messages[{index}].content",
            code="empty_question",
        )
    return content


def truncate_at_stop(text: str, stop: str | list[str] | None) -> tuple[str, bool]:
    """`text` cut before the first stop sequence (OpenAI leaves the stop sequence out), and whether it was cut."""
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    cuts = [i for s in stops if s and (i := text.find(s)) >= 0]
    return (text[: min(cuts)], True) if cuts else (text, False)


def usage_body(result: Any) -> dict:
    """prompt/completion tokens over every agent of the graph (what the request cost), and per agent
    its accounting in `agents` (latent steps, KV bytes read, tokens, wall time)."""
    prompt = sum(a.prompt_tokens for a in result.agents)
    completion = sum(a.output_tokens for a in result.agents)
    agents = [{k: v for k, v in asdict(a).items() if k in AGENT_FIELDS} for a in result.agents]
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "agents": agents,
    }


def new_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def completion_body(model: str, text: str, finish_reason: str, result: Any) -> dict:
    """A `chat.completion` object as OpenAI's clients parse it."""
    return {
        "id": new_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": usage_body(result),
    }
