"""Verified download of a dataset's raw files, from a local mirror or the original URL, or of a user's file.

Every file of a :class:`~ppml.data.sources.Dataset` is checked against the sha256 of its *uncompressed* bytes,
whatever its origin: a plain or ``.xz`` copy in a mirror laid out as ``<mirror>/<dataset>/<name>[.xz]``, or
the file's URL (fetched with a timeout). Bytes are streamed in chunks into a temporary file beside the
destination and renamed onto it only after the digest matched, so a file under the output directory is
always a verified one. If the call fails for any reason, every file it wrote is removed again, and the
``status.json`` that marks a complete directory is written last, so a directory never looks complete when
it is not.

Data that may not be redistributed (the IPUMS extracts of PP-ADMM [1]_) is supplied by the user as a CSV
file under ``data/user/`` (``source: user``): it is copied, the same way, to :data:`USER_FILE` and its
sha256 recorded, so that a changed file is seen downstream.

``status.json`` is the record downstream stages read. It holds nothing that depends on the machine or the
moment (no timestamps, no mirror path, no origin of the bytes, no network error text), so the same dataset
gives the same bytes everywhere (DVC hashes outputs); where each file came from, or where it was looked for
and why that failed, goes to the log::

    {"dataset": "a9a", "available": true, "synthetic": false, "source": "registry",
     "files": {"a9a": "<sha256>", "a9a.t": "<sha256>"}}
    {"dataset": "gisette", "available": false, "synthetic": false,
     "reason": "not in the mirror and not downloadable here: gisette_train.data, ..."}
    {"dataset": "tiny", "available": true, "synthetic": true, "source": "synthetic", "files": {}}
    {"dataset": "ipums_us", "available": true, "synthetic": false, "source": "user",
     "path": "data/user/ipums_us.csv", "files": {"user.csv": "<sha256>"}}

References
----------
.. [1] J. Ding, J. Wang, G. Liang, J. Bi, M. Pan, "Towards Plausible Differentially Private ADMM Based
   Distributed Machine Learning", CIKM 2020 (Adult, and IPUMS US and Brazil).
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import lzma
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, BinaryIO, Iterator, Mapping

from ppml import __version__
from ppml.data.sources import Dataset, SourceFile, get_dataset
from ppml.io import atomic_path, read_json, write_json

log = logging.getLogger(__name__)

STATUS_FILE = "status.json"
#: Why an optional dataset is unavailable, as ``status.json`` says it (followed by the missing files' names):
#: fixed text, so that the status does not depend on the mirror's path or on the network's error message.
UNAVAILABLE = "not in the mirror and not downloadable here"
#: Values of ``datasets.<key>.source`` in params.yaml: files from the registry, data the prepare stage
#: generates itself (nothing to download), or a CSV file the user supplies.
SOURCES = ("registry", "synthetic", "user")
#: Name of the copy of a user's file in the output directory.
USER_FILE = "user.csv"
DEFAULT_TIMEOUT = 60.0
_CHUNK = 1 << 20


class DownloadError(RuntimeError):
    """A dataset could not be put in place."""


class ChecksumError(DownloadError):
    """A copy's bytes are not the registered ones (wrong digest, or an .xz copy that does not decompress)."""


class DataUnavailableError(DownloadError):
    """A required dataset is neither in the mirror nor reachable at its URL."""


class _Unreachable(Exception):
    """One file could not be obtained from any origin; carries the reason (internal)."""


