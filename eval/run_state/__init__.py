"""A run's state in its `--out` folder, in one room with one entry: `RunStore` (what `evaluate` goes
through: check the folder, resume, write the manifest, append records under the lock) and
`load_results` (the one reader of a run's records, for the report and the benchmark scripts).

- `eval.run_state.store`: `RunStore`, the folder checks and the manifest a run starts with.
- `eval.run_state.files`: files that never lose a valid record (opened without following a link, the
  run lock, quarantine of lines that are not records, the manifest's reading and atomic writing).
- `eval.run_state.records`: what makes a results line a record of this run (run id, checksum, schema).

The faults a resume survives or refuses are listed in docs/resume-faults.md.
"""

from eval.run_state.files import LineTooLong, RunDirectoryBusy, RunLock, RunStoreError, read_manifest
from eval.run_state.records import CONTEXT_OVERFLOW, RunExpectation, seal
from eval.run_state.store import RunStore, check_out_dir, load_results, run_manifest, shard

__all__ = [
    "CONTEXT_OVERFLOW",
    "LineTooLong",
    "RunDirectoryBusy",
    "RunExpectation",
    "RunLock",
    "RunStore",
    "RunStoreError",
    "check_out_dir",
    "load_results",
    "read_manifest",
    "run_manifest",
    "seal",
    "shard",
]
