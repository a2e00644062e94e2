"""The served pipelines (method x graph, named like `latent_mas:sequential`) and the one function that
runs a batch of questions through one of them with `agents.run`."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from serve.config import ServeConfig

logger = logging.getLogger(__name__)

__all__ = ["BatchKey", "Pipeline", "PipelineRunner", "pipelines_for"]

BatchKey = tuple[str, int]  # (pipeline id, max_new_tokens): requests batch together only when both match


@dataclass(frozen=True)
class Pipeline:
    """One served model id: a method run on a graph (`single` runs the graph's final agent alone)."""

    id: str
    method: str
    graph: str  # name or path, as `agents.run` takes it


def pipelines_for(methods: Sequence[str], graphs: Sequence[str]) -> dict[str, Pipeline]:
    """Model id -> pipeline. Graph files are read here, so a bad graph fails before the model loads."""
    from agents.graph import Graph

    resolved = [(g, Graph.resolve(g).name) for g in graphs]
    out: dict[str, Pipeline] = {}
    for method in methods:
        for i, (graph, name) in enumerate(resolved):
            # `single` reads the first graph's final-agent prompt; one id is enough for it
            pid = "single" if method == "single" and i == 0 else f"{method}:{name}"
            if method == "single" and i > 0:
                continue
            if pid in out:
                raise ValueError(f"two graphs are both named {name!r}; give each served graph its own name.")
            out[pid] = Pipeline(pid, method, graph)
    return out


class PipelineRunner:
    """Runs `(pipeline id, max_new_tokens), questions` as one batched `agents.run` (greedy), so each
    answer equals the answer the same question gets alone."""

    def __init__(self, model, config: ServeConfig, pipelines: dict[str, Pipeline]) -> None:
        self.model = model
        self.config = config
        self.pipelines = pipelines

    def __call__(self, key: BatchKey, questions: list[str]) -> list:
        import agents
        from agents.config import RunConfig

        pid, max_new_tokens = key
        p = self.pipelines[pid]
        cfg = RunConfig(
            method=p.method,
            latent_steps=self.config.latent_steps,
            prompts=self.config.prompts,
            max_new_tokens=max_new_tokens,
            batch_size=len(questions),  # the whole gathered batch in one pass
            backend=self.config.backend,
            threads=None,  # set once when the server starts
        )
        t0 = time.perf_counter()
        results = agents.run(p.graph, self.model, questions, config=cfg)
        logger.debug("%s: batch of %d in %.3f s", pid, len(questions), time.perf_counter() - t0)
        return results

    def warm_up(self) -> None:
        """One tiny run per pipeline: the first call pays one-time costs, and a pipeline the backend
        cannot run (e.g. a fan-in graph on vLLM) fails at start, not on a user's request."""
        for pid in self.pipelines:
            self((pid, 2), ["1 + 1 = ?"])
