"""Every results table in the README, BENCHMARKS.md and the topic reports under docs/results/ says where its
numbers come from.

A table either carries a `committed report` (or `report`) column, or is followed by a `Source:` line. Each
link there must lead to a file (or a folder of files) that is committed: it exists, git tracks it, and it does
not sit in the unversioned `runs/` folder. A table whose run left no committed report says so in words the
reader can act on: `Source: no committed report: <why, at least four words>` (a column cell: `none: <why>`);
a table whose numbers are not measurements says `Source: not a measurement: <what it lists>`, and a table
with no digit in its body (a list of packages or options) needs nothing.
"""

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOPIC_REPORTS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs" / "results").glob("*.md"))
PAGES = [
    "README.md",
    "BENCHMARKS.md",
    "finetune/dlm/README.md",
    "families/llapdiff/README.md",
    *TOPIC_REPORTS,
]
LINK_RE = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
RULE_RE = re.compile(r"^\|[\s:|-]*-{3,}")
SOURCE_COLUMNS = ("committed report", "report")
NO_REPORT_RE = re.compile(r"(?:no committed report|not a measurement): *(\S+(?: +\S+){3,})")
NONE_CELL_RE = re.compile(r"^none: *(\S+(?: +\S+){2,})")


@cache
def tracked() -> frozenset[str] | None:
    """Paths git tracks (staged included), or None outside a git checkout (then existence is checked)."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return frozenset(out.stdout.splitlines())


def tables(markdown: str) -> list[tuple[int, list[str], str]]:
    """(first line number, table lines, the first non-blank line after the table) for each table outside
    code fences."""
    lines = markdown.splitlines()
    found, i, in_code = [], 0, False
    while i < len(lines):
        if lines[i].startswith("```"):
            in_code = not in_code
        if not in_code and lines[i].startswith("|") and i + 1 < len(lines) and RULE_RE.match(lines[i + 1]):
            start = i
            while i < len(lines) and lines[i].startswith("|"):
                i += 1
            after = next((line for line in lines[i:] if line.strip()), "")
            found.append((start + 1, lines[start:i], after))
            continue
        i += 1
    return found


def cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def link_problems(page: Path, text: str) -> list[str]:
    """Links in `text` that do not lead to committed files."""
    bad = []
    for target in LINK_RE.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.partition("#")[0]).resolve()
        rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
        files = tracked()
        if "runs" in Path(rel).parts:
            bad.append(f"{target}: runs/ is not versioned")
        elif not path.exists():
            bad.append(f"{target}: no such file")
        elif files is not None and rel not in files and not any(f.startswith(rel + "/") for f in files):
            bad.append(f"{target}: not committed (git does not track it)")
    return bad


def table_problems(page: Path, start: int, rows: list[str], after: str) -> list[str]:
    """What keeps one table from naming a committed source."""
    where = f"{page.relative_to(ROOT)}:{start}"
    if not any(re.search(r"\d", row) for row in rows[2:]):
        return []  # no number in the body (a list of packages or options): nothing to trace
    header = [c.lower() for c in cells(rows[0])]
    column = next((header.index(c) for c in SOURCE_COLUMNS if c in header), None)
    if column is not None:
        bad = []
        for row in rows[2:]:
            cell = cells(row)[column] if column < len(cells(row)) else ""
            if LINK_RE.search(cell):
                bad += [f"{where} row '{cells(row)[0][:40]}': {p}" for p in link_problems(page, cell)]
            elif not NONE_CELL_RE.match(cell):
                bad.append(
                    f"{where} row '{cells(row)[0][:40]}': source cell '{cell}' is neither a link nor 'none: <why>'"
                )
        return bad
    if not after.startswith("Source:"):
        return [
            f"{where}: no 'Source:' line after the table (a committed report, or 'no committed report: <why>')"
        ]
    bad = [f"{where}: {p}" for p in link_problems(page, after)]
    if not LINK_RE.search(after) and not NO_REPORT_RE.search(after):
        bad.append(
            f"{where}: '{after[:60]}' links no report and gives no reason ('no committed report: <why>')"
        )
    return bad


def test_pages_have_tables():
    """The page keeps a table per headline result; the topic reports keep the rest (moved there, not lost)."""
    counts = {p: len(tables((ROOT / p).read_text())) for p in PAGES}
    assert counts["BENCHMARKS.md"] >= 15 and counts["README.md"] >= 1, counts
    assert len(TOPIC_REPORTS) >= 10 and sum(counts[p] for p in TOPIC_REPORTS) >= 100, counts


@pytest.mark.parametrize("name", PAGES)
def test_every_table_names_a_committed_source(name):
    page = ROOT / name
    bad = [
        p for start, rows, after in tables(page.read_text()) for p in table_problems(page, start, rows, after)
    ]
    assert not bad, f"{len(bad)} table(s) without a committed source:\n" + "\n".join(bad)


def test_the_check_catches_each_fault(tmp_path):
    """Planted faults: a missing file, a runs/ link, a bare 'no committed report', no Source line, a bad
    column cell; and the accepted forms pass."""
    page = ROOT / "BENCHMARKS.md"
    rows = ["| a | b |", "|---|---|", "| x | 1 |"]
    ok_link = "Source: [report](finetune/dlm/results/lbf_smollm2_grpo24/results.md)"
    assert table_problems(page, 1, rows, ok_link) == []
    assert (
        table_problems(page, 1, rows, "Source: no committed report: the run predates versioned reports") == []
    )
    assert "no such file" in table_problems(page, 1, rows, "Source: [r](bench/results/missing.json)")[0]
    assert "runs/" in table_problems(page, 1, rows, "Source: [r](runs/dlm/results.md)")[0]
    assert "gives no reason" in table_problems(page, 1, rows, "Source: no committed report")[0]
    assert table_problems(page, 1, rows, "Source: no committed report: too short")
    assert table_problems(page, 1, rows, "Source: not a measurement: the baselines we ship") == []
    assert table_problems(page, 1, rows, "Source: not a measurement")
    assert "no 'Source:'" in table_problems(page, 1, rows, "Some prose after the table.")[0]
    assert (
        table_problems(page, 1, ["| package | what |", "|---|---|", "| latent | hidden states |"], "") == []
    )
    col = ["| result | committed report |", "|---|---|"]
    assert table_problems(page, 1, [*col, "| r 1 | none: runs/ not versioned then |"], "") == []
    assert table_problems(page, 1, [*col, "| r 1 | - |"], "")
    assert table_problems(page, 1, [*col, "| r 1 | [x](bench/results/nope.json) |"], "")
