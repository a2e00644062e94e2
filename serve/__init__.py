"""serve: agent graphs behind an OpenAI-compatible chat-completions endpoint, with batching.

from serve import ServeConfig, create_app
app = create_app(ServeConfig(model="builtin:arith-mini"))   # then: uvicorn.run(app)

`latentworks serve --model builtin:arith-mini` does the same from the command line (docs/serve.md).
Names load on first use, so `serve.config` stays importable without torch or a web framework.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(
    __name__,
    submod_attrs={
        "app": ["create_app"],
        "batcher": ["Batcher", "QueueFull"],
        "config": ["ServeConfig"],
        "pipelines": ["Pipeline", "PipelineRunner", "pipelines_for"],
    },
)
