"""Each organization keeps its own model block: what a data party of the Paillier protocols writes after training.

A vertical logistic-regression model is split by columns: the guest holds the weights of its own features and
the intercept, each host the weights of its own features, and no party ever holds another's weights (the
arbiter holds none: it keeps the run's metrics; its private key is never written). At the end of training,
inside the same links, every data party

1. builds its block (:func:`model_block`): the experiment, its params digest and the run's session, its own
   feature names in order, the normalization it applied (:func:`normalization_of`), its weights (the guest also
   the intercept), and the digest of the ids it trained on;
2. exchanges the block's sha256 with the other data parties (:func:`exchange_digests`: each host sends its
   digest to the guest, the guest sends every host the digests of all; tags :data:`DIGEST_TAG` and
   :data:`PARTIES_TAG`, counted apart from the run's traffic);
3. writes ``model/seed<i>.json`` (the block) and ``model/seed<i>.manifest.json`` (its own digest and its peers').

Scoring new rows together (:mod:`ppml.launch.predict`) starts from these files: every party presents the
digests its manifest holds, so a party that brings a model from another run, experiment or peer set is named
at the hello (:func:`model_facts`).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from ppml.config import ParamError
from ppml.data.normalize import ZSCORE_BOUND
from ppml.io import write_json
from ppml.network import ProtocolError, expect
from ppml.network.ownfiles import read_own_json

__all__ = ["FORMAT", "LINEAR_BLOCKS", "DIGEST_TAG", "PARTIES_TAG", "MODEL_TAGS", "model_block", "block_sha256",
           "exchange_digests", "write_model", "load_model", "model_facts", "normalization_of",
           "apply_normalization", "model_dir"]

#: The format of a model block and of its manifest.
FORMAT = "ppml-vertical-lr-block/1"
#: Algorithms whose data parties each train a linear block of the model (the guest's with the intercept).
LINEAR_BLOCKS = frozenset({"paillier_sgd", "paillier_sqn"})
#: host -> guest: the sha256 of the host's block; guest -> every host: the digests of every data party's.
DIGEST_TAG = "model/sha256"
PARTIES_TAG = "model/parties"
MODEL_TAGS = frozenset({DIGEST_TAG, PARTIES_TAG})
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")
#: Normalizations a block can re-apply to new rows by itself: both act on each value or row alone (no statistic
#: of the training rows is needed). ``zscore_block_rows`` needs the training rows' column statistics, which the
#: prepared shard does not keep.
_ROW_WISE = {
    "fate_zscore": f"kept as given (the raw file holds z-scores already); a value beyond {ZSCORE_BOUND:g} in "
                   "magnitude is refused",
    "block_rows": "each row's block scaled to unit L2 norm (rows that are zero stay zero)",
}


def model_dir(out: Path) -> Path:
    """Where a party keeps its blocks, under its output directory."""
    return Path(out) / "model"


def normalization_of(method: str) -> dict[str, Any]:
    """The record of the normalization a party's block was trained on, as :func:`apply_normalization` reads it."""
    if method in _ROW_WISE:
        return {"method": method, "applies": _ROW_WISE[method]}
    return {"method": method, "applies": None,
            "why": f"{method} takes column statistics of the raw training rows, which the prepared shard does "
                   "not keep: new rows cannot be normalized as the training rows were"}


def apply_normalization(record: dict[str, Any], X: np.ndarray, *, where: str) -> np.ndarray:
    """New raw rows normalized as the block's training rows were; a ParamError naming `where` otherwise."""
    from ppml.data.normalize import VERTICAL

    method = record.get("method")
    if method not in _ROW_WISE:
        raise ParamError(f"{where}: the model's normalization {method!r} cannot be applied to new rows "
                         f"({record.get('why') or 'unknown method'})")
    if method == "fate_zscore":
        beyond = ~(np.abs(X) <= ZSCORE_BOUND)
        if beyond.any():
            row, column = np.argwhere(beyond)[0]
            raise ParamError(f"{where}: row {row}, column {column} holds {X[row, column]:g}, not a z-score "
                             f"(the model was trained on fate_zscore data, |value| <= {ZSCORE_BOUND:g})")
        return X
    return VERTICAL[method](X, X[:0])[0]


def model_block(*, experiment: str, algorithm: str, dataset: str, party: str, label_holder: bool,
                params_sha256: str, session: str, seed_index: int, columns: tuple[str, ...], theta: np.ndarray,
                normalization: dict[str, Any], ids_sha256: str | None) -> dict[str, Any]:
    """This party's block of the model (the guest's `theta` ends with the intercept)."""
    theta = [float(v) for v in np.asarray(theta, dtype=np.float64)]
    if len(theta) != len(columns) + bool(label_holder):
        raise ValueError(f"party {party!r}: {len(theta)} weights for {len(columns)} features"
                         f"{' and the intercept' if label_holder else ''}")
    block = {"format": FORMAT, "experiment": experiment, "algorithm": algorithm, "dataset": dataset,
             "party": party, "role": "guest" if label_holder else "host", "params_sha256": params_sha256,
             "session": session, "seed_index": seed_index, "features": list(columns),
             "normalization": normalization, "weights": theta[:len(columns)],
             "trained_on": {"ids_sha256": ids_sha256}}
    if label_holder:
        block["intercept"] = theta[-1]
    return block


