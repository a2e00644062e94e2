"""The GPU check: latentworks on random weights of real model shapes, against the official LatentMAS code.

    bash bench/gpu/check.sh                                  # on a GPU machine: gpu tests, then this
    python bench/gpu/check.py --official official --out DIR  # this part alone
    python bench/gpu/check.py --dry-run --out /tmp/gpucheck  # tiny shapes on a CPU, in seconds

Prepared to fit in 8 minutes on one H100 with nothing but the working tree: no checkpoint travels, so each
shape (Qwen2.5-7B, Qwen3-8B; configs written below from the published ones) is built with random bfloat16
weights directly on the GPU, with a small tokenizer trained here (the embedding keeps the real vocabulary,
so the LM head costs what it costs). Random weights never say when to stop, so every decode runs its full
budget on both sides: equal work, which is what a speed check needs; accuracy means nothing here.

Per shape:
- latent loop: one agent's prompt read + `steps` latent steps, ours (`WorkingMemory`, as `agents.run`)
  against the official `ModelWrapper.generate_latent_batch`, at batch 1 / 16 / 64, interleaved; thoughts
  compared on the rows the official code reads correctly (no padding);
- end to end: the sequential graph (planner, critic, refiner, judger), ours against the official
  `LatentMASMethod.run_batch`, same prompts, greedy, batch 16 and 64;
- latent_mas against text_mas (ours): the same questions and graph, items per second and tokens decoded.

The official code is the user's checkout (`--official DIR`, env LATENTMAS_OFFICIAL, or an ignored folder
`official/` in the repository), imported at run time with `bench/speed/official_adapter.py`'s adapters; one more
here: its wrapper loads a model by name, so its loaders are pointed at the model built here (one copy of
the weights on the GPU for both sides), and the wrapper's resize of the embedding to the tokenizer is
skipped (the small tokenizer would shrink the real vocabulary). Without a checkout those rows say so.

Writes `report.json` and `report.md` under `--out` (default: $OUT, else runs/gpu-check).
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import sys
import time
import types
from argparse import Namespace
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "speed"))

from latent.args import add_config_arguments, config_from_args  # noqa: E402
from latent.entry import run_script  # noqa: E402

# Published configs of the two shapes (config.json of Qwen/Qwen2.5-7B-Instruct and Qwen/Qwen3-8B).
SHAPES = {
    "qwen2.5-7b": dict(
        model_type="qwen2",
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        vocab_size=152064,
        max_position_embeddings=32768,
        rope_theta=1e6,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
    ),
    "qwen3-8b": dict(
        model_type="qwen3",
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        max_position_embeddings=40960,
        rope_theta=1e6,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
    ),
}
# The dry run keeps each shape's architecture at toy size (the vocabulary still larger than the tokenizer).
TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    vocab_size=400,
)


@dataclass
class GpuCheck:
    """Settings of the GPU check (the defaults fit 8 minutes on one H100)."""

    out: str | None = field(
        default=None, metadata={"help": "report folder (default: $OUT, else runs/gpu-check)"}
    )
    official: str | None = field(
        default=None,
        metadata={"help": "official LatentMAS checkout (default: env LATENTMAS_OFFICIAL, else ./official)"},
    )
    shapes: str = field(default="qwen2.5-7b,qwen3-8b", metadata={"help": "model shapes to build"})
    batches: str = field(default="1,16,64", metadata={"help": "latent-loop batch sizes"})
    e2e_batches: str = field(default="16,64", metadata={"help": "end-to-end batch sizes"})
    steps: int = field(default=8, metadata={"help": "latent steps per agent"})
    max_new_tokens: int = field(default=64, metadata={"help": "decode budget of each decoding agent"})
    repeats: int = field(default=3, metadata={"help": "interleaved repetitions per latent-loop batch"})
    budget_s: float = field(default=420.0, metadata={"help": "skip what would start after this many seconds"})
    dry_run: bool = field(
        default=False, metadata={"switch": True, "help": "tiny shapes, small batches, float32, on a CPU"}
    )


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _timed(fn):
    """Seconds of `fn()` with the device's queue drained before and after (GPU work is asynchronous)."""
    _sync()
    t0 = time.perf_counter()
    out = fn()
    _sync()
    return time.perf_counter() - t0, out


def tokenizer():
    """A small ChatML tokenizer trained here (no hub)."""
    from latent.testing import tiny_tokenizer

    return tiny_tokenizer()


