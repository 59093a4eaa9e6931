"""Each organization prepares only its own data: one party's side of the prepare stage, over its links.

``python -m ppml.party --prepare --dataset KEY --party NAME --peers peers.yaml --raw FILE --out DIR`` runs
:func:`prepare_party`. The party reads only its own raw file (FATE's hetero form: an ``id`` column, the label
holder's also ``y``, then its features), and with the dataset's other parties, each in its own process and
linked over mutual TLS (:mod:`ppml.network.links`), it

1. (``holding: dealt``) checks that every party's file lists the same ids in the same order (the label holder
   compares a SHA-256 digest of each file's id column with its own), then replays the prepare stage's dealing
   (:func:`ppml.data.partition.vertical_holdings` with the same seeded stream): the ids private to each party
   and each party's own row order are those ``prepare@KEY`` draws. With ``holding: own`` the file is taken
   as the party's own table as it stands (its own ids and order; ``private_fraction`` is not used);
2. aligns by id with the label holder (:func:`ppml.data.align.align_as_holder` and
   :func:`~ppml.data.align.align_as_member`: the ECDH PSI or plain ids, the messages of :func:`align`);
3. the label holder draws the stratified train/test split over its labels in the aligned order, from the
   same seeded stream as the prepare stage, and sends the test mask (the other parties need it for their
   own test rows; the labels stay with it);
4. each party normalizes its own block alone (every vertical method is per party, column-wise statistics
   over its own training rows: :data:`ppml.data.normalize.VERTICAL`) and writes its own shard;
5. the others send the label holder their manifest entry (public: name, file, column names and counts, row
   counts), their alignment traffic and their digest of the aligned ids; the label holder checks the digests
   and sends every party the manifest, which each writes beside its shard.

So with ``holding: dealt`` each party's shard and the manifest are byte for byte ``prepare@KEY``'s on the same
files (the manifest has one key more, ``prepared``: how, and the digest of the shared ids). The output
directory holds only this party's shard and ``manifest.json``, and replaces ``--out`` only when complete.

Parties without data (the Paillier protocols' arbiter) take no part: their training needs only
``manifest.json``, public facts that the label holder hands them (a copy of its own).

What each party learns beyond its own file: the label holder, which of its ids each other party holds (the
PSI), the others' row counts and column names; the others, the aligned ids, the test mask and the row and
column counts. With ``holding: dealt`` the label holder also learns whether each file's id column equals its
own (only a digest crosses).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ppml.config import ParamError, check, load_params, section
from ppml.data import readers
from ppml.data.align import AlignmentError, align_as_holder, align_as_member
from ppml.data.normalize import VERTICAL, ZSCORE_BOUND, NotZScoredError
from ppml.data.partition import Table, stratified_test_mask, vertical_holdings
from ppml.data.prepare import (DatasetParams, NormalizationError, check_normalized, dataset_params,
                               manifest_params, remove_stale_staging, staging_dir, write_shard)
from ppml.data.prepared import MANIFEST
from ppml.io import write_json
from ppml.network import tls_links  # noqa: F401 - it registers the carrier these links use
from ppml.network import ProtocolError, expect
from ppml.network.endpoint import DEFAULT_TIMEOUT, Endpoint
from ppml.network.links import CONNECT_TIMEOUT, make_links, run_program
from ppml.network.peer import PeerNetwork
from ppml.network.peers import load_peers
from ppml.parties import Party

__all__ = ["HOLDINGS", "OwnTable", "prepare_party", "read_own", "session_of_prepare", "ids_digest"]

log = logging.getLogger(__name__)

#: ``dealt``: replay the prepare stage's dealing (its shards); ``own``: each file is the party's own table.
HOLDINGS = ("dealt", "own")
#: Readers whose files are one per party, and their id and label columns.
OWN_FILE_READERS = {"fate_hetero": ("id", "y")}
#: The keys of a manifest entry (:func:`ppml.data.prepare.write_shard`) and of the manifest (:func:`_manifest`).
ENTRY_KEYS = ("name", "file", "label_holder", "columns", "column_names", "rows_before", "rows_after",
              "train_rows", "test_rows")
MANIFEST_KEYS = ("dataset", "available", "partition", "source", "parties", "evaluator", "alignment", "split",
                 "normalization", "seed", "params")
#: Tags of the alignment's messages (what the prepare stage's manifest counts as alignment traffic).
ALIGNMENT_TAGS = frozenset({"psi_request", "psi_setup", "psi_response", "plain_ids", "aligned_ids"})


@dataclass(frozen=True, eq=False)
class OwnTable:
    """One party's raw file as read: ids in file order, its features, its labels if it holds them."""

    file: Path
    ids: np.ndarray
    X: np.ndarray
    columns: tuple[str, ...]
    y: np.ndarray | None


