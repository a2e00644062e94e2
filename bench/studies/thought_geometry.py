"""Where do latent thoughts land in the input space, step by step?

A thought is the realigned last hidden state fed back as the next input embedding. Per step, over the
prompts (word problems outside every evaluation set), against the model's real token embeddings:
- norm / mean token-embedding norm (the realignment rescales to the token norm, so about 1),
- the share of the squared norm in the largest 1 and 5 channels (outlier channels: real tokens spread
  their norm; a thought held by a few channels is off the manifold the model was trained to read),
- cosine to the nearest token embedding, and to the embedding of the token the thought's hidden state
  predicts (logit lens),
- the share of prompts whose logit lens reads an end of turn or a bare newline (the loop settling on
  "the message is over" instead of a step of reasoning).
Each model with realignment `ridge` (the table's) and `identity` (norm rescale only, the official default).

Run: python bench/studies/thought_geometry.py --models qwen2.5-coder-0.5b-instruct,qwen2.5-coder-1.5b-instruct
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bf16_thoughts import PROMPTS  # noqa: E402

from latent.args import add_config_arguments, config_from_args, run_script  # noqa: E402

COLUMNS = ("norm_ratio", "top1_share", "top5_share", "nearest_cos", "lens_token_cos", "lens_end_share")


@dataclass
class Options:
    """Geometry of latent thoughts against the token embeddings, per step."""

    models: str = field(
        default="qwen2.5-coder-0.5b-instruct,qwen2.5-coder-1.5b-instruct",
        metadata={"help": "comma-separated load_model names or paths"},
    )
    steps: int = field(default=10, metadata={"help": "latent thoughts per prompt"})
    prompts: int = field(default=8, metadata={"help": "prompts measured (one batch, float32)"})
    threads: int = field(default=1, metadata={"help": "torch CPU threads"})
    out: str = field(default="bench/results/thought_geometry", metadata={"help": "report folder"})


def channel_shares(x, top: int):
    """Share of each row's squared norm held by its `top` largest channels."""
    sq = x.double().pow(2)
    return sq.topk(top, dim=-1).values.sum(-1) / sq.sum(-1)


def nearest_cos(x, emb, exclude=None):
    """Cosine of each row to its nearest row of `emb` (optionally not the row `exclude[i]` itself)."""
    import torch.nn.functional as F

    cos = F.normalize(x.float(), dim=-1) @ F.normalize(emb.float(), dim=-1).T
    if exclude is not None:
        cos[range(len(exclude)), exclude] = -1.0
    return cos.max(-1).values


def end_ids(tokenizer) -> set[int]:
    """Token ids that end a turn or are bare newlines."""
    ids = {i for i in (tokenizer.eos_token_id, tokenizer.pad_token_id) if i is not None}
    ids |= {tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>")}
    ids |= {
        i for t, i in tokenizer.get_vocab().items() if tokenizer.convert_tokens_to_string([t]).strip() == ""
    }
    return {i for i in ids if isinstance(i, int) and i >= 0}


def measure_model(name: str, realign: str, steps: int, n_prompts: int) -> dict:
    import torch

    from latent import load_model

    m = load_model(name, dtype="float32", realign=realign)
    emb = m.model.get_input_embeddings().weight.detach()
    head = m.model.get_output_embeddings()
    ends = torch.tensor(sorted(end_ids(m.tokenizer)))
    with torch.no_grad():
        st = m.prefill(**m.encode(list(PROMPTS[:n_prompts]), chat=True))
        thoughts, _, hidden = m.think(st, steps, return_hidden=True)  # (B, k, D) each
        lens = head(hidden.to(head.weight.dtype)).argmax(-1)  # (B, k): the token each step "means"
    token_norm = float(emb.float().norm(dim=-1).mean())
    per_step = []
    for k in range(steps):
        t = thoughts[:, k].float()
        per_step.append(
            {
                "norm_ratio": float(t.norm(dim=-1).mean() / token_norm),
                "top1_share": float(channel_shares(t, 1).mean()),
                "top5_share": float(channel_shares(t, 5).mean()),
                "nearest_cos": float(nearest_cos(t, emb).mean()),
                "lens_token_cos": float(
                    torch.nn.functional.cosine_similarity(t, emb[lens[:, k]].float(), dim=-1).mean()
                ),
                "lens_end_share": float(torch.isin(lens[:, k], ends).float().mean()),
            }
        )
    # the reference: the prompts' own tokens, against every other token
    ids = m.encode(list(PROMPTS[:n_prompts]), chat=True)["input_ids"].flatten().unique()
    real = emb[ids].float()
    tokens = {
        "norm_ratio": float(real.norm(dim=-1).mean() / token_norm),
        "top1_share": float(channel_shares(real, 1).mean()),
        "top5_share": float(channel_shares(real, 5).mean()),
        "nearest_cos": float(nearest_cos(real, emb, exclude=ids.tolist()).mean()),
        "lens_token_cos": 1.0,
        "lens_end_share": float(torch.isin(ids, ends).float().mean()),
    }
    words = [[m.tokenizer.decode([int(i)]) for i in row] for row in lens[:2]]
    return {"model": name, "realign": realign, "tokens": tokens, "steps": per_step, "lens_rows": words}


def table(results: list[dict]) -> str:
    head = "| model | realign | thought | " + " | ".join(COLUMNS) + " |"
    lines = [head, "|" + "---|" * (3 + len(COLUMNS))]
    for r in results:
        rows = [("real tokens", r["tokens"])]
        rows += [
            (f"step {k + 1}", s) for k, s in enumerate(r["steps"]) if k in (0, 1, 2, 4, len(r["steps"]) - 1)
        ]
        for label, s in rows:
            cells = " | ".join(f"{s[c]:.3f}" for c in COLUMNS)
            lines.append(f"| {r['model']} | {r['realign']} | {label} | {cells} |")
    return "\n".join(lines)


def run(ns: argparse.Namespace) -> int:
    opts = config_from_args(Options, ns)
    if not 1 <= opts.prompts <= len(PROMPTS) or opts.steps < 1:
        print(f"error: --prompts must be 1-{len(PROMPTS)} and --steps >= 1.", file=sys.stderr)
        return 2
    import torch

    torch.set_num_threads(opts.threads)
    start = time.time()
    results = []
    for name in opts.models.split(","):
        for realign in ("ridge", "identity"):
            results.append(measure_model(name, realign, opts.steps, opts.prompts))
            print(f"{name} {realign}: logit lens of prompt 1 = {results[-1]['lens_rows'][0]}", flush=True)
    md = (
        f"# Where latent thoughts land ({opts.prompts} prompts, {opts.steps} steps, float32)\n\n"
        f"Command: `python bench/studies/thought_geometry.py --models {opts.models} --steps {opts.steps} "
        f"--prompts {opts.prompts}`; {time.time() - start:.0f} s.\n\n{table(results)}\n"
    )
    print(md)
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "report.md").write_text(md)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/studies/thought_geometry.py", __doc__, partial(add_config_arguments, cls=Options), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