class _NetworkFailure(Exception):
    """A read from the server failed mid-transfer (internal; wraps the cause)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def download_dataset(key: str, out_dir: str | Path, *, required: bool, mirror: str | Path | None = None,
                     timeout: float = DEFAULT_TIMEOUT, source: str = "registry",
                     path: str | Path | None = None, files_of: str | None = None,
                     registry: Mapping[str, Dataset] | None = None) -> dict[str, Any]:
    """Put dataset `key`'s verified files under `out_dir` and write ``out_dir/status.json``.

    Parameters
    ----------
    key : str
        Dataset key in the registry (:data:`ppml.data.sources.DATASETS`), or of the user's dataset.
    out_dir : path
        Directory to fill (``data/raw/<key>``); files keep their registry names, sub-directories included.
    required : bool
        Whether a dataset that cannot be had is an error (True) or is recorded as ``available: false``.
    mirror : path, optional
        A directory laid out as ``<dataset>/<name>`` or ``<dataset>/<name>.xz``, looked at before the URL.
    timeout : float
        Seconds to wait for the server when connecting and on each read.
    source : {"registry", "synthetic", "user"}
        ``"synthetic"`` datasets have no files: only the status is written. ``"user"`` datasets are the
        file at `path`, copied to ``out_dir/`` :data:`USER_FILE`.
    path : path, optional
        The user's file (``datasets.<key>.path``); required for, and only for, ``source="user"``.
    files_of : str, optional
        Registry data only: the registry key whose files to put in place (``datasets.<key>.files_of``, another
        split of the same files); by default `key` itself. The status records it.
    registry : mapping, optional
        Registry to look `key` up in (tests pass their own).

    Returns
    -------
    dict
        The status written to ``status.json``. ``source`` is the kind of dataset (`source`); whether the
        registry's files came from the mirror, their URL or were already in `out_dir` is only logged. An
        unavailable dataset's ``reason`` is :data:`UNAVAILABLE` and the missing files' names; a user's file
        has its ``path`` recorded too.

    Raises
    ------
    ChecksumError
        A copy's digest is not the registered one (the message names the file and both digests), whether or
        not the dataset is required: a wrong copy is never the same as a missing one.
    DataUnavailableError
        `required` is True and some file is neither in the mirror nor downloadable (the message lists the
        files and says how to supply them), or the user's file is missing (the message says where to put it).
    DownloadError
        Unknown key or source, `mirror` is not a directory, or `path` given for a source other than
        ``"user"`` or missing for it.
    """
    if source not in SOURCES:
        raise DownloadError(f"dataset {key!r}: source must be one of {list(SOURCES)}, got {source!r}")
    if (path is None) == (source == "user"):
        raise DownloadError(f"dataset {key!r}: a path is needed for, and only for, source 'user' "
                            f"(source {source!r}, path {path!r})")
    if files_of is not None and source != "registry":
        raise DownloadError(f"dataset {key!r}: files_of is only for registry data (source {source!r})")
    out_dir = Path(out_dir)
    status_path = out_dir / STATUS_FILE
    status_path.unlink(missing_ok=True)  # a stale status would vouch for files this call may not deliver
    if source == "synthetic":
        status = {"dataset": key, "available": True, "synthetic": True, "source": "synthetic", "files": {}}
        write_json(status_path, status)
        log.info("%s: synthetic dataset, nothing to download", key)
        return status
    if source == "user":
        return _copy_user_file(key, Path(path), out_dir, required=required)
    try:
        dataset = get_dataset(files_of or key, registry)
    except KeyError as exc:
        raise DownloadError(exc.args[0]) from None
    if mirror is not None and not Path(mirror).is_dir():
        raise DownloadError(f"mirror {mirror} is not a directory")

    created_dirs = _make_dirs(out_dir)
    written: list[Path] = []
    origins: dict[str, str] = {}
    try:
        for spec in dataset.files:
            dest = out_dir / spec.name
            if dest.is_file():
                actual = _sha256_of(dest)
                if actual == spec.sha256:
                    origins[spec.name] = "present"
                    log.info("%s: %s already present and verified", key, spec.name)
                    continue
                log.warning("%s: %s is present but its sha256 is %s, not %s; fetching it again",
                            key, spec.name, actual, spec.sha256)
                dest.unlink()
            created_dirs += _make_dirs(dest.parent)
            origins[spec.name] = _fetch(dataset, spec, dest, mirror=mirror, timeout=timeout)
            written.append(dest)
    except _Unreachable as exc:
        _remove(written, created_dirs)
        missing = [f for f in dataset.files if origins.get(f.name) != "present"]
        if required:
            raise DataUnavailableError(_how_to_supply(dataset, missing, reason=str(exc))) from None
        status = {"dataset": key, "available": False, "synthetic": False,
                  "reason": f"{UNAVAILABLE}: {', '.join(f.name for f in missing)}"}
        write_json(status_path, status)
        log.warning("%s: optional dataset unavailable (%s): %s", key, exc, status["reason"])
        return status
    except BaseException:
        _remove(written, created_dirs)
        raise
    log.info("%s: all %d files verified (from %s)", key, len(origins),
             "+".join(sorted(set(origins.values()))))
    status = {"dataset": key, "available": True, "synthetic": False, "source": "registry",
              **({} if files_of is None else {"files_of": files_of}),
              "files": {f.name: f.sha256 for f in dataset.files}}
    write_json(status_path, status)
    return status


def _copy_user_file(key: str, path: Path, out_dir: Path, *, required: bool) -> dict[str, Any]:
    """Copy the user's file to ``out_dir/USER_FILE`` and write the status that records its sha256."""
    status_path = out_dir / STATUS_FILE
    if not path.is_file():
        where = (f"{path} (named by datasets.{key}.path in params.yaml) does not exist; put your CSV file "
                 f"there (see data/user/README.md)")
        if required:
            raise DataUnavailableError(f"dataset {key!r} is not available: {where}")
        status = {"dataset": key, "available": False, "synthetic": False, "reason": where}
        write_json(status_path, status)
        log.warning("%s: optional dataset unavailable: %s", key, where)
        return status
    created_dirs = _make_dirs(out_dir)
    try:
        with path.open("rb") as stream, atomic_path(out_dir / USER_FILE) as tmp:
            sha256, nbytes = _write_chunks(_read_chunks(stream), tmp)
    except BaseException:
        _remove([], created_dirs)
        raise
    log.info("%s: copied %s (%d bytes, sha256 %s)", key, path, nbytes, sha256)
    status = {"dataset": key, "available": True, "synthetic": False, "source": "user", "path": str(path),
              "files": {USER_FILE: sha256}}
    write_json(status_path, status)
    return status


