"""Parameters: loaded once from params.yaml (and the per-algorithm files it lists), validated declaratively, frozen.

Every error names the key path, what is allowed, and the value received, e.g.
``experiments.pp_admm-adult.eta must be > 0, got -0.5``. Each algorithm module declares its parameters as a
frozen dataclass built with :func:`build`; checks across parameters live in that dataclass's
``__post_init__`` (raising :class:`ParamError` through :func:`fail`).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path
from typing import Any, Mapping

import yaml

# the C parser when PyYAML has it (the same values, several times faster on the 2,000 lines of parameters)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ParamError(ValueError):
    """A parameter is missing, unknown, of the wrong type or out of range."""


def fail(path: str, message: str) -> typing.NoReturn:
    raise ParamError(f"{path} {message}")


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ParamError(f"{path}: file not found") from None
    try:
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise ParamError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ParamError(f"{path}: the top level must be a mapping, got {type(data).__name__}")
    return data


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """Read params.yaml and the files its ``params_files`` list names (paths relative to it), as one mapping.

    Each algorithm's experiments live in their own file so that DVC, which reads a stage's whole params file to
    check it, reads a small one per stage. A top-level key in two files is an error naming both; so is a listed
    file that is missing, not a mapping, or itself lists ``params_files``.
    """
    path = Path(path)
    data = _read_mapping(path)
    files = data.pop("params_files", None) or []
    if not isinstance(files, list) or not all(isinstance(f, str) and f for f in files):
        raise ParamError(f"{path}: params_files must be a list of file paths, got {files!r:.120}")
    where = dict.fromkeys(data, str(path))
    for name in files:
        part_path = path.parent / name
        part = _read_mapping(part_path)
        if "params_files" in part:
            raise ParamError(f"{part_path}: params_files may appear only in {path}")
        for key, value in part.items():
            if key in where:
                raise ParamError(f"{part_path}: top-level key {key!r} is also in {where[key]}")
            where[key] = str(part_path)
            data[key] = value
    return data


def section(params: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted key path (``experiments.centralized-a9a``); an error names the missing key."""
    node: Any = params
    walked: list[str] = []
    for key in path.split("."):
        walked.append(key)
        if not isinstance(node, Mapping) or key not in node:
            raise ParamError(f"params: missing key {'.'.join(walked)}")
        node = node[key]
    return node


def section_of_algorithm(algorithm: str) -> str:
    """The section of the pipeline's experiments of `algorithm`: ``<algorithm>_experiments``, in its own file
    ``params/<algorithm>.yaml``.

    Each section is one dvc.yaml stage group, ``train_<algorithm>``, whose code deps are the files that
    algorithm imports (ppml.codegraph, fingerprinted by stage plan), so an edit re-runs only the experiments
    whose code it touched.
    """
    return f"{algorithm}_experiments"


def is_experiment_section(key: str) -> bool:
    """Whether top-level key `key` of params.yaml holds experiments: one section per algorithm (the pipeline's,
    ``<algorithm>_experiments``) and ``experiments``, which takes any algorithm, for runs outside the pipeline
    (tests, one-off runs: no dvc.yaml group reads it)."""
    return key == "experiments" or key.endswith("_experiments")


