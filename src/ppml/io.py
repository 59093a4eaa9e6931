"""Files between stages: byte-deterministic npz, JSON, and atomic writes (temp file, then rename).

Determinism matters: DVC decides what is up to date by content hashes, so the same data must give the same
bytes (numpy's own ``savez`` stamps the current time into its zip entries).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import scipy.sparse as sp

from ppml.parties import Party

_EPOCH = (1980, 1, 1, 0, 0, 0)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp makes 0600; give the file ordinary permissions
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_json(path: str | Path, data: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n")


def read_json(path: str | Path) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: not found (run the stage that writes it first)") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None


def save_npz(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    """Write arrays to an .npz with fixed timestamps, in key order, atomically (no pickles allowed).

    Entries are stored uncompressed: feature matrices of floats barely compress, and deflating a
    gigabyte of them costs minutes.
    """
    with atomic_path(path) as tmp:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
            for name in sorted(arrays):
                arr = np.asarray(arrays[name])
                if arr.dtype == object:
                    raise TypeError(f"{path}: array {name!r} has dtype object; store strings as fixed-width 'U'")
                buf = io.BytesIO()
                np.lib.format.write_array(buf, arr, allow_pickle=False)
                info = zipfile.ZipInfo(f"{name}.npy", date_time=_EPOCH)
                info.external_attr = 0o644 << 16
                zf.writestr(info, buf.getvalue())


def load_npz(path: str | Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _put_matrix(arrays: dict[str, np.ndarray], prefix: str, X: Any) -> None:
    if sp.issparse(X):
        X = sp.csr_array(X)
        arrays[f"{prefix}_data"] = X.data
        arrays[f"{prefix}_indices"] = X.indices.astype(np.int32)
        arrays[f"{prefix}_indptr"] = X.indptr.astype(np.int64)
        arrays[f"{prefix}_shape"] = np.asarray(X.shape, dtype=np.int64)
    else:
        arrays[prefix] = np.asarray(X, dtype=np.float64)


def _get_matrix(arrays: dict[str, np.ndarray], prefix: str) -> Any:
    if prefix in arrays:
        return arrays[prefix]
    if f"{prefix}_data" in arrays:
        shape = tuple(int(s) for s in arrays[f"{prefix}_shape"])
        return sp.csr_array((arrays[f"{prefix}_data"], arrays[f"{prefix}_indices"], arrays[f"{prefix}_indptr"]),
                            shape=shape)
    return None


def save_party(path: str | Path, party: Party) -> None:
    """One party's file: its columns, ids, features, and labels only if it holds them."""
    arrays: dict[str, np.ndarray] = {
        "name": np.asarray(party.name),
        "columns": np.asarray(party.columns, dtype=str),
        "ids": np.asarray(party.ids, dtype=str),
    }
    _put_matrix(arrays, "X", party.X)
    if party.y is not None:
        arrays["y"] = np.asarray(party.y, dtype=np.int8)
    if party.X_test is not None:
        _put_matrix(arrays, "X_test", party.X_test)
        arrays["test_ids"] = np.asarray(party.test_ids, dtype=str)
    if party.y_test is not None:
        arrays["y_test"] = np.asarray(party.y_test, dtype=np.int8)
    save_npz(path, arrays)


def load_party(path: str | Path) -> Party:
    arrays = load_npz(path)
    return Party(
        name=str(arrays["name"]),
        columns=tuple(str(c) for c in arrays["columns"]),
        ids=arrays["ids"],
        X=_get_matrix(arrays, "X"),
        y=arrays.get("y"),
        test_ids=arrays.get("test_ids"),
        X_test=_get_matrix(arrays, "X_test"),
        y_test=arrays.get("y_test"),
    )


_READY = "READY"  # written into a staging directory once its build is complete; then it is swapped in


@contextmanager
def staged_outputs(root: str | Path, *, dirs: tuple[str, ...] = (), files: tuple[str, ...] = (),
                   prefix: str) -> Iterator[Path]:
    """Build a stage's outputs in a temporary directory beside them, then swap them all in at the end.

    `dirs` and `files` are the stage's outputs, relative to `root`. The block writes each at the same relative
    path under the yielded directory (the `dirs` already exist there). When the block succeeds, every output
    is replaced by its new version, each by a rename (directories: the old one is renamed away, the new one
    renamed in); when it raises, nothing under `root` changes and the temporary directory is removed.

    The temporary directory is ``root/<prefix>XXXX`` (same filesystem, so renames never copy). Leftovers
    of a killed earlier run are dealt with first: one killed while building is removed; one killed while
    swapping (its build was complete) has its swap finished, so the outputs are never left half old, half new.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    outputs = tuple(dirs) + tuple(files)
    for leftover in sorted(root.glob(f"{prefix}*")):
        if not leftover.is_dir():
            continue
        if (leftover / _READY).exists():
            _swap_in(root, leftover, outputs)
        shutil.rmtree(leftover)
    staging = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    try:
        new = staging / "new"
        for d in dirs:
            (new / d).mkdir(parents=True, exist_ok=True)
        yield new
        absent = [rel for rel in outputs if not (new / rel).exists()]
        if absent:
            raise FileNotFoundError(f"{root}: outputs not written: {', '.join(absent)}")
        (staging / _READY).touch()
        _swap_in(root, staging, outputs)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _swap_in(root: Path, staging: Path, outputs: tuple[str, ...]) -> None:
    # Idempotent, so that a swap cut short by a kill can be finished later: an output whose new version is
    # gone from staging/new has been swapped in; otherwise the current one is first moved to staging/old.
    for rel in outputs:
        new, old, final = staging / "new" / rel, staging / "old" / rel, root / rel
        if not new.exists():
            continue
        if final.exists() and not old.exists():
            old.parent.mkdir(parents=True, exist_ok=True)
            os.replace(final, old)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(new, final)