def read_status(out_dir: str | Path) -> dict[str, Any]:
    """The ``status.json`` a download wrote into `out_dir` (FileNotFoundError says which stage to run)."""
    status = read_json(Path(out_dir) / STATUS_FILE)
    if not isinstance(status, dict) or not isinstance(status.get("available"), bool):
        raise ValueError(f"{Path(out_dir) / STATUS_FILE}: not a download status (no boolean 'available')")
    return status


def _fetch(dataset: Dataset, spec: SourceFile, dest: Path, *, mirror: str | Path | None,
           timeout: float) -> str:
    """Store a verified copy of `spec` at `dest`, return its origin; _Unreachable says why there is none."""
    reasons = []
    if mirror is not None:
        plain = Path(mirror) / dataset.key / spec.name
        packed = plain.with_name(plain.name + ".xz")
        if plain.is_file():
            with plain.open("rb") as stream:
                _store(_read_chunks(stream), dest, spec, origin=str(plain))
            return "mirror"
        if packed.is_file():
            with lzma.open(packed, "rb") as stream:
                try:
                    _store(_read_chunks(stream), dest, spec, origin=str(packed))
                except (lzma.LZMAError, EOFError) as exc:  # corrupt or truncated .xz
                    raise ChecksumError(
                        f"{spec.name}: the mirror copy {packed} does not decompress ({exc}); expected sha256 "
                        f"{spec.sha256} of the uncompressed bytes, none could be computed") from None
            return "mirror"
        reasons.append(f"no copy in mirror {mirror}")
    if spec.url is None:
        reasons.append(f"no direct download (see {dataset.homepage})")
        raise _Unreachable(f"{spec.name}: {'; '.join(reasons)}")
    request = urllib.request.Request(spec.url, headers={"User-Agent": f"ppml/{__version__}"})
    log.info("%s: fetching %s", dataset.key, spec.url)
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except (OSError, http.client.HTTPException) as exc:  # URLError, HTTPError and timeouts are OSErrors
        reasons.append(f"{spec.url}: {_describe(exc, timeout)}")
        raise _Unreachable(f"{spec.name}: {'; '.join(reasons)}") from None
    with response:
        try:
            _store(_read_network_chunks(response), dest, spec, origin=spec.url)
        except _NetworkFailure as exc:
            reasons.append(f"{spec.url}: {_describe(exc.cause, timeout)} while reading")
            raise _Unreachable(f"{spec.name}: {'; '.join(reasons)}") from None
    return "url"