def ids_digest(ids: np.ndarray) -> str:
    """SHA-256 of the ids in the given order (one per line), and their count."""
    text = "\n".join(str(i) for i in ids)
    return f"{len(ids)}:{hashlib.sha256(text.encode()).hexdigest()}"


def session_of_prepare(key: str, block: dict[str, Any], seed: int, holding: str) -> str:
    """What both ends of every prepare link must agree on: the dataset, its parameters, the seed, the holding."""
    digest = hashlib.sha256(json.dumps({"block": block, "seed": seed, "holding": holding}, sort_keys=True,
                                       default=str).encode())
    return f"prepare:{key}:{digest.hexdigest()[:16]}"


def read_own(path: str | Path, *, label: bool, id_column: str = "id", label_column: str = "y") -> OwnTable:
    """This party's raw CSV file: an id column, the label column for the label holder, then its features.

    Raises
    ------
    FileNotFoundError
        No such file.
    DataFormatError
        A malformed file (the message names the file and line).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: this party's raw file is missing")
    ids, features, y = readers.read_csv_table(path, id_column=id_column, label_column=label_column if label else None)
    return OwnTable(file=path, ids=np.asarray(ids, dtype=str), X=features.to_numpy(np.float64),
                    columns=tuple(features.columns), y=y)


def _streams(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """The prepare stage's holding and split streams: ``default_rng(seed)``'s second child's two children."""
    _, dealing = np.random.default_rng(seed).spawn(2)
    holding, split = dealing.spawn(2)
    return holding, split


def dealt_rows(own: OwnTable, params: DatasetParams, party: str, seed: int) -> np.ndarray:
    """The rows of `own` that the prepare stage deals to `party`, in that party's order.

    :func:`~ppml.data.partition.vertical_holdings` draws from the row count alone, so over the label holder's
    row order (which every party's file must share) each party finds its own holding without the others'.
    """
    n, d = len(own.ids), sum(params.split)
    table = Table(ids=own.ids, X=sp.csr_matrix((n, d)), columns=tuple(f"c{j}" for j in range(d)),
                  y=np.zeros(n, dtype=np.int8))
    holdings = vertical_holdings(table, parties=params.parties, split=params.split,
                                 private_fraction=params.private_fraction, rng=_streams(seed)[0])
    return next(h.rows for h in holdings if h.name == party)


def _check_dataset(key: str, params: DatasetParams, party: str) -> None:
    where = f"datasets.{key}"
    if params.partition != "vertical":
        raise ParamError(f"{where}.partition: per-party prepare is for vertical data, got {params.partition!r}")
    if params.reader not in OWN_FILE_READERS:
        raise ParamError(f"{where}.reader: per-party prepare reads one file per party "
                         f"({', '.join(OWN_FILE_READERS)}), got {params.reader!r}")
    if party not in params.parties:
        raise ParamError(f"--party {party!r} holds no data of dataset {key!r} (its parties: "
                         f"{', '.join(params.parties)}) and takes no part in its prepare; copy manifest.json "
                         "(public facts only) from the label holder's output")


