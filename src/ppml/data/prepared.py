"""Reading what the prepare stage wrote: ``manifest.json``, ``<party>.npz`` per party, ``evaluator.npz``.

A party file that cannot be read (cut short, corrupted) is a :class:`ShardError` naming the file and the stage
that writes it again, whether the driver loads every shard (:func:`load_prepared`) or a party loads its own
(:func:`load_shard`).
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path
from typing import Any

from ppml.io import load_party, read_json
from ppml.parties import Party

__all__ = ["DataUnavailable", "MANIFEST", "ShardError", "load_prepared", "load_shard"]

MANIFEST = "manifest.json"


class DataUnavailable(RuntimeError):
    """The dataset could not be had (an optional download that failed); downstream reports "not run"."""


class ShardError(ValueError):
    """A party file of a prepared dataset that cannot be used (truncated, corrupt, or another party's): the
    message names the file and the stage that rebuilds it."""


def load_shard(path: str | Path, *, dataset: str | None = None) -> Party:
    """One party's file, as :func:`ppml.io.load_party` reads it, with a one-line error for a damaged file.

    Parameters
    ----------
    path : path
        ``data/prepared/<dataset>/<party>.npz``.
    dataset : str, optional
        The dataset's key, for the message; by default the name of the file's directory.

    Raises
    ------
    FileNotFoundError
        The file is missing.
    ShardError
        The file is not a complete .npz of a party (a copy cut short, a byte changed): the message names it
        and says how to write it again (``dvc repro prepare@<dataset>``).
    """
    path = Path(path)
    try:
        return load_party(path)
    # What numpy, zipfile and the Party checks raise on a damaged file: an .npz cut short has lost the zip's
    # central directory (BadZipFile); a changed byte fails a CRC or an array header (BadZipFile, ValueError,
    # EOFError) or names an unknown compression (NotImplementedError); a lost array fails a lookup (KeyError).
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, KeyError, NotImplementedError) as exc:
        stage = f"prepare@{dataset or path.parent.name}"
        raise ShardError(f"{path}: truncated or corrupt party file ({type(exc).__name__}: "
                         f"{_first_line(exc)}); regenerate it with `dvc repro {stage}`") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else "no message"


def load_prepared(directory: str | Path) -> tuple[dict[str, Any], list[Party], Party | None]:
    """Load a prepared dataset.

    Parameters
    ----------
    directory : path
        ``data/prepared/<dataset>``.

    Returns
    -------
    manifest : dict
        The manifest the prepare stage wrote.
    parties : list of Party
        In the manifest's order (vertical data: the order of the column blocks; horizontal: the agents).
    evaluation : Party or None
        The held-out rows of horizontal data (``evaluator.npz``); None for vertical data, whose parties
        carry their own test columns.

    Raises
    ------
    DataUnavailable
        The manifest records the dataset as unavailable; the message carries its reason.
    FileNotFoundError
        The manifest or a party file is missing.
    ShardError
        A party file is truncated or corrupt, or holds another party than the manifest says (a ValueError).
    """
    directory = Path(directory)
    manifest = read_json(directory / MANIFEST)
    if not manifest.get("available", False):
        raise DataUnavailable(f"dataset {manifest.get('dataset', directory.name)!r} is unavailable: "
                              f"{manifest.get('reason', 'no reason recorded')}")
    dataset = manifest.get("dataset", directory.name)
    parties = [_load(directory, entry, dataset) for entry in manifest["parties"]]
    evaluator = manifest.get("evaluator")
    return manifest, parties, None if evaluator is None else _load(directory, evaluator, dataset)


def _load(directory: Path, entry: dict[str, Any], dataset: str) -> Party:
    path = directory / entry["file"]
    if not path.is_file():
        raise FileNotFoundError(f"{path}: party file listed in {directory / MANIFEST} is missing")
    party = load_shard(path, dataset=dataset)
    if party.name != entry["name"]:
        raise ShardError(f"{path}: holds party {party.name!r}, but the manifest says {entry['name']!r}; "
                         f"regenerate it with `dvc repro prepare@{dataset}`")
    return party