def _read_chunks(stream: BinaryIO) -> Iterator[bytes]:
    while chunk := stream.read(_CHUNK):
        yield chunk


def _read_network_chunks(stream: BinaryIO) -> Iterator[bytes]:
    # Wrapped so that a timeout or reset of the connection (an OSError) is not confused with a failure to
    # write the local file (also an OSError): the first makes the file unreachable, the second is fatal.
    while True:
        try:
            chunk = stream.read(_CHUNK)
        except (OSError, http.client.HTTPException) as exc:
            raise _NetworkFailure(exc) from exc
        if not chunk:
            return
        yield chunk


def _store(chunks: Iterator[bytes], dest: Path, spec: SourceFile, *, origin: str) -> None:
    """Write `chunks` to a temp file beside `dest`; rename it onto `dest` only if the sha256 matches."""
    with atomic_path(dest) as tmp:
        actual, nbytes = _write_chunks(chunks, tmp)
        if actual != spec.sha256:
            size = f" ({nbytes} bytes, expected {spec.size})" if spec.size not in (None, nbytes) else ""
            raise ChecksumError(f"{spec.name}: sha256 mismatch for the copy from {origin}{size}: "
                                f"expected {spec.sha256}, got {actual}")
    log.info("verified %s (sha256 %s) from %s", spec.name, actual, origin)


def _write_chunks(chunks: Iterator[bytes], dest: Path) -> tuple[str, int]:
    """Write `chunks` to `dest`; return their sha256 and their number of bytes."""
    digest = hashlib.sha256()
    nbytes = 0
    with dest.open("wb") as out:
        for chunk in chunks:
            digest.update(chunk)
            out.write(chunk)
            nbytes += len(chunk)
    return digest.hexdigest(), nbytes


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in _read_chunks(stream):
            digest.update(chunk)
    return digest.hexdigest()


def _describe(exc: BaseException, timeout: float) -> str:
    """A one-line reason for a failed request."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(cause, TimeoutError):
        return f"no answer within the timeout of {timeout:g} s"
    return str(cause) or type(cause).__name__


def _make_dirs(path: Path) -> list[Path]:
    """Create `path` and its missing parents; return the directories created, outermost first."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    missing.reverse()
    for directory in missing:
        directory.mkdir(exist_ok=True)
    return missing


def _remove(files: list[Path], directories: list[Path]) -> None:
    """Undo a failed call: its files, then the directories it created (innermost first, if left empty)."""
    for path in files:
        path.unlink(missing_ok=True)
    for directory in reversed(directories):
        try:
            directory.rmdir()
        except OSError:  # not empty: it holds files this call did not write
            pass


def _how_to_supply(dataset: Dataset, missing: list[SourceFile], *, reason: str) -> str:
    """One line: why the dataset is unavailable and the two ways to supply it."""
    where = ", ".join(f"{dataset.key}/{f.name} ({f.url or 'no direct URL, see ' + dataset.homepage})"
                      for f in missing)
    network = ", or allow network access to the URLs" if any(f.url for f in missing) else ""
    return (f"dataset {dataset.key!r} is not available ({reason}). To supply it, set DATA_MIRROR to a "
            f"directory laid out as <dataset>/<file>[.xz] that holds {where}{network}.")