def _canonical(block: dict[str, Any]) -> bytes:
    """The bytes a block is written as (and digested over): floats as Python's shortest repr, exact."""
    return (json.dumps(block, indent=2, allow_nan=False) + "\n").encode()


def block_sha256(block: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(_canonical(block)).hexdigest()


def _digest(payload: Any, *, sender: str, tag: str) -> str:
    if not isinstance(payload, str) or not _SHA256.fullmatch(payload):
        raise ProtocolError(f"{sender!r} sent {tag!r} that is not a model digest (sha256:<64 hex digits>)")
    return payload


def exchange_digests(endpoint: Any, own: str, *, guest: str, hosts: list[str]) -> dict[str, str]:
    """Every data party's block digest, {party: "sha256:..."} (the guest first, then the hosts in order), after
    the exchange of step 2 above.

    A host refuses a reply that lacks a party, names another, or reports its own digest otherwise than it sent
    it (a ProtocolError naming the guest); the guest refuses a host's message that is not a digest.
    """
    me = endpoint.name
    if me == guest:
        digests = {guest: own}
        for host in hosts:
            digests[host] = _digest(endpoint.recv(host, DIGEST_TAG), sender=host, tag=DIGEST_TAG)
        endpoint.broadcast(hosts, PARTIES_TAG, digests)
        return digests
    endpoint.send(guest, DIGEST_TAG, own)
    payload = endpoint.recv(guest, PARTIES_TAG)
    expect.mapping(payload, (guest, *hosts), sender=guest, tag=PARTIES_TAG)
    digests = {name: _digest(payload[name], sender=guest, tag=PARTIES_TAG) for name in (guest, *hosts)}
    if digests[me] != own:
        raise ProtocolError(f"{guest!r} sent {PARTIES_TAG!r} with a digest of {me!r}'s model that {me} did not "
                            f"send ({digests[me][:23]}..., its own {own[:23]}...)")
    return digests


def write_model(out: Path, block: dict[str, Any], digests: dict[str, str]) -> Path:
    """``model/seed<i>.json`` and its manifest (the manifest last: it marks a complete block); the block's path."""
    directory = model_dir(out)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"seed{block['seed_index']}.json"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(_canonical(block))
    tmp.replace(path)
    write_json(directory / f"seed{block['seed_index']}.manifest.json", {
        "format": FORMAT, "experiment": block["experiment"], "party": block["party"], "session": block["session"],
        "params_sha256": block["params_sha256"], "model_file": path.name, "model_sha256": block_sha256(block),
        "guest": next(iter(digests)), "parties": digests})
    return path


def load_model(directory: Path, *, experiment: str, party: str, seed_index: int) -> tuple[dict, dict]:
    """(block, manifest) of `party`'s model of `experiment` in `directory` (a party's training output), checked:
    both files present, of this format, experiment and party, and the block's digest the manifest's.

    Raises
    ------
    FileNotFoundError, ParamError
        Naming the file and what is wrong.
    """
    where = model_dir(Path(directory))
    block_path, manifest_path = where / f"seed{seed_index}.json", where / f"seed{seed_index}.manifest.json"
    for path in (block_path, manifest_path):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no model of seed index {seed_index} here (training writes it at the "
                                    "end of a run with --out; give --model that directory)")
    manifest = read_own_json(manifest_path, what="the model's manifest")
    block = read_own_json(block_path, what="the model block")
    for path, doc in ((manifest_path, manifest), (block_path, block)):
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ParamError(f"{path}: not a model file of format {FORMAT}")
        if doc.get("experiment") != experiment:
            raise ParamError(f"{path}: a model of experiment {doc.get('experiment')!r}, not of {experiment!r}")
        if doc.get("party") != party:
            raise ParamError(f"{path}: the model of party {doc.get('party')!r}, not of {party!r}")
    if block_sha256(block) != manifest.get("model_sha256"):
        raise ParamError(f"{block_path}: its sha256 is not the one {manifest_path.name} records (the block was "
                         "changed or comes from another run)")
    parties = manifest.get("parties")
    if not isinstance(parties, dict) or parties.get(party) != manifest["model_sha256"]:
        raise ParamError(f"{manifest_path}: lists no digest of this party's own block among its peers'")
    if manifest.get("guest") not in parties or not all(isinstance(n, str) for n in parties):
        raise ParamError(f"{manifest_path}: names no guest among the model's parties")
    return block, manifest


def model_facts(manifest: dict[str, Any]) -> dict[str, Any]:
    """What every party of a joint scoring must agree on (the hello's facts): the training session and each
    data party's block digest, as this party's manifest recorded them at the end of training."""
    facts: dict[str, Any] = {"model.session": str(manifest["session"])[:200],
                             "model.params_sha256": str(manifest["params_sha256"])[:200]}
    for name, digest in sorted(manifest["parties"].items())[:64]:
        facts[f"model.{str(name)[:64]}.sha256"] = str(digest)[:80]
    return facts
