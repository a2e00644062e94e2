"""Offline retrieval corpus from text that ships with Python: stdlib docstrings and `pydoc_data` topics.

Each item is a (query, document) pair: the query is the docstring's first sentence/line and the
document is the rest. Items carry a *family* (a group of related stdlib modules, or "langref" for the
pydoc topics) so that in-distribution (ID) and out-of-distribution (OOD) splits are made by family.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)

# Module families; the demo trains on some families and holds others out as OOD.
FAMILIES: dict[str, tuple[str, ...]] = {
    "text": (
        "string",
        "re",
        "textwrap",
        "difflib",
        "unicodedata",
        "codecs",
        "html.parser",
        "locale",
        "gettext",
    ),
    "data": (
        "collections",
        "heapq",
        "bisect",
        "array",
        "json",
        "csv",
        "pickle",
        "copy",
        "enum",
        "dataclasses",
        "configparser",
        "shelve",
        "sqlite3",
        "zipfile",
        "tarfile",
        "gzip",
        "base64",
        "hashlib",
        "struct",
        "pprint",
        "reprlib",
        "graphlib",
        "zlib",
        "lzma",
        "bz2",
        "mimetypes",
        "plistlib",
        "dbm",
        "netrc",
        "quopri",
        "binascii",
        "hmac",
        "secrets",
    ),
    "os": (
        "os",
        "shutil",
        "pathlib",
        "glob",
        "tempfile",
        "io",
        "fnmatch",
        "stat",
        "filecmp",
        "subprocess",
        "platform",
        "sysconfig",
        "logging",
        "argparse",
        "zipimport",
        "getopt",
        "optparse",
        "shlex",
        "cmd",
        "pkgutil",
        "site",
        "trace",
        "cProfile",
        "pstats",
        "timeit",
        "warnings",
        "gc",
        "linecache",
        "tokenize",
        "py_compile",
        "compileall",
        "runpy",
        "code",
        "codeop",
        "pydoc",
        "webbrowser",
        "getpass",
        "curses",
    ),
    "functional": (
        "itertools",
        "functools",
        "operator",
        "contextlib",
        "abc",
        "typing",
        "inspect",
        "types",
        "weakref",
        "ast",
        "dis",
        "importlib",
        "pdb",
        "traceback",
        "unittest",
        "doctest",
    ),
    "net": (
        "urllib.request",
        "urllib.parse",
        "http.client",
        "http.server",
        "http.cookiejar",
        "email.message",
        "email.utils",
        "smtplib",
        "socket",
        "ssl",
        "ipaddress",
        "xml.dom.minidom",
        "xml.etree.ElementTree",
        "mailbox",
        "imaplib",
        "ftplib",
        "poplib",
        "socketserver",
        "xmlrpc.client",
    ),
    "concurrency": (
        "threading",
        "multiprocessing",
        "asyncio",
        "concurrent.futures",
        "queue",
        "sched",
        "selectors",
        "signal",
    ),
    "math": (
        "math",
        "cmath",
        "statistics",
        "decimal",
        "fractions",
        "random",
        "numbers",
        "datetime",
        "calendar",
        "time",
        "zoneinfo",
    ),
}


@dataclass
class Pair:
    """One retrieval item."""

    query: str
    document: str
    family: str
    source: str  # qualified name or pydoc topic id


def _split(text: str) -> tuple[str, str] | None:
    """Query = first line (or first sentence of the first paragraph); document = the rest."""
    text = text.strip()
    if "\n\n" in text:
        head, rest = text.split("\n\n", 1)
    else:
        m = re.match(r"(.+?[.!?])\s+(.+)", text, flags=re.S)
        if not m:
            return None
        head, rest = m.group(1), m.group(2)
    head, rest = " ".join(head.split()), " ".join(rest.split())
    if len(head) < 20 or len(rest) < 60:
        return None
    return head, rest


def _docstrings(module_name: str) -> list[tuple[str, str]]:
    try:
        mod = importlib.import_module(module_name)
    except Exception:  # noqa: BLE001 -- an optional stdlib module (e.g. ssl) may be missing on a platform
        logger.info("skipping %s: cannot import", module_name)
        return []
    out = []
    for name, obj in sorted(vars(mod).items()):
        if name.startswith("_") or getattr(obj, "__module__", module_name) != getattr(
            mod, "__name__", module_name
        ):
            continue
        members = [(name, obj)]
        if inspect.isclass(obj):
            members += [(f"{name}.{k}", v) for k, v in sorted(vars(obj).items()) if not k.startswith("_")]
        for qual, member in members:
            doc = inspect.getdoc(member) if callable(member) or inspect.isclass(member) else None
            if doc:
                out.append((f"{module_name}.{qual}", doc))
    return out


def _pydoc_topics() -> list[Pair]:
    """Split each pydoc language-reference topic into paragraphs; each paragraph gives one pair."""
    from pydoc_data.topics import topics

    pairs = []
    for key in sorted(topics):
        for i, para in enumerate(topics[key].split("\n\n")):
            if para.lstrip().startswith(("*", "=", "-")) or para.startswith("   "):
                continue  # headings, grammar productions and code blocks are not prose
            split = _split(para.replace("\n", " "))
            if split:
                pairs.append(Pair(split[0], split[1], "langref", f"{key}#{i}"))
    return pairs


def build_corpus(max_doc_chars: int = 400) -> list[Pair]:
    """All unique pairs from the module families plus the pydoc topics, documents truncated (embedding cost)."""
    if max_doc_chars < 60:
        raise ValueError(f"`max_doc_chars` must be >= 60 to keep a document body, got {max_doc_chars}.")
    pairs, seen = [], set()
    for family, modules in FAMILIES.items():
        for module_name in modules:
            for source, doc in _docstrings(module_name):
                split = _split(doc)
                if split and split[1] not in seen:
                    seen.add(split[1])
                    pairs.append(Pair(split[0], split[1][:max_doc_chars], family, source))
    for p in _pydoc_topics():
        if p.document not in seen:
            seen.add(p.document)
            pairs.append(Pair(p.query, p.document[:max_doc_chars], p.family, p.source))
    return pairs


def split_by_family(
    pairs: list[Pair], ood_families: tuple[str, ...], n_train: int, n_test: int, seed: int
) -> dict[str, list[int]]:
    """Indices of anchor-training, ID-test and OOD-test items; OOD families never appear in training."""
    if not pairs:
        raise ValueError("`pairs` is empty; build the corpus first.")
    rng = np.random.default_rng(seed)
    ood = [i for i, p in enumerate(pairs) if p.family in ood_families]
    idd = [i for i, p in enumerate(pairs) if p.family not in ood_families]
    rng.shuffle(idd)
    rng.shuffle(ood)
    if len(idd) < n_train + n_test or len(ood) < 2:
        raise ValueError(
            f"Too few items: {len(idd)} ID for n_train+n_test={n_train + n_test}, {len(ood)} OOD."
        )
    return {"train": idd[:n_train], "id": idd[n_train : n_train + n_test], "ood": ood[:n_test]}