def _check_columns(own: OwnTable, key: str, params: DatasetParams, party: str) -> None:
    want = params.split[list(params.parties).index(party)]
    if len(own.columns) != want:
        raise ParamError(f"{own.file}: {len(own.columns)} feature columns, but datasets.{key}.split gives "
                         f"party {party!r} {want}")


# ---------------------------------------------------------------------------------------------------------
# the protocol: one program per party, over its own endpoint


def _normalized(params: DatasetParams, name: str, columns: tuple[str, ...], X: np.ndarray, test: np.ndarray,
                ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """This party's block normalized as the prepare stage does (and checked the same way)."""
    raw_train, raw_test = X[~test], X[test]
    try:
        X_train, X_test = VERTICAL[params.normalize](raw_train, raw_test)
    except NotZScoredError as exc:
        raise NormalizationError(
            f"party {name}: fate_zscore keeps the values as given, so they must be z-scores already, but column "
            f"{columns[exc.column]!r} holds {exc.value:g}, beyond {ZSCORE_BOUND:.0f}: these data are not "
            "z-scored; choose normalize: zscore_block_rows, or scale the file") from None
    check_normalized(params.normalize, raw_train, X_train, ids[~test], columns, party=name, train=True)
    check_normalized(params.normalize, raw_test, X_test, ids[test], columns, party=name, train=False)
    return X_train, X_test


def _traffic(network: PeerNetwork) -> tuple[int, int]:
    """This party's alignment messages and bytes sent."""
    sent = [m for m in network.messages if m.tag in ALIGNMENT_TAGS]
    return len(sent), sum(m.nbytes for m in sent)


def party_program(endpoint: Endpoint, _: Any, *, key: str, params: DatasetParams, seed: int, holding: str,
                  own: OwnTable, rows: np.ndarray, staging: Path, network: PeerNetwork,
                  max_request: int | None = None) -> dict[str, Any]:
    """One party's prepare (steps 1-5 of the module docstring); writes its shard into `staging` and returns
    the manifest every party writes."""
    me, holder = endpoint.name, params.label_holder
    others = [p for p in params.parties if p != holder]
    if holding == "dealt":
        _compare_files(endpoint, own, holder, others)
    ids = own.ids[rows]
    if me == holder:
        aligned, mine = align_as_holder(endpoint, ids, others, method=params.alignment)
        test = stratified_test_mask(own.y[rows][mine], test_fraction=params.test_fraction, rng=_streams(seed)[1])
        endpoint.broadcast(others, "test_rows", test.astype(np.int8))
    else:
        # with one shared id column (dealt) the label holder's rows are among this file's: its PSI request
        # holds at most this file's ids; with own tables the bound is the caller's (max_request)
        bound = len(own.ids) if holding == "dealt" else max_request
        aligned, mine = align_as_member(endpoint, ids, holder, method=params.alignment, max_request=bound)
        test = _test_mask(endpoint.recv(holder, "test_rows"), holder, len(aligned), params.test_fraction)
    entities = rows[mine]
    X_train, X_test = _normalized(params, me, own.columns, own.X[entities], test, aligned)
    labels = None if own.y is None else own.y[entities]
    party = Party(name=me, columns=own.columns, ids=aligned[~test], X=X_train,
                  y=None if labels is None else labels[~test], test_ids=aligned[test], X_test=X_test,
                  y_test=None if labels is None else labels[test])
    entry = write_shard(staging, party, rows_before=len(rows), rows_after=len(entities))
    facts = {"entry": entry, "traffic": list(_traffic(network)), "aligned": ids_digest(aligned)}
    if me != holder:
        endpoint.send(holder, "prepared_entry", facts)
        return _check_manifest(endpoint.recv(holder, "manifest"), holder, key=key, entry=entry,
                               aligned=facts["aligned"], test=test)
    manifest = _manifest(key, params, seed, holding, n=len(own.ids), facts={me: facts, **{
        name: _check_entry(endpoint.recv(name, "prepared_entry"), name) for name in others}}, test=test)
    endpoint.broadcast(others, "manifest", manifest)
    return manifest


def _test_mask(payload: Any, holder: str, rows: int, test_fraction: float) -> np.ndarray:
    """The label holder's test mask, checked: 0/1 for each aligned row, and as many test rows as a stratified
    split of two classes draws (``round(test_fraction * n_c)`` per class: within one row of
    ``test_fraction * rows``), so at least one training row."""
    mask = expect.vector(payload, sender=holder, tag="test_rows", length=rows, dtype="int", low=0, high=1)
    count = int(np.count_nonzero(mask))
    if abs(count - test_fraction * rows) > 1.0 + 1e-9 or count == rows:
        raise ProtocolError(f"{holder!r} sent 'test_rows' marking {count} of {rows} rows for testing, where the "
                            f"split's test_fraction {test_fraction:g} draws {test_fraction * rows:.1f} (within one)")
    return mask.astype(bool)


def _check_entry(payload: Any, sender: str) -> dict[str, Any]:
    """A party's ``prepared_entry`` (its manifest entry, alignment traffic and digest of the aligned ids),
    checked where the label holder receives it: it must describe the sender's own shard."""
    tag = "prepared_entry"
    expect.mapping(payload, ("entry", "traffic", "aligned"), sender=sender, tag=tag)
    entry = expect.mapping(payload["entry"], ENTRY_KEYS, sender=sender, tag=tag, what="entry")
    if entry["name"] != sender or entry["file"] != f"{sender}.npz":
        raise ProtocolError(f"{sender!r} sent {tag!r} describing {str(entry['name'])[:40]!r} "
                            f"({str(entry['file'])[:40]!r}), not its own shard {sender}.npz")
    for field in ("columns", "rows_before", "rows_after", "train_rows", "test_rows"):
        expect.integer(entry[field], sender=sender, tag=tag, what=f"entry.{field}", low=0, high=2**40)
    expect.flag(entry["label_holder"], sender=sender, tag=tag, what="entry.label_holder")
    names = entry["column_names"]
    if (not isinstance(names, list) or len(names) != entry["columns"]
            or not all(isinstance(c, str) and len(c) <= 200 for c in names)):
        raise ProtocolError(f"{sender!r} sent {tag!r} whose column_names are not {entry['columns']} short names")
    traffic = payload["traffic"]
    if not (isinstance(traffic, list) and len(traffic) == 2):
        raise ProtocolError(f"{sender!r} sent {tag!r} whose traffic is not [messages, bytes]")
    for i, what in enumerate(("messages", "bytes")):
        expect.integer(traffic[i], sender=sender, tag=tag, what=f"traffic.{what}", low=0, high=2**50)
    expect.text(payload["aligned"], sender=sender, tag=tag, what="aligned", max_length=100)
    return payload


def _check_manifest(payload: Any, holder: str, *, key: str, entry: dict[str, Any], aligned: str,
                    test: np.ndarray) -> dict[str, Any]:
    """The manifest the label holder sent, checked before this party writes anything: a manifest of this
    dataset whose entry for this party is the one it wrote itself (its file name included) and whose counts
    and digest of the shared ids are what this party aligned and split. The party never adopts another's
    description of its own files."""
    tag = "manifest"
    manifest = expect.mapping(payload, MANIFEST_KEYS, sender=holder, tag=tag, optional=("prepared",))
    parties = manifest["parties"]
    if not isinstance(parties, list) or not all(isinstance(e, dict) for e in parties):
        raise ProtocolError(f"{holder!r} sent {tag!r} whose parties are not a list of entries")
    mine = [e for e in parties if e.get("name") == entry["name"]]
    problems = []
    if manifest["dataset"] != key:
        problems.append(f"dataset {str(manifest['dataset'])[:40]!r}, not {key!r}")
    if mine != [entry]:
        problems.append(f"its entry for {entry['name']!r} is not the one {entry['name']!r} wrote")
    for e in parties:
        name = e.get("file")
        if not isinstance(name, str) or "/" in name or "\\" in name or name in ("", ".", ".."):
            problems.append(f"a shard file name {str(name)[:40]!r} that is not a plain file name")
    split = manifest["split"] if isinstance(manifest["split"], dict) else {}
    if split.get("train") != int((~test).sum()) or split.get("test") != int(test.sum()):
        problems.append("its split's row counts are not those of the test mask it sent")
    alignment = manifest["alignment"] if isinstance(manifest["alignment"], dict) else {}
    if alignment.get("shared_ids") != len(test):
        problems.append(f"its shared_ids are not the {len(test)} ids aligned")
    prepared = manifest.get("prepared")
    if not isinstance(prepared, dict) or prepared.get("shared_ids_sha256") != aligned:
        problems.append("its digest of the shared ids is not this party's")
    if problems:
        raise ProtocolError(f"{holder!r} sent a {tag!r} that this party cannot write: {'; '.join(problems[:3])}")
    return manifest


def _compare_files(endpoint: Endpoint, own: OwnTable, holder: str, others: list[str]) -> None:
    """``holding: dealt``: the label holder checks that every file's id column is its own."""
    digest = ids_digest(own.ids)
    if endpoint.name != holder:
        endpoint.send(holder, "file_ids_digest", digest)
        return
    for name in others:
        theirs = expect.text(endpoint.recv(name, "file_ids_digest"), sender=name, tag="file_ids_digest",
                             max_length=100)
        if theirs != digest:
            raise AlignmentError(
                f"party {name!r}'s file lists other ids or another order than {own.file} ({len(own.ids)} ids): "
                "holding dealt replays the prepare stage's dealing over one shared id column (FATE's hetero "
                "files share theirs); give --holding own when each file is its party's own table")


def _manifest(key: str, params: DatasetParams, seed: int, holding: str, *, n: int, facts: dict[str, dict],
              test: np.ndarray) -> dict[str, Any]:
    """The prepare stage's manifest, in its key order, from the parties' public facts."""
    digests = {name: f["aligned"] for name, f in facts.items()}
    if len(set(digests.values())) != 1:
        raise AlignmentError(f"the parties aligned different ids (digests {digests})")
    entries = [facts[name]["entry"] for name in params.parties]
    shared = int(len(test))
    source = {"source": params.source, "reader": params.reader, "rows": n if holding == "dealt" else None,
              "columns": int(sum(params.split))}
    return {
        "dataset": key, "available": True, "partition": params.partition, "source": source,
        "parties": entries, "evaluator": None,
        "alignment": {"method": params.alignment, "label_holder": params.label_holder,
                      "private_fraction": params.private_fraction if holding == "dealt" else None,
                      "shared_ids": shared,
                      "dropped": {e["name"]: int(e["rows_before"] - shared) for e in entries},
                      "messages": sum(f["traffic"][0] for f in facts.values()),
                      "bytes": sum(f["traffic"][1] for f in facts.values())},
        "split": {"method": "stratified", "test_fraction": params.test_fraction, "train": int((~test).sum()),
                  "test": int(test.sum())},
        "normalization": {"method": params.normalize}, "seed": seed, "params": manifest_params(params),
        "prepared": {"by": "each party its own file (python -m ppml.party --prepare)", "holding": holding,
                     "shared_ids_sha256": digests[params.label_holder]},
    }


# ---------------------------------------------------------------------------------------------------------
# the command


def prepare_party(*, dataset: str, party: str, raw_file: str | Path | None, peers_file: str | Path,
                  params_file: str | Path = "params.yaml", out_dir: str | Path | None = None, holding: str = "dealt",
                  connect_timeout: float = CONNECT_TIMEOUT, timeout: float = DEFAULT_TIMEOUT,
                  max_request: int | None = None) -> dict[str, Any]:
    """Prepare party `party`'s own shard of `dataset` with its peers (see the module docstring).

    Parameters
    ----------
    dataset : str
        Key of ``datasets`` in the params file.
    party : str
        This party: one of the dataset's parties.
    raw_file : path
        This party's raw CSV file (id column; the label holder's also the label).
    peers_file : path
        The peers file (:mod:`ppml.network.peers`); it must name every party of the dataset.
    params_file : path
        params.yaml: ``seed`` and ``datasets.<dataset>``, the same at every party (the links compare them).
    out_dir : path, optional
        Where this party's shard and the manifest go (default ``data/prepared/<dataset>``); replaced whole.
    holding : {"dealt", "own"}
        Replay the prepare stage's dealing over the shared id column, or take the file as it stands.
    connect_timeout, timeout : float
        Seconds to link to every peer; seconds to wait for one message.
    max_request : int, optional
        ``holding: own``, a party other than the label holder: the most ids the label holder's PSI request
        may hold (refused beyond). With ``holding: dealt`` the bound is this party's own file's row count.

    Returns
    -------
    dict
        The manifest written.

    Raises
    ------
    ParamError, FileNotFoundError, ValueError
        Bad parameters, a missing or malformed raw file, ids that cannot be aligned, a failed normalization:
        named by file, key or party, before any link is opened when they are this party's own.
    ProtocolError
        A peer unreachable, refused, failed or gone.
    """
    if holding not in HOLDINGS:
        raise ParamError(f"--holding must be one of {list(HOLDINGS)}, got {holding!r}")
    params_doc = load_params(params_file)
    seed = section(params_doc, "seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ParamError(f"{params_file}: seed must be an integer, got {seed!r}")
    check("seed", seed, ge=0)
    params = dataset_params(params_doc, dataset)
    _check_dataset(dataset, params, party)
    if raw_file is None:
        raise ParamError(f"--raw is required: party {party!r}'s own raw file of dataset {dataset!r}")
    id_column, label_column = OWN_FILE_READERS[params.reader]
    own = read_own(raw_file, label=party == params.label_holder, id_column=id_column, label_column=label_column)
    _check_columns(own, dataset, params, party)
    rows = dealt_rows(own, params, party, seed) if holding == "dealt" else np.arange(len(own.ids))
    names = tuple(params.parties)
    edges = {frozenset((params.label_holder, n)) for n in names if n != params.label_holder}
    peers = load_peers(peers_file, party, names)
    out = Path(out_dir) if out_dir is not None else Path("data/prepared") / dataset
    remove_stale_staging(out)
    net = PeerNetwork(party, names, edges, timeout)
    links = make_links("tls", net, peers.credentials, peers.identities, listen=peers.listen,
                       session=session_of_prepare(dataset, section(params_doc, f"datasets.{dataset}"), seed, holding),
                       pairs=edges, connect_timeout=connect_timeout)
    log.info("prepare %s: party %s (%d rows of %s) listening at %s; linking to %s", dataset, party, len(own.ids),
             own.file, links.address, ", ".join(f"{n}@{a}" for n, a in peers.addresses.items()))
    with staging_dir(out) as staging:
        try:
            links.connect(peers.addresses)
        except BaseException as exc:
            links.close(error=str(exc)[:300], timeout=1.0)
            raise
        kwargs = {"key": dataset, "params": params, "seed": seed, "holding": holding, "own": own, "rows": rows,
                  "staging": staging, "network": net, "max_request": max_request}
        try:
            manifest = run_program(links, party_program, None, kwargs, timeout=timeout)["result"]
        except NormalizationError as exc:
            raise NormalizationError(f"dataset {dataset!r}, {exc}") from None
        write_json(staging / MANIFEST, manifest)
    log.info("prepare %s: party %s wrote %s (%d shared ids; split %s)", dataset, party, out,
             manifest["alignment"]["shared_ids"], manifest["split"])
    return manifest