def all_experiments(params: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
    """Every experiment of params.yaml as ``name -> (section, block)``; a name in two sections is an error."""
    out: dict[str, tuple[str, Any]] = {}
    for key in filter(is_experiment_section, params):
        blocks = params.get(key) or {}
        if not isinstance(blocks, Mapping):
            raise ParamError(f"params: {key} must be a mapping of experiment names to blocks, got {blocks!r:.80}")
        for name, block in blocks.items():
            if name in out:
                raise ParamError(f"params: experiment {name!r} is in both {out[name][0]} and {key}")
            out[name] = (key, block)
    if not out:
        raise ParamError("params: no experiments (sections experiments and <algorithm>_experiments)")
    return out


def run_dir(runs: str | Path, name: str, block: Mapping[str, Any]) -> Path:
    """Experiment `name`'s run directory under `runs` (reports/runs): ``<runs>/<algorithm>/<name>``, one folder
    per algorithm, which is that algorithm's train stage output (e.g. reports/runs/pp_admm/pp-adult-eps1)."""
    algorithm = block.get("algorithm") if isinstance(block, Mapping) else None
    if not isinstance(algorithm, str) or not algorithm:
        raise ParamError(f"params: experiment {name!r} names no algorithm, got {algorithm!r}")
    return Path(runs) / algorithm / name


def check(path: str, value: Any, *, gt: float | None = None, ge: float | None = None,
          lt: float | None = None, le: float | None = None, choices: typing.Iterable[Any] | None = None) -> Any:
    """Range and choice checks with messages naming the key path."""
    if choices is not None:
        choices = list(choices)
        if value not in choices:
            fail(path, f"must be one of {choices}, got {value!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            fail(path, f"must be a finite number, got {value!r}")
        if gt is not None and not value > gt:
            fail(path, f"must be > {gt}, got {value!r}")
        if ge is not None and not value >= ge:
            fail(path, f"must be >= {ge}, got {value!r}")
        if lt is not None and not value < lt:
            fail(path, f"must be < {lt}, got {value!r}")
        if le is not None and not value <= le:
            fail(path, f"must be <= {le}, got {value!r}")
    return value


def _coerce(path: str, value: Any, annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(path, value, arg)
            except ParamError as exc:
                errors.append(str(exc))
        fail(path, f"has the wrong type: {'; '.join(errors)}")
    if origin is typing.Literal:
        return check(path, value, choices=args)
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            fail(path, f"must be a list, got {value!r}")
        item_type = args[0] if args else Any
        items = [_coerce(f"{path}[{i}]", v, item_type) for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict or annotation is dict:
        if not isinstance(value, Mapping):
            fail(path, f"must be a mapping, got {value!r}")
        return dict(value)
    if annotation is Any:
        return value
    if annotation is bool:
        if not isinstance(value, bool):
            fail(path, f"must be true or false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            fail(path, f"must be an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, str):
            try:
                value = float(value)  # YAML reads 1e-4 as a string
            except ValueError:
                fail(path, f"must be a number, got {value!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            fail(path, f"must be a number, got {value!r}")
        try:
            value = float(value)
        except OverflowError:
            fail(path, f"must be a finite number, got {value!r}")
        if not math.isfinite(value):  # .inf / nan in YAML: no parameter here means anything by them
            fail(path, f"must be a finite number, got {value!r}")
        return value
    if annotation is str:
        if not isinstance(value, str):
            fail(path, f"must be a string, got {value!r}")
        return value
    return value


def build(cls: type, mapping: Mapping[str, Any] | None, path: str, *, ignore: typing.Iterable[str] = ()) -> Any:
    """Build frozen dataclass `cls` from `mapping`, rejecting unknown keys and wrong types by key path.

    Fields may carry range checks in their metadata: ``field(default=1.0, metadata={"gt": 0})``
    (keys: gt, ge, lt, le, choices). Keys listed in `ignore` are accepted and skipped (for instance the
    ``algorithm`` and ``dataset`` keys that the train stage reads itself).
    """
    mapping = dict(mapping or {})
    if not isinstance(mapping, dict):
        fail(path, f"must be a mapping, got {mapping!r}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(mapping) - set(known) - set(ignore))
    if unknown:
        fail(f"{path}.{unknown[0]}", f"is not a parameter of {cls.__name__} (known: {', '.join(sorted(known))})")
    kwargs = {}
    for name, f in known.items():
        key_path = f"{path}.{name}"
        if name not in mapping:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                fail(key_path, "is required")
            continue
        value = _coerce(key_path, mapping[name], hints[name])
        limits = {k: f.metadata[k] for k in ("gt", "ge", "lt", "le", "choices") if k in f.metadata}
        if limits and value is not None:
            if isinstance(value, (tuple, list)):
                for i, v in enumerate(value):
                    check(f"{key_path}[{i}]", v, **limits)
            else:
                check(key_path, value, **limits)
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except ParamError as exc:
        raise ParamError(f"{path}: {exc}") from None


def flat_fields(obj: Any) -> dict[str, Any]:
    """A params dataclass as flat JSON-friendly fields (tuples become lists), for metrics.json."""
    out = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, tuple):
            value = list(value)
        if isinstance(value, (str, int, float, bool, list)) or value is None:
            out[f.name] = value
    return out
