"""Server-sent events in OpenAI's `chat.completion.chunk` format: a role chunk, one chunk per token of
the final agent's answer, a chunk with the finish reason, the usage chunk when asked, then `[DONE]`."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

from serve.schemas import new_id, usage_body

__all__ = ["ChunkStream", "token_pieces"]


def token_pieces(text: str, tokenizer: Any) -> list[str]:
    """`text` split at its token boundaries; the pieces join back to exactly `text`."""
    if not text:
        return []
    try:
        offsets = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)["offset_mapping"]
        starts = sorted({0, *(s for s, _ in offsets if 0 < s < len(text))})
    except (NotImplementedError, TypeError, KeyError):  # a slow tokenizer has no offsets: split at words
        starts = [m.start() for m in re.finditer(r"\s*\S+", text)] or [0]
        starts[0] = 0
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)])]


def _chunk(cid: str, created: int, model: str, delta: dict, finish: str | None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
    body = {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [choice],
    }
    return f"data: {json.dumps(body)}\n\n"


class ChunkStream:
    """The events of one streamed answer, all with the same id: `start()` (sent before the answer is
    ready, so a client sees the stream open at once), then `answer(...)` and `error(...)`."""

    def __init__(self, model: str) -> None:
        self.model, self.id, self.created = model, new_id(), int(time.time())

    def start(self) -> str:
        return self._chunk({"role": "assistant", "content": ""}, None)

    def answer(
        self, pieces: list[str], finish_reason: str, result: Any, include_usage: bool
    ) -> Iterator[str]:
        """One chunk per piece, the finish reason, the usage chunk when asked, then `[DONE]`."""
        for piece in pieces:
            yield self._chunk({"content": piece}, None)
        yield self._chunk({}, finish_reason)
        if include_usage:
            yield self._event({"choices": [], "usage": usage_body(result)})
        yield "data: [DONE]\n\n"

    def error(self, body: dict) -> Iterator[str]:
        yield f"data: {json.dumps(body)}\n\n"
        yield "data: [DONE]\n\n"

    def _chunk(self, delta: dict, finish: str | None) -> str:
        return self._event(
            {"choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
        )

    def _event(self, fields: dict) -> str:
        head = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
        }
        return f"data: {json.dumps({**head, **fields})}\n\n"
