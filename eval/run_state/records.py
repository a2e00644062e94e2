"""What makes a results line a record of *this* run: a run id, a checksum, the item set and a schema.

Every record the runner writes carries the run's `run_id` (a random id the manifest holds) and a
`check`: the first 16 hex digits of the sha256 of the record's canonical JSON without `check`. On
resume (and in `latentworks report`) a line counts only if it is a JSON object that

- has the schema of a record (types of `item_id`, `method`, `correct`, `prediction`, tokens, time,
  agents, tests; an `error`, the reason an item could not run, only as a string on a wrong record),
- belongs to the run: its `run_id` is the manifest's, its item is in the task's item set, its method
  is one the run evaluates, its task and graph names are the run's,
- is intact: its `check` matches its content.

Records written before records carried a run id (a manifest without `record_format`) have neither
field; in such a run they are accepted when schema, item set, method, task and graph agree, and every
record written by a later resume is sealed. In a run whose manifest has `record_format` 2, a record
without a run id is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass

from agents.config import METHODS

RECORD_FORMAT = 2  # records carry `run_id` and `check`
SEAL_FIELDS = ("run_id", "check")
CONTEXT_OVERFLOW = "context overflow: "  # how the `error` of an item past the model's context starts


def checksum(rec: dict) -> str:
    """sha256 (16 hex digits) of the record's canonical JSON, `check` left out."""
    body = {k: v for k, v in rec.items() if k != "check"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def seal(rec: dict, run_id: str) -> dict:
    """The record with this run's id and its checksum added (what the runner writes)."""
    rec = {**rec, "run_id": run_id}
    rec["check"] = checksum(rec)
    return rec


def new_run_id() -> str:
    """A random id for a new run (16 hex digits), written into the manifest and every record."""
    return os.urandom(8).hex()


def run_id_of(manifest: dict) -> str:
    """The manifest's run id; a manifest from before records were sealed gets one derived from its
    identity and creation time, so every process resuming it seals records with the same id."""
    if isinstance(manifest.get("run_id"), str):
        return manifest["run_id"]
    text = json.dumps([manifest.get("identity"), manifest.get("created")], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunExpectation:
    """What a record of one run must agree with. `None` fields are not checked."""

    run_id: str | None = None
    legacy: bool = False  # the manifest predates sealed records: unsealed records are accepted
    item_ids: frozenset[str] | None = None
    methods: tuple[str, ...] | None = None
    task: str | None = None
    graph: str | None = None

    @classmethod
    def from_manifest(cls, manifest: dict, item_ids=None) -> RunExpectation:
        """The expectation a manifest implies; `item_ids` (the task's, when loaded) win over its list."""
        ident = manifest.get("identity") or {}
        ids = item_ids if item_ids is not None else manifest.get("item_ids")
        methods = ident.get("methods")
        return cls(
            run_id=run_id_of(manifest),
            legacy=manifest.get("record_format", 1) < RECORD_FORMAT,
            item_ids=frozenset(ids) if ids is not None else None,
            methods=tuple(methods) if isinstance(methods, list) else None,
            task=manifest.get("task_name"),
            graph=manifest.get("graph_name"),
        )


def json_damage(err: ValueError | RecursionError) -> str:
    """What `json.loads` met, in a few words: the parser's message, bad UTF-8, an integer of more than
    4,300 digits (a `ValueError`) or nesting deeper than the parser's recursion limit."""
    if isinstance(err, RecursionError):
        return "nested too deeply"
    return getattr(err, "msg", None) or str(err).split(";")[0][:120]


def parse_line(raw: bytes) -> tuple[object, str | None]:
    """(the JSON value of one results line, None), or (None, why) when it is not JSON; never raises.

    Lines are parsed as bytes, as they are stored, so resume and report read them alike (a UTF-8
    byte-order mark an editor put before a record does not make it a different record for either).
    """
    try:
        return json.loads(raw), None
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError, the digit limit
        return None, f"not JSON ({json_damage(e)})"


def read_line(raw: bytes, expect: RunExpectation | None) -> tuple[object, str | None]:
    """(the record, None) for a usable results line, or (None, why) for any other: the one reading of
    a line that resume, the resume check and `latentworks report` all share.

    Without `expect`, only the structure is checked (a JSON object with a string `item_id` and `method`).
    """
    if not raw.endswith(b"\n"):
        return None, "torn line (no newline)"
    rec, why = parse_line(raw)
    if why is None:
        if expect is not None:
            why = record_problem(rec, expect)
        elif not isinstance(rec, dict):
            why = f"not a JSON object but {type(rec).__name__}"
        elif not isinstance(rec.get("item_id"), str) or not isinstance(rec.get("method"), str):
            why = "no string item_id and method"
    return (None, why) if why is not None else (rec, None)


# Fields a manifest must have the type of, when present (what resume and report read).
_MANIFEST_TYPES = {
    "identity": dict,
    "run_id": str,
    "record_format": int,
    "item_ids": list,
    "task_name": str,
    "graph_name": str,
    "config": dict,
    "resumes": list,
    "model_fingerprint": str,
    "created": str,
    "dtype_used": str,
}


def manifest_problem(manifest: object) -> str | None:
    """Why a parsed manifest cannot describe a run (a field of the wrong type), or None."""
    if not isinstance(manifest, dict):
        return f"not a JSON object but {type(manifest).__name__}"
    if not isinstance(manifest.get("identity"), dict):
        return "no `identity` mapping"
    for key, typ in _MANIFEST_TYPES.items():
        value = manifest.get(key)
        if key in manifest and (not isinstance(value, typ) or isinstance(value, bool)):
            return f"`{key}` is {type(value).__name__}, not {typ.__name__}"
    if "item_ids" in manifest and not all(isinstance(i, str) for i in manifest["item_ids"]):
        return "`item_ids` is not a list of strings"
    run = manifest.get("config", {}).get("run")
    if run is not None and not isinstance(run, dict):
        return f"`config.run` is {type(run).__name__}, not dict"
    return None


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def schema_problem(rec: dict) -> str | None:
    """Why `rec` does not have the shape of a results record, or None."""
    if not isinstance(rec.get("item_id"), str) or not rec["item_id"]:
        return "no string item_id"
    if rec.get("method") not in METHODS:
        return f"method {rec.get('method')!r} is not one of {', '.join(METHODS)}"
    if "correct" not in rec:
        return "no `correct` field"
    if not isinstance(rec["correct"], bool):
        return f"`correct` is {rec['correct']!r}, not true/false"
    if not isinstance(rec.get("prediction"), str):
        return "`prediction` is not a string"
    if not _count(rec.get("output_tokens")):
        return f"`output_tokens` is {rec.get('output_tokens')!r}, not a count"
    if not _number(rec.get("wall_s")) or rec["wall_s"] < 0:
        return f"`wall_s` is {rec.get('wall_s')!r}, not a non-negative number"
    agents = rec.get("agents")
    if not isinstance(agents, list) or not all(
        isinstance(a, dict) and _count(a.get("latent_steps")) for a in agents
    ):
        return "`agents` is not a list of agent entries with latent_steps"
    if "error" in rec and not (isinstance(rec["error"], str) and rec["error"] and rec["correct"] is False):
        return "`error` is not a reason string on a record scored wrong"
    if "tests_total" in rec or "tests_passed" in rec:
        total, passed = rec.get("tests_total"), rec.get("tests_passed")
        if not (_count(total) and _count(passed) and passed <= total):
            return f"tests_passed/tests_total {passed!r}/{total!r} are not counts with passed <= total"
    return None


def record_problem(rec: object, expect: RunExpectation) -> str | None:
    """Why `rec` (a parsed JSON line) is not a usable record of the run `expect` describes, or None."""
    if not isinstance(rec, dict):
        return f"not a JSON object but {type(rec).__name__}"
    why = schema_problem(rec)
    if why:
        return why
    sealed = [k for k in SEAL_FIELDS if k in rec]
    if sealed and len(sealed) < len(SEAL_FIELDS):
        return f"incomplete seal (has {sealed[0]} only)"
    if sealed:
        if rec["check"] != checksum(rec):
            return "checksum mismatch (the line was changed after it was written)"
        if expect.run_id is not None and rec["run_id"] != expect.run_id:
            return f"record of another run (run_id {rec['run_id']!r}, this run is {expect.run_id!r})"
    elif expect.run_id is not None and not expect.legacy:
        return "no run_id/check (not written by this run)"
    if expect.item_ids is not None and rec["item_id"] not in expect.item_ids:
        return f"item {rec['item_id']!r} is not in this run's task"
    if expect.methods is not None and rec["method"] not in expect.methods:
        return f"method {rec['method']!r} is not evaluated in this run"
    if expect.task is not None and rec.get("task") != expect.task:
        return f"task {rec.get('task')!r}, this run's is {expect.task!r}"
    if expect.graph is not None and rec.get("graph") != expect.graph:
        return f"graph {rec.get('graph')!r}, this run's is {expect.graph!r}"
    return None
