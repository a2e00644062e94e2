"""Load on `latentworks serve`: N concurrent clients against the same requests sent one at a time.

    python bench/speed/serve_load.py --model builtin:arith-mini --clients 16,64 --requests 256 \
        --out bench/results/serve_load_arith_mini

The server runs in its own process (`python -m latentworks serve`, one torch thread by default) and is
driven over raw HTTP in OpenAI's chat-completions format. For each phase the bench reports throughput
(requests/s), p50/p99 latency, errors, the batches the server ran, and how many answers differ from the
one-at-a-time answer of the same question (greedy batching must change none). The one-at-a-time phase
runs first against the same server, so both rates share its settings and the machine's load at the time.
Writes <out>.json, <out>.md and <out>.png.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from latent.args import UsageError, add_config_arguments, config_from_args, run_script  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TARGET_SPEEDUP = 3.0  # the serving target: 64 concurrent clients at >= 3x the one-at-a-time rate


@dataclass
class ServeLoadBench:
    """Flags of the serving load bench."""

    model: str = field(default="builtin:arith-mini", metadata={"help": "load_model name or path"})
    pipeline: str = field(default="latent_mas:sequential", metadata={"help": "served model id to ask"})
    clients: str = field(default="16,64", metadata={"help": "comma-separated concurrent client counts"})
    requests: int = field(default=256, metadata={"help": "requests per phase (built-in arith questions)"})
    max_tokens: int = field(default=64, metadata={"help": "max_tokens of every request"})
    latent_steps: int = field(default=20, metadata={"help": "server's latent thoughts per agent"})
    max_batch: int = field(default=32, metadata={"help": "server's --max-batch"})
    batch_wait_ms: float = field(default=10.0, metadata={"help": "server's --batch-wait-ms"})
    threads: int = field(default=1, metadata={"help": "server's torch CPU threads"})
    out: str = field(
        default="bench/results/serve_load_arith_mini", metadata={"help": "report path without suffix"}
    )

    def __post_init__(self) -> None:
        if self.requests < max(self.client_counts):
            raise UsageError(f"--requests {self.requests} is smaller than the most clients")

    @property
    def client_counts(self) -> list[int]:
        return [int(c) for c in self.clients.split(",")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(args: ServeLoadBench, port: int) -> subprocess.Popen:
    """`python -m latentworks serve` for the one method asked; returns once /health answers."""
    import httpx

    method = args.pipeline.split(":")[0]
    cmd = [sys.executable, "-m", "latentworks", "serve", "--model", args.model, "--methods", method]
    cmd += ["--port", str(port), "--threads", str(args.threads), "--max-batch", str(args.max_batch)]
    cmd += ["--batch-wait-ms", str(args.batch_wait_ms), "--latent-steps", str(args.latent_steps)]
    cmd += ["--max-queue", str(4 * args.requests), "-q"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": str(args.threads)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    deadline = time.monotonic() + 600
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the server did not start (exit status {proc.poll()})")
        time.sleep(0.5)


async def _ask(client, pipeline: str, question: str, max_tokens: int) -> dict:
    body = {"model": pipeline, "messages": [{"role": "user", "content": question}], "max_tokens": max_tokens}
    t0 = time.perf_counter()
    try:
        r = await client.post("/v1/chat/completions", json=body)
        ok = r.status_code == 200
        text = r.json()["choices"][0]["message"]["content"] if ok else None
        error = None if ok else f"{r.status_code}: {r.text[:200]}"
    except Exception as err:  # a transport failure counts as an error, the phase goes on
        text, error = None, f"{type(err).__name__}: {err}"
    return {"question": question, "text": text, "error": error, "latency_s": time.perf_counter() - t0}


async def run_phase(url: str, args: ServeLoadBench, questions: list[str], clients: int) -> tuple[list, float]:
    """`clients` workers, each sending its next request when its last one is answered (a closed loop)."""
    import httpx

    records: list[dict | None] = [None] * len(questions)
    next_index = iter(range(len(questions)))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits) as client:

        async def worker() -> None:
            for i in next_index:
                records[i] = await _ask(client, args.pipeline, questions[i], args.max_tokens)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - t0
    return records, wall


def summarize(records: list[dict], wall: float, reference: list[dict] | None, batches: dict) -> dict:
    """Throughput, latency percentiles, errors and answers that differ from the one-at-a-time run."""
    import numpy as np

    lat = np.array([r["latency_s"] for r in records])
    differ = [
        {"question": r["question"], "alone": ref["text"], "served": r["text"]}
        for r, ref in zip(records, reference or records)
        if r["error"] is None and r["text"] != ref["text"]
    ]
    return {
        "requests": len(records),
        "errors": sum(r["error"] is not None for r in records),
        "first_errors": [r["error"] for r in records if r["error"]][:3],
        "wall_s": round(wall, 3),
        "req_per_s": round(len(records) / wall, 3),
        "p50_ms": round(float(np.percentile(lat, 50)) * 1000, 1),
        "p99_ms": round(float(np.percentile(lat, 99)) * 1000, 1),
        "differ_from_alone": len(differ),
        "differing": differ[:5],
        **batches,
    }


def _batches(url: str, before: dict) -> dict:
    import httpx

    now = httpx.get(f"{url}/health").json()
    n = now["batches"] - before.get("batches", 0)
    served = now["requests"] - before.get("requests", 0)
    return {"batches": n, "mean_batch": round(served / max(n, 1), 2), "largest_batch": now["largest_batch"]}


def _phase(
    args: ServeLoadBench, url: str, questions: list[str], clients: int, reference
) -> tuple[dict, list]:
    import httpx

    before = httpx.get(f"{url}/health").json()
    records, wall = asyncio.run(run_phase(url, args, questions, clients))
    row = {"clients": clients, **summarize(records, wall, reference, _batches(url, before))}
    print(
        f"{clients:>3} clients: {row['req_per_s']:7.2f} req/s, p50 {row['p50_ms']:8.1f} ms, p99 "
        f"{row['p99_ms']:8.1f} ms, errors {row['errors']}, mean batch {row['mean_batch']}, "
        f"differ from alone {row['differ_from_alone']}",
        flush=True,
    )
    return row, records


def measure(args: ServeLoadBench, url: str, questions: list[str]) -> list[dict]:
    """One at a time, each client count, then one at a time again, all against the same server: the
    load of other jobs on a shared machine drifts, so the baseline is the mean of the two sequential runs."""
    first, alone = _phase(args, url, questions, 1, None)
    rows = [_phase(args, url, questions, c, alone)[0] for c in args.client_counts]
    last, _ = _phase(args, url, questions, 1, alone)
    baseline = (first["req_per_s"] + last["req_per_s"]) / 2
    first["when"], last["when"] = "before", "after"
    for row in (first, *rows, last):
        row["speedup"] = round(row["req_per_s"] / baseline, 2)
    return [first, *rows, last]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs visible, Python {platform.python_version()}"


def plot(rows: list[dict], path: str, title: str) -> None:
    """Throughput and p50/p99 latency against concurrent clients (1 = one at a time)."""
    from latent.plotting import figure, save_figure

    fig, (ax1, ax2) = figure(ncols=2, figsize=(10, 4), extra="eval")
    labels = [str(r["clients"]) + (f" ({r['when']})" if "when" in r else "") for r in rows]
    ax1.bar(labels, [r["req_per_s"] for r in rows], color="tab:blue")
    ax1.set_xlabel("concurrent clients")
    ax1.set_ylabel("requests / s")
    ax1.set_title("throughput")
    for key, marker in (("p50_ms", "o"), ("p99_ms", "s")):
        ax2.plot(labels, [r[key] / 1000 for r in rows], marker=marker, label=key.split("_")[0])
    ax2.set_xlabel("concurrent clients")
    ax2.set_ylabel("latency (s)")
    ax2.set_title("latency")
    ax2.legend()
    fig.suptitle(title)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def write_report(args: ServeLoadBench, rows: list[dict], command: str) -> None:
    """<out>.json (settings, machine, rows) and <out>.md (the table and whether the target was met)."""
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report = {"settings": asdict(args), "machine": machine(), "command": command, "rows": rows}
    out.with_suffix(".json").write_text(json.dumps(report, indent=1))
    top = max(rows, key=lambda r: r["clients"])
    met = top["errors"] == 0 and top["speedup"] >= TARGET_SPEEDUP
    lines = [
        f"# Serving load: {args.model}, {args.pipeline}",
        "",
        f"Command: `{command}`",
        f"Machine: {machine()}; server torch threads: {args.threads}.",
        f"Server: --max-batch {args.max_batch} --batch-wait-ms {args.batch_wait_ms} --latent-steps "
        f"{args.latent_steps}; every request max_tokens {args.max_tokens}; {args.requests} requests per phase.",
        "",
        "| clients | req/s | vs one at a time (mean of before/after) | p50 ms | p99 ms | errors | batches | mean batch | differ from alone |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['clients']}{' (' + r['when'] + ')' if 'when' in r else ''} | {r['req_per_s']:.2f} | x{r['speedup']:.2f} | {r['p50_ms']:.1f} | "
            f"{r['p99_ms']:.1f} | {r['errors']} | {r['batches']} | {r['mean_batch']} | {r['differ_from_alone']} |"
        )
    verdict = "met" if met else "NOT met"
    lines += [
        "",
        f"Target ({top['clients']} clients, 0 errors, >= {TARGET_SPEEDUP}x one at a time): {verdict}.",
    ]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


def run(ns: argparse.Namespace) -> int:
    args = config_from_args(ServeLoadBench, ns)
    from eval.tasks import load_task

    questions = [it.question for it in load_task("arith", limit=args.requests).items]
    port = _free_port()
    server = start_server(args, port)
    try:
        url = f"http://127.0.0.1:{port}"
        asyncio.run(run_phase(url, args, questions[: args.max_batch], args.max_batch))  # warm-up
        rows = measure(args, url, questions)
    finally:
        server.terminate()
        server.wait(30)
    command = "python bench/speed/serve_load.py " + " ".join(getattr(ns, "argv_", sys.argv[1:]))
    write_report(args, rows, command)
    plot(
        rows,
        str(Path(args.out).with_suffix(".png")),
        f"{args.model}, {args.pipeline}, {args.threads} thread(s)",
    )
    print(f"wrote {args.out}.json, .md, .png")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_script(
        "bench/speed/serve_load.py", __doc__, partial(add_config_arguments, cls=ServeLoadBench), run, argv
    )


if __name__ == "__main__":
    raise SystemExit(main())
