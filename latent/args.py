"""The one dataclass-to-argparse builder behind every `latentworks` subcommand.

A config dataclass is the single source of a command's settings: each field becomes `--field-name`
(help from `metadata["help"]`, choices from `metadata["choices"]`, the value's name from
`metadata["metavar"]`; `metadata["switch"]` makes a bool a plain `--x` without `--no-x`,
`metadata["positional"]` a positional argument, `metadata["default_help"]` says how a machine-dependent
default is chosen (`{default}` is the value here); a field without a default is a required argument),
`--config FILE.yaml` fills fields from a file, `--set a.b=c` overrides any (nested) field, and
OmegaConf types every value against the field annotations (so `--set sft.epochs=abc` is an error
naming the field, not a bare TypeError). Validation is the dataclass's own `__post_init__`, run once on
the merged values. Sub-actions (`latentworks models pull NAME`, `latentworks finetune builtin ...`)
come from `add_subcommands`, whose parsers are filled only when chosen: listing them imports nothing.

Why not `transformers.HfArgumentParser`: importing it imports transformers (1.3-1.4 s on an idle
2-core CPU, several seconds under load), which alone breaks the instant `--help` every subcommand
promises; argparse + OmegaConf import in about 0.25 s.

`UsageError`, `ArgumentParser` and `run_script` (the `python -m` entry point) live in `latent.entry`,
with the rest of how a command line starts and ends, and are importable from here too.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from latent.entry import ArgumentParser, UsageError, run_script

__all__ = [
    "ArgumentParser",
    "UsageError",
    "add_config_arguments",
    "add_subcommands",
    "config_from_args",
    "config_from_file",
    "load_yaml",
    "read_yaml",
    "run_script",
]


class _LazyParser(ArgumentParser):
    """A sub-action's parser whose arguments are added the first time it parses or prints help."""

    def __init__(self, *args: Any, fill: Callable[[argparse.ArgumentParser], None] | None = None, **kw: Any):
        super().__init__(*args, **kw)
        self._fill = fill

    def _filled(self) -> None:
        fill, self._fill = self._fill, None
        if fill is not None:
            fill(self)

    def parse_known_args(
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._filled()
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:  # everything after a sub-action is its own: name its --help, not the command's
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras

    def format_help(self) -> str:
        self._filled()
        return super().format_help()


class _ListAction(argparse.Action):
    """`--x a b` and `--x a,b` both give ["a", "b"]; elements are typed later from the annotation."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        items = [v.strip() for value in values for v in str(value).split(",") if v.strip()]
        setattr(namespace, self.dest, items)


def _unwrap(hint: Any) -> tuple[Any, bool]:
    """(element type, is_list) of an annotation such as `list[int] | None` or `str | None`."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = args[0] if len(args) == 1 else str
    if typing.get_origin(hint) is list:
        (inner,) = typing.get_args(hint) or (str,)
        return inner, True
    return hint, False


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _leaf_fields(cls: type, flatten: tuple[str, ...], skip: tuple[str, ...], prefix: str = ""):
    """(dotted path, field, annotation) of every flag-able field; nested dataclasses named in `flatten`
    contribute their own fields under the same flat flag names."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        path = prefix + f.name
        if path in skip or not f.init:
            continue
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            if path in flatten:
                yield from _leaf_fields(hint, flatten, skip, prefix=path + ".")
            continue
        yield path, f, hint


def _help(f: dataclasses.Field, default: Any) -> str:
    text = f.metadata.get("help", "")
    if f.metadata.get("switch"):
        default = None
    shown = ",".join(map(str, default)) if isinstance(default, list) else default
    if f.metadata.get("default_help") and shown is not None:  # a default that depends on the machine
        shown = f.metadata["default_help"].format(default=shown)
    if shown is not None and shown != "":
        text = f"{text} (default: {shown})" if text else f"default: {shown}"
    return text.replace("%", "%%")  # argparse %-formats help strings


def add_config_arguments(
    parser: argparse.ArgumentParser,
    cls: type,
    *,
    flatten: tuple[str, ...] = (),
    skip: tuple[str, ...] = (),
    files: bool = True,
) -> None:
    """One `--flag` per field of dataclass `cls` (and of its nested dataclasses named in `flatten`).

    Flags default to "not given", so `config_from_args` can layer defaults < YAML < flags < `--set`.
    `files=True` adds `--config FILE.yaml` and the repeatable `--set KEY=VALUE`.
    """
    for path, f, hint in _leaf_fields(cls, flatten, skip):
        kind, is_list = _unwrap(hint)
        if f.metadata.get("positional"):
            _add_positional(parser, path, f, kind, is_list)
            continue
        flag = "--" + f.name.replace("_", "-")
        kw: dict[str, Any] = {"dest": path, "default": argparse.SUPPRESS, "help": _help(f, _default(f))}
        if "choices" in f.metadata:
            kw["choices"] = f.metadata["choices"]
        if _required(f):
            kw["required"] = True
        if is_list:
            kw.update(nargs="+", action=_ListAction, metavar=kind.__name__.upper())
        elif kind is bool:  # --x / --no-x; a "switch" (default False) is the plain --x
            kw["action"] = "store_true" if f.metadata.get("switch") else argparse.BooleanOptionalAction
        else:
            kw["type"] = kind if kind in (int, float, str) else str
            kw.setdefault("metavar", None if "choices" in kw else f.metadata.get("metavar", f.name.upper()))
        parser.add_argument(flag, **kw)
    if files:
        parser.add_argument(
            "--config", metavar="FILE.yaml", default=None, help="YAML file of settings (flags and --set win)"
        )
        parser.add_argument(
            "--set",
            dest="overrides",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override one setting, typed from the config, e.g. --set seed=3 (repeatable)",
        )


def _required(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _add_positional(
    parser: argparse.ArgumentParser, path: str, f: dataclasses.Field, kind: type, is_list: bool
) -> None:
    """A positional argument named after the field; optional (`?`) when the field has a default.
    Its parsed default is None, which `config_from_args` reads as "not given"."""
    kw: dict[str, Any] = {"help": _help(f, None if _required(f) else _default(f)), "metavar": f.name}
    if "choices" in f.metadata:
        kw["choices"] = f.metadata["choices"]
        kw.pop("metavar")
    if is_list:  # one or more values; a list positional is always required
        kw.update(nargs="+", action=_ListAction, metavar=f.name)
    else:
        kw["type"] = kind if kind in (int, float, str) else str
        if not _required(f):
            kw.update(nargs="?", default=None)
    parser.add_argument(path, **kw)


def add_subcommands(
    parser: argparse.ArgumentParser,
    dest: str,
    commands: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]],
    *,
    required: bool = True,
) -> None:
    """Sub-actions `NAME` of a command, each `{name: (help, fill)}`; `fill(parser)` adds that sub-action's
    arguments (usually `add_config_arguments`) only when it is chosen, so `--help` of the command imports
    none of them. The chosen name lands in `args.<dest>`."""
    sub = parser.add_subparsers(dest=dest, metavar=dest.upper(), required=required, parser_class=_LazyParser)
    for name, (text, fill) in commands.items():
        sub.add_parser(name, help=text, description=text, fill=fill)


# Limits of every YAML text read from outside (configs, graphs, prompt sets, task options). Anchors
# and aliases are allowed, but a document whose aliases expand past MAX_YAML_NODES values (a "billion
# laughs" file is a few hundred bytes) is refused before anything is built from it.
MAX_YAML_CHARS = 1 << 20
MAX_YAML_NODES = 100_000


def _expanded_nodes(root: Any, limit: int) -> int:
    """How many nodes the YAML node graph `root` stands for with every alias expanded, counted
    without expanding (each shared node is sized once); stops past `limit`."""
    import yaml

    sizes: dict[int, int] = {}
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, yaml.SequenceNode):
            kids = node.value
        elif isinstance(node, yaml.MappingNode):
            kids = [n for pair in node.value for n in pair]
        else:
            kids = []
        if children_done or not kids:
            sizes[id(node)] = min(limit + 1, 1 + sum(sizes.get(id(k), 0) for k in kids))
            continue
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in sizes)
    return sizes[id(root)]


def load_yaml(text: str, what: str) -> Any:
    """`yaml.safe_load(text)` with size limits: text over `MAX_YAML_CHARS` or aliases that expand
    past `MAX_YAML_NODES` values is a `ValueError` naming `what`, raised before anything is built.
    Syntax errors are `yaml.YAMLError` and nesting past the parser's depth `RecursionError`, as
    with `safe_load`."""
    import yaml

    if len(text) > MAX_YAML_CHARS:
        raise ValueError(
            f"{what} is too large to read ({len(text):,} characters; at most {MAX_YAML_CHARS:,}). Fix the file"
        )
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_nodes(node, MAX_YAML_NODES) > MAX_YAML_NODES:
            raise ValueError(
                f"{what} expands to more than {MAX_YAML_NODES:,} values through its aliases (`*name`); "
                "write the values out, or use fewer aliases. Fix the file"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML mapping from `path`; a missing file or a syntax error is a `UsageError` naming the line."""
    import yaml

    p = Path(path)
    if p.is_dir():
        raise UsageError(f"config {str(p)!r} is a directory, not a YAML file. Pass the file")
    if not p.is_file():
        raise UsageError(f"no config file at {str(p)!r}. Check the path")
    try:
        with open(p, "rb") as fh:  # never more than the limit allows (4 bytes a character at most)
            raw = fh.read(4 * MAX_YAML_CHARS + 1)
        if len(raw) > 4 * MAX_YAML_CHARS:
            raise UsageError(
                f"config file {p} is too large to read (at most {MAX_YAML_CHARS:,} characters). Fix the file"
            )
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(
            f"config file {p} is not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}). "
            "Save it as UTF-8"
        ) from None
    try:
        data = load_yaml(text, f"config file {p}")
    except ValueError as err:
        raise UsageError(str(err)) from None
    except RecursionError:
        raise UsageError(f"{p} is not valid YAML: it is nested too deeply. Fix the file") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UsageError(f"{p} is not valid YAML{where}: {problem}. Fix the file") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{p} must hold a mapping of settings, got a {type(data).__name__}. Fix the file")
    return data


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def _known_keys(cls: type, prefix: str = "") -> list[str]:
    keys = []
    for f in dataclasses.fields(cls):
        hint = typing.get_type_hints(cls)[f.name]
        keys += (
            _known_keys(hint, prefix + f.name + ".") if dataclasses.is_dataclass(hint) else [prefix + f.name]
        )
    return keys


def config_from_args(
    cls: type, args: argparse.Namespace, presets: dict | None = None, *, files: bool = True, **fixed: Any
) -> Any:
    """A validated `cls` from defaults < `--config` YAML < `presets` < flags < `--set` < `fixed`
    (dict keys may be dotted, e.g. "run.seed"). `files=False` reads flags only (a command's own
    options next to its config, added with `add_config_arguments(..., files=False)`).

    Type and unknown-key problems become one `UsageError` naming the setting; `__post_init__` errors
    (ValueError) pass through unchanged.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

    names = set(_known_keys(cls))
    flags = {k: v for k, v in vars(args).items() if k in names and v is not None}
    overrides = list(getattr(args, "overrides", None) or []) if files else []
    for item in overrides:
        if "=" not in item or not item.partition("=")[0].strip():
            raise UsageError(f"--set {item!r} must look like KEY=VALUE, e.g. --set seed=3")
    layers = [OmegaConf.structured(cls)]
    if files and getattr(args, "config", None):
        layers.append(OmegaConf.create(read_yaml(args.config)))
    if presets:
        layers.append(OmegaConf.create(_nest(presets)))
    layers += [OmegaConf.create(_nest(flags)), OmegaConf.from_dotlist(overrides)]
    layers.append(OmegaConf.create(_nest(fixed)))
    try:
        return OmegaConf.to_object(OmegaConf.merge(*layers))
    except ConfigKeyError as err:
        raise UsageError(
            f"unknown key `{err.full_key}`; known keys: {', '.join(sorted(names))}. Fix the name"
        ) from None
    except ValidationError as err:
        what = str(err).splitlines()[0]
        raise UsageError(f"`{err.full_key}`: {what}. Give a value of the right type") from None
    except OmegaConfBaseException as err:
        raise UsageError(f"{str(err).splitlines()[0]}. Check the settings") from None


def config_from_file(
    cls: type, path: str | Path | None = None, overrides: Sequence[str] = (), **values: Any
) -> Any:
    """For Python callers: a validated `cls` from a YAML file (optional) < keyword `values` (None: not
    given) < `KEY=VALUE` overrides, with the command line's checks and error messages."""
    args = argparse.Namespace(config=str(path) if path is not None else None, overrides=list(overrides))
    return config_from_args(cls, args, presets={k: v for k, v in values.items() if v is not None})
