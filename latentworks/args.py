"""The one dataclass-to-argparse builder behind every `latentworks` subcommand.

A config dataclass is the single source of a command's settings: each field becomes `--field-name`
(help from `metadata["help"]`, choices from `metadata["choices"]`), `--config FILE.yaml` fills fields
from a file, `--set a.b=c` overrides any (nested) field, and OmegaConf types every value against the
field annotations (so `--set sft.epochs=abc` is an error naming the field, not a bare TypeError).
Validation is the dataclass's own `__post_init__`, run once on the merged values.

Why not `transformers.HfArgumentParser`: importing it imports transformers (1.3-1.4 s on an idle
2-core CPU, several seconds under load), which alone breaks the instant `--help` every subcommand
promises; argparse + OmegaConf import in about 0.25 s.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["ArgumentParser", "UsageError", "add_config_arguments", "config_from_args", "read_yaml"]


class UsageError(ValueError):
    """A user mistake: printed as `error: <what>. <fix>` with exit status 2, never as a traceback."""


class ArgumentParser(argparse.ArgumentParser):
    """`argparse.ArgumentParser` whose errors raise `UsageError` (the router prints them and exits 2)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}. See `{self.prog} --help`")


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
    shown = ",".join(map(str, default)) if isinstance(default, list) else default
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
        flag = "--" + f.name.replace("_", "-")
        kw: dict[str, Any] = {"dest": path, "default": argparse.SUPPRESS, "help": _help(f, _default(f))}
        if "choices" in f.metadata:
            kw["choices"] = f.metadata["choices"]
        if is_list:
            kw.update(nargs="+", action=_ListAction, metavar=kind.__name__.upper())
        elif kind is bool:
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw["type"] = kind if kind in (int, float, str) else str
            kw.setdefault("metavar", None if "choices" in kw else f.name.upper())
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


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML mapping from `path`; a missing file or a syntax error is a `UsageError` naming the line."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise UsageError(f"no config file at {str(p)!r}. Check the path")
    try:
        data = yaml.safe_load(p.read_text())
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


def config_from_args(cls: type, args: argparse.Namespace, presets: dict | None = None, **fixed: Any) -> Any:
    """A validated `cls` from defaults < `--config` YAML < `presets` < flags < `--set` < `fixed`
    (dict keys may be dotted, e.g. "run.seed").

    Type and unknown-key problems become one `UsageError` naming the setting; `__post_init__` errors
    (ValueError) pass through unchanged.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError

    names = set(_known_keys(cls))
    flags = {k: v for k, v in vars(args).items() if k in names}
    for item in getattr(args, "overrides", None) or []:
        if "=" not in item or not item.partition("=")[0].strip():
            raise UsageError(f"--set {item!r} must look like KEY=VALUE, e.g. --set seed=3")
    layers = [OmegaConf.structured(cls)]
    if getattr(args, "config", None):
        layers.append(OmegaConf.create(read_yaml(args.config)))
    if presets:
        layers.append(OmegaConf.create(_nest(presets)))
    layers += [OmegaConf.create(_nest(flags)), OmegaConf.from_dotlist(list(getattr(args, "overrides", [])))]
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