def build(shape: str, tiny: bool, device: str, dtype):
    """A random-weight causal LM of `shape` built directly on `device`, and a `LatentModel` over it."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from latent.model import LatentModel

    spec = dict(SHAPES[shape])
    kind = spec.pop("model_type")
    if tiny:
        spec.update(TINY)
    tok = tokenizer()
    config = AutoConfig.for_model(kind, **spec)
    config.pad_token_id, config.eos_token_id, config.bos_token_id = tok.pad_token_id, tok.eos_token_id, None
    torch.manual_seed(0)
    with torch.device(device):
        hf = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    hf.eval()
    return LatentModel(hf, tok, realign="identity")  # identity: the official default (norm rescale only)


def official_wrapper(off, m, device):
    """The official `ModelWrapper` over the model built here: its loaders return our model and a copy of
    our tokenizer (padding on the right, as Qwen's tokenizer), and the embedding resize is skipped."""
    hf, tok = m.model, copy.deepcopy(m.tokenizer)
    tok.padding_side = "right"
    loaders = off.models.AutoModelForCausalLM, off.models.AutoTokenizer
    off.models.AutoModelForCausalLM = types.SimpleNamespace(from_pretrained=lambda *a, **k: hf)
    off.models.AutoTokenizer = types.SimpleNamespace(from_pretrained=lambda *a, **k: tok)
    hf.resize_token_embeddings = lambda *a, **k: None  # the small tokenizer would shrink the vocabulary
    try:
        return off.models.ModelWrapper(
            "random-weights", device, use_vllm=False, args=Namespace(latent_space_realign=False)
        )
    finally:
        off.models.AutoModelForCausalLM, off.models.AutoTokenizer = loaders
        del hf.resize_token_embeddings


def questions(n: int) -> list[str]:
    return [
        f"Tom has {3 + 7 * i} apples. He buys {11 + 5 * i} more and gives {2 + i % 5} away. How many are left?"
        for i in range(n)
    ]


def latent_loop(m, wrapper, msgs, steps: int, repeats: int) -> dict:
    """Prompt read + `steps` latent steps, ours and (when given) the official code's, interleaved."""
    import torch
    from official_adapter import record_thoughts

    from latent.memory import WorkingMemory

    enc = m.encode(msgs)

    def ours():
        mem = WorkingMemory(m)
        st, pid = mem.write_tokens("planner", "prompt", enc["input_ids"], enc["attention_mask"], None, [])
        _, lid = mem.write_latent("planner", st, steps, [pid], owned=True)
        return mem.segments[lid].embeds

    row = {"batch": len(msgs)}
    if wrapper is None:
        ours()  # warm-up
        times = [_timed(ours)[0] for _ in range(repeats)]
        return row | {"ours_s": statistics.median(times), "official_s": None}
    _, o_ids, o_mask, _ = wrapper.prepare_chat_batch(msgs, add_generation_prompt=True)
    seen = record_thoughts(wrapper)

    @torch.no_grad()
    def official():
        seen.clear()
        wrapper.generate_latent_batch(o_ids, attention_mask=o_mask, latent_steps=steps)
        return torch.stack(seen, 1)

    official(), ours()  # warm-up
    t_off, t_ours = [], []
    for r in range(repeats):  # the order swapped every repetition
        pair = [(t_off, official), (t_ours, ours)][:: 1 if r % 2 == 0 else -1]
        outs = {}
        for times, fn in pair:
            t, outs[fn.__name__] = _timed(fn)
            times.append(t)
    right = o_mask.bool().all(1).nonzero().squeeze(1).to(outs["ours"].device)
    a, b = outs["official"][right].double(), outs["ours"][right].double()
    diff = float(((a - b).norm(dim=-1) / b.norm(dim=-1).clamp_min(1e-12)).max()) if right.numel() else None
    return row | {
        "official_s": statistics.median(t_off),
        "ours_s": statistics.median(t_ours),
        "ratio": statistics.median(x / y for x, y in zip(t_off, t_ours)),
        "thought_max_rel_diff": diff,
        "rows_checked": int(right.numel()),
    }


def end_to_end(m, off, wrapper, qs: list[str], steps: int, max_new: int, device: str) -> dict:
    """The sequential graph on `qs` as one batch, ours and (when given) the official code's, greedy."""
    import agents
    from agents.config import RunConfig

    cfg = RunConfig(
        method="latent_mas", latent_steps=steps, max_new_tokens=max_new, batch_size=len(qs), threads=None
    )
    agents.run("sequential", m, qs[:1], config=cfg)  # warm-up
    t_ours, res = _timed(lambda: agents.run("sequential", m, qs, config=cfg))
    row = {"batch": len(qs), "ours_s": t_ours, "tokens_ours": sum(r.output_tokens for r in res)}
    if wrapper is None:
        return row | {"official_s": None}
    from official_adapter import greedy

    counts = greedy(wrapper)
    args = Namespace(
        prompt="sequential", think=False, task="gsm8k", device=device, device2=device, max_new_tokens=max_new
    )
    method = off.latent_mas.LatentMASMethod(
        wrapper, latent_steps=steps, judger_max_new_tokens=max_new, generate_bs=len(qs), args=args
    )
    rows = [{"question": q, "gold": "0", "solution": ""} for q in qs]
    method.run_batch(rows[:1])  # warm-up
    counts.clear()
    t_off, _ = _timed(lambda: method.run_batch(rows))
    return row | {"official_s": t_off, "ratio": t_off / t_ours, "tokens_official": sum(counts)}


def text_vs_latent(m, qs: list[str], steps: int, max_new: int) -> dict:
    """Ours: latent_mas against text_mas on the same batch, items per second and tokens decoded."""
    import agents
    from agents.config import RunConfig

    out = {"batch": len(qs)}
    for method in ("latent_mas", "text_mas"):
        cfg = RunConfig(
            method=method, latent_steps=steps, max_new_tokens=max_new, batch_size=len(qs), threads=None
        )
        t, res = _timed(lambda cfg=cfg: agents.run("sequential", m, qs, config=cfg))
        tokens = sum(s.output_tokens or 0 for r in res for s in r.agents)
        out[method] = {"s": t, "items_per_s": len(qs) / t, "tokens_decoded": tokens}
    out["speedup"] = out["text_mas"]["s"] / out["latent_mas"]["s"]
    return out


def find_official(given: str | None):
    """The official code loaded from the first checkout found, or (None, why not)."""
    from official_adapter import check_official_dir, load_official

    path = (
        given
        or os.environ.get("LATENTMAS_OFFICIAL")
        or (str(ROOT / "official") if (ROOT / "official").is_dir() else None)
    )
    try:
        check_official_dir(path)
    except ValueError as err:
        return None, str(err)
    if "matplotlib" not in sys.modules:  # the official models module imports pyplot for its plots only
        try:
            import matplotlib.pyplot  # noqa: F401
        except ImportError:
            for name in ("matplotlib", "matplotlib.pyplot"):
                sys.modules[name] = types.ModuleType(name)
    return load_official(path), None


def check_shape(shape: str, cfg: GpuCheck, device: str, dtype, off, started: float) -> dict:
    """Every section on one shape, each skipped (with the reason) once the time budget is spent."""
    import torch

    from agents.prompts import PromptSet

    t_build, m = _timed(lambda: build(shape, cfg.dry_run, device, dtype))
    res: dict = {"build_s": t_build, "params": sum(p.numel() for p in m.model.parameters())}
    wrapper = official_wrapper(off, m, torch.device(device)) if off else None
    if off:
        from official_adapter import use_prompts

        prompts = PromptSet.load("default")
        use_prompts(off, lambda role, q: prompts.messages(role, q, [], False))
    planner = PromptSet.load("default")
    sections = [("latent", b) for b in map(int, cfg.batches.split(","))]
    sections += [("e2e", b) for b in map(int, cfg.e2e_batches.split(","))] + [("text_vs_latent", 0)]
    for kind, b in sections:
        key = f"{kind}_b{b}" if b else kind
        if time.perf_counter() - started > cfg.budget_s:
            res[key] = {"skipped": f"time budget of {cfg.budget_s:.0f} s spent"}
            continue
        qs = questions(b or int(cfg.e2e_batches.split(",")[0]))
        try:
            if kind == "latent":
                msgs = [planner.messages("planner", q, [], False) for q in qs]
                res[key] = latent_loop(m, wrapper, msgs, cfg.steps, cfg.repeats)
            elif kind == "e2e":
                res[key] = end_to_end(m, off, wrapper, qs, cfg.steps, cfg.max_new_tokens, device)
            else:
                res[key] = text_vs_latent(m, qs, cfg.steps, cfg.max_new_tokens)
        except torch.cuda.OutOfMemoryError as err:
            res[key] = {"skipped": f"out of GPU memory: {str(err).splitlines()[0][:200]}"}
            torch.cuda.empty_cache()
        print(f"{shape} {key}: {json.dumps(res[key])[:300]}", flush=True)
    if torch.cuda.is_available():
        res["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    del m, wrapper
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    return res


def markdown(report: dict) -> str:
    """The report as tables: one row per section and shape."""
    lines = [
        f"# GPU check: {report['device']}",
        "",
        f"torch {report['torch']}, transformers {report['transformers']}, dtype {report['dtype']}, "
        f"{report['steps']} latent steps, {report['max_new_tokens']} new tokens per decoding agent; official: "
        f"{report['official']}. Random weights of real shapes: speed only.",
        "",
        "| shape | section | batch | official s | ours s | official / ours | thought rel diff | notes |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for shape, res in report["shapes"].items():
        for key, r in res.items():
            if isinstance(r, dict):
                lines.append(_row(shape, key, r))
        lines.append(
            f"| {shape} | build | | | {res['build_s']:.1f} | | | {res['params'] / 1e6:,.1f} M parameters, "
            f"peak {res.get('peak_gib', 0):.1f} GiB |"
        )
    return "\n".join(lines) + "\n"


def _row(shape: str, key: str, r: dict) -> str:
    """One table row of a section's result."""
    num = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
    if "skipped" in r:
        return f"| {shape} | {key} | | | | | | skipped: {r['skipped']} |"
    if key == "text_vs_latent":
        lm, tm = r["latent_mas"], r["text_mas"]
        return (
            f"| {shape} | latent_mas vs text_mas | {r['batch']} | | {lm['s']:.3f} | | | text_mas {tm['s']:.3f} s "
            f"({tm['tokens_decoded']} tokens), latent_mas {lm['tokens_decoded']} tokens: {r['speedup']:.2f}x |"
        )
    note = (
        f"tokens ours {r['tokens_ours']}, official {r.get('tokens_official', '-')}"
        if "tokens_ours" in r
        else ""
    )
    return (
        f"| {shape} | {key.split('_b')[0]} | {r['batch']} | {num(r.get('official_s'), '.3f')} | {r['ours_s']:.3f} "
        f"| {num(r.get('ratio'), '.2f')} | {num(r.get('thought_max_rel_diff'), '.1e')} | {note} |"
    )


def run(ns) -> int:
    cfg = config_from_args(GpuCheck, ns)
    started = time.perf_counter()
    import torch
    import transformers

    if cfg.dry_run:
        cfg.batches, cfg.e2e_batches, cfg.steps, cfg.max_new_tokens, cfg.repeats = "1,4", "4", 2, 4, 1
        device, dtype = "cpu", torch.float32
    elif not torch.cuda.is_available():
        print("gpu check: no CUDA device here; run it on a GPU machine, or pass --dry-run", file=sys.stderr)
        return 2
    else:
        device, dtype = "cuda", torch.bfloat16
    out = Path(cfg.out or os.environ.get("OUT") or ROOT / "runs" / "gpu-check")
    out.mkdir(parents=True, exist_ok=True)
    off, why = find_official(cfg.official)
    report = {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "CPU (dry run)",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "dtype": str(dtype).removeprefix("torch."),
        "steps": cfg.steps,
        "max_new_tokens": cfg.max_new_tokens,
        "official": f"{off.commit[:12]} ({off.root})" if off else f"not run: {why.rstrip('.')}",
        "dry_run": cfg.dry_run,
        "shapes": {},
    }
    for shape in cfg.shapes.split(","):
        report["shapes"][shape] = check_shape(shape, cfg, device, dtype, off, started)
        (out / "report.json").write_text(json.dumps(report, indent=1))  # kept if a later shape fails
    report["wall_s"] = time.perf_counter() - started
    (out / "report.json").write_text(json.dumps(report, indent=1))
    (out / "report.md").write_text(markdown(report))
    print(markdown(report))
    print(f"wrote {out / 'report.json'} and {out / 'report.md'} in {report['wall_s']:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script("bench/gpu/check.py", __doc__, partial(add_config_arguments, cls=GpuCheck), run, argv)


if __name__ == "__main__":
    raise SystemExit(main())
