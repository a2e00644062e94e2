"""The README fits a screen, its Python snippets run as written (on the shipped built-in model), BENCHMARKS.md
is a page people read, and every relative link in the README, in docs/ (the topic reports under docs/results/
included) and in BENCHMARKS.md leads to a file and heading that exist."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BENCHMARKS = ROOT / "BENCHMARKS.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
TOPIC_REPORTS = sorted((ROOT / "docs" / "results").glob("*.md"))
SNIPPET_RE = re.compile(r"```python\n(.*?)```", flags=re.S)
SNIPPETS = [
    (f"{page.stem}{i + 1}", code)
    for page in (README, *DOCS)
    for i, code in enumerate(SNIPPET_RE.findall(page.read_text()))
]
LINK_RE = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def slugs(markdown: str) -> set[str]:
    """The anchors a markdown renderer gives the headings (GitHub's rule: the heading's text, lower-cased,
    punctuation dropped, each space a hyphen, a repeated slug numbered -1, -2, ...), plus explicit ids."""
    seen: dict[str, int] = {}
    out = set(re.findall(r'<a (?:id|name)="([^"]+)"', markdown))
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = re.match(r"(#{1,6}) +(.*?) *#*$", line)
        if in_code or not m:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(2))  # a link in a heading reads as its text
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(page: Path, text: str) -> list[str]:
    """Relative links in `text` (found in `page`) whose file or heading does not exist."""
    bad = []
    for target in LINK_RE.findall(text):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{page.name}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in slugs(dest.read_text()):
            bad.append(f"{page.name}: {target} (no such heading in {dest.name})")
    return bad


def summary_table(markdown: str) -> str:
    """BENCHMARKS.md's summary: from its '## Summary' heading to the next '## ' heading."""
    start = markdown.index("\n## Summary")
    return markdown[start : markdown.index("\n## ", start + 1)]


def test_readme_fits_a_screen_to_the_first_result():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; keep it to 150 (move detail to docs/)"
    head = "\n".join(lines[:60])
    assert "## Quick start" in head
    assert "latentworks demo" in head and "pip install torch==2.13.0" in head
    assert re.search(r"\| latent_mas \|\s+32 \|", head), "the demo's table must be in the first 60 lines"


def test_ci_installs_and_tests_exactly_as_the_readme_says():
    ci = (ROOT / ".ci" / "run").read_text()
    block = ci.split('# --- README: "Run the tests"')[1].split("# ---")[0]
    steps = [line for line in block.splitlines()[1:] if line.strip() and not line.startswith("echo")]
    assert len(steps) == 3
    readme = README.read_text()
    section = readme[readme.index("## Running the tests") :].splitlines()
    for step in steps:
        assert step in section, f".ci/run line not in README's 'Running the tests': {step}"


def test_links_resolve():
    bad = broken_links(README, README.read_text())
    for page in (*DOCS, *TOPIC_REPORTS, BENCHMARKS):
        bad += broken_links(page, page.read_text())
    assert not bad, "\n".join(bad)


def test_benchmarks_is_a_page_people_read():
    """BENCHMARKS.md holds the headline results only: at most 400 lines, none over 400 characters (history and
    every supporting table live in the topic reports under docs/results/, which the page links)."""
    lines = BENCHMARKS.read_text().splitlines()
    long = [f"line {i}: {len(line)} characters" for i, line in enumerate(lines, 1) if len(line) > 400]
    assert len(lines) <= 400, f"BENCHMARKS.md has {len(lines)} lines; move detail to its topic report"
    assert not long, "BENCHMARKS.md lines over 400 characters:\n" + "\n".join(long)
    index = (ROOT / "docs" / "results" / "README.md").read_text()
    assert "docs/results/README.md" in BENCHMARKS.read_text(), "the page links the index of topic reports"
    unlisted = [p.name for p in TOPIC_REPORTS if p.name != "README.md" and f"]({p.name})" not in index]
    assert len(TOPIC_REPORTS) >= 10 and not unlisted, (
        f"topic reports missing from docs/results/README.md: {unlisted}"
    )


def test_benchmarks_summary_links_resolve():
    table = summary_table(BENCHMARKS.read_text())
    rows = [r for r in table.splitlines() if r.startswith("| ") and not r.startswith("| result")]
    assert len(rows) >= 10
    assert all("](#" in r for r in rows), "every summary row links to its section"
    assert not broken_links(BENCHMARKS, table), "\n".join(broken_links(BENCHMARKS, table))


def test_benchmarks_toc_resolves():
    text = BENCHMARKS.read_text()
    toc = text[text.index("## Contents") : text.index("\n## Summary")]
    assert toc.count("](#") >= 15
    assert not broken_links(BENCHMARKS, toc), "\n".join(broken_links(BENCHMARKS, toc))


def test_readme_has_python_snippets():
    assert len(SNIPPET_RE.findall(README.read_text())) >= 2
    assert len(SNIPPETS) >= 3


@pytest.mark.parametrize("code", [c for _, c in SNIPPETS], ids=[i for i, _ in SNIPPETS])
def test_snippet_runs(code, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # a snippet that wrote files would write them here
    exec(compile(code, "markdown snippet", "exec"), {"__name__": "readme"})
    assert list(tmp_path.iterdir()) == []


README_SNIPPETS = SNIPPET_RE.findall(README.read_text())


def expected_output(code: str) -> list[str] | None:
    """The lines a snippet says it prints: its `# prints:` comment and the comment lines that follow it."""
    lines = code.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("# prints:")), None)
    if start is None:
        return None
    out = [lines[start].removeprefix("# prints:").strip()]
    for line in lines[start + 1 :]:
        if not line.startswith("#"):
            break
        out.append(line.lstrip("#").strip())
    return out


@pytest.mark.parametrize("code", README_SNIPPETS, ids=[f"README{i + 1}" for i in range(len(README_SNIPPETS))])
def test_readme_snippets_print_what_the_readme_shows(code, tmp_path, monkeypatch, capsys):
    """Each README snippet, run verbatim on the built-in model, prints exactly its `# prints:` lines: a
    new user sees the answer the README promises (questions the built-in model was trained to answer)."""
    expected = expected_output(code)
    assert expected, "every README snippet shows what it prints in a `# prints:` comment under it"
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README snippet", "exec"), {"__name__": "readme"})
    printed = [ln.strip() for ln in capsys.readouterr().out.splitlines() if ln.strip()]
    assert printed == expected
