"""Reading what the prepare stage wrote: ``manifest.json``, ``<party>.npz`` per party, ``evaluator.npz``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ppml.io import load_party, read_json
from ppml.parties import Party

__all__ = ["DataUnavailable", "MANIFEST", "load_prepared"]

MANIFEST = "manifest.json"


class DataUnavailable(RuntimeError):
    """The dataset could not be had (an optional download that failed); downstream reports "not run"."""


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
    ValueError
        A party file holds another party than the manifest says.
    """
    directory = Path(directory)
    manifest = read_json(directory / MANIFEST)
    if not manifest.get("available", False):
        raise DataUnavailable(f"dataset {manifest.get('dataset', directory.name)!r} is unavailable: "
                              f"{manifest.get('reason', 'no reason recorded')}")
    parties = [_load(directory, entry) for entry in manifest["parties"]]
    evaluator = manifest.get("evaluator")
    return manifest, parties, None if evaluator is None else _load(directory, evaluator)


def _load(directory: Path, entry: dict[str, Any]) -> Party:
    path = directory / entry["file"]
    if not path.is_file():
        raise FileNotFoundError(f"{path}: party file listed in {directory / MANIFEST} is missing")
    party = load_party(path)
    if party.name != entry["name"]:
        raise ValueError(f"{path}: holds party {party.name!r}, but the manifest says {entry['name']!r}")
    return party
