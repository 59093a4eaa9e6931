"""Scoring new rows together: ``python -m ppml.party --predict``, one process per data party, over the same links.

A vertical model is split by columns (:mod:`ppml.launch.model`), so no party can score a row alone. Each data
party runs :func:`predict_party` with its own new raw CSV (an id column and its own features, no labels) and its
own block, and

1. the parties link as in training (mutual TLS, each organization its own CA); the hello compares the model
   every party brings (:func:`~ppml.launch.model.model_facts`: the training session, the params digest, every
   data party's block digest as exchanged at the end of training), so a block from another run, experiment or
   peer set is refused, naming the fact that differs;
2. the guest aligns the new ids with every host by the ECDH private set intersection
   (:func:`ppml.data.align.align_as_holder`; a host answers at most ``--psi-max-request`` ids, by default as
   many as its own file holds);
3. each party normalizes its new rows as its training rows were (the block's record) and computes its partial
   score X_k w_k on the aligned rows; each host sends its partial scores to the guest (:data:`PARTIAL_TAG`);
4. the guest adds them to its own X_B w_B and the intercept and writes ``predictions.csv`` (id, score,
   probability = sigmoid(score)) in the aligned ids' order; every party writes ``predict.json`` (what it did).

Threat model (FATE's for hetero-LR prediction): the guest learns every host's partial scores on the aligned rows
and which of its ids each host holds; a host learns the aligned ids and nothing of the scores. Nothing goes to
the arbiter, which takes no part (it holds no block).

Messages (besides the PSI's, :mod:`ppml.data.align`):

=====================  ======  =====  ===========================================================
tag                    src     dst    content
=====================  ======  =====  ===========================================================
``eval/partial``       host k  guest  X_k w_k on the aligned rows, in the aligned ids' order
=====================  ======  =====  ===========================================================
"""

from __future__ import annotations

import csv
import hashlib
import io
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import expit

from ppml.config import ParamError, all_experiments, load_params, section
from ppml.data.align import align_as_holder, align_as_member
from ppml.io import atomic_path, write_json
from ppml.launch.party import params_sha256
from ppml.launch.model import LINEAR_BLOCKS, apply_normalization, load_model, model_facts
from ppml.launch.prepare import OWN_FILE_READERS, read_own
from ppml.network import EVALUATION, expect
from ppml.network import tls_links  # noqa: F401 - it registers the carrier these links use
from ppml.network.endpoint import DEFAULT_TIMEOUT, Endpoint
from ppml.network.links import CONNECT_TIMEOUT, make_links, run_program
from ppml.network.peer import PeerNetwork
from ppml.network.peers import load_peers

__all__ = ["PARTIAL_TAG", "predict_party", "partial_scores"]

log = logging.getLogger(__name__)

#: host -> guest: the host's partial scores X_k w_k on the aligned rows (scoring traffic).
PARTIAL_TAG = EVALUATION + "partial"


def partial_scores(block: dict[str, Any], X: np.ndarray) -> np.ndarray:
    """X w of a party's block on its (normalized) rows; the guest's without the intercept."""
    return np.asarray(X @ np.asarray(block["weights"], dtype=np.float64), dtype=np.float64)


def _own_rows(raw_file: str | Path, block: dict[str, Any], id_column: str) -> tuple[np.ndarray, np.ndarray]:
    """(ids, X) of this party's new raw file, its columns in the block's order; a ParamError naming the file and
    the columns when they are not exactly the block's features (a label column included)."""
    own = read_own(raw_file, label=False, id_column=id_column)
    features = list(block["features"])
    missing = [c for c in features if c not in own.columns]
    extra = [c for c in own.columns if c not in features]
    if missing or extra:
        parts = [f"lacks {missing[:5]}" if missing else "", f"has {extra[:5]} that the model does not"
                 if extra else ""]
        raise ParamError(f"{raw_file}: its feature columns must be the model's ({len(features)} columns of "
                         f"party {block['party']!r}; an id column, no labels), but it "
                         f"{' and '.join(p for p in parts if p)}")
    order = [own.columns.index(c) for c in features]
    return own.ids, own.X[:, order]


def _program(endpoint: Endpoint, _: Any, *, block: dict[str, Any], ids: np.ndarray, X: np.ndarray, guest: str,
             hosts: list[str], max_request: int) -> dict[str, Any]:
    """One party's side of steps 2-4 (the module docstring); the alignment's seconds beside the result."""
    start = time.perf_counter()
    if endpoint.name == guest:
        aligned, rows = align_as_holder(endpoint, ids, hosts, method="psi")
        align_seconds = time.perf_counter() - start
        scores = np.zeros(len(aligned))
        for host in hosts:
            scores = scores + expect.vector(endpoint.recv(host, PARTIAL_TAG), sender=host, tag=PARTIAL_TAG,
                                            length=len(aligned), what="partial scores")
        scores = scores + partial_scores(block, X[rows]) + float(block["intercept"])
        return {"aligned": aligned, "scores": scores, "align_seconds": align_seconds}
    aligned, rows = align_as_member(endpoint, ids, guest, method="psi", max_request=max_request)
    align_seconds = time.perf_counter() - start
    endpoint.send(guest, PARTIAL_TAG, partial_scores(block, X[rows]))
    return {"aligned": aligned, "scores": None, "align_seconds": align_seconds}


def predict_party(*, experiment: str, party: str, peers_file: str | Path, raw_file: str | Path,
                  params_file: str | Path = "params.yaml", model_dir: str | Path | None = None,
                  out_dir: str | Path | None = None, seed_index: int = 0, max_request: int | None = None,
                  connect_timeout: float = CONNECT_TIMEOUT, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Score `raw_file`'s rows with the other data parties (see the module docstring); returns what was written
    to ``predict.json`` (the guest's also ``scores`` and ``ids``).

    Raises
    ------
    ParamError, FileNotFoundError, ValueError
        Bad input, named by file and key, before any link is opened: no such experiment, a party without a
        block, a model of another experiment or party or a changed block, a raw file whose columns are not the
        block's, a value the block's normalization refuses.
    ProtocolError
        A peer unreachable, refused (its model differs: named), failed or gone.

    The data parties are those the model's manifest names (the arbiter holds no block and takes no part); the
    raw file's id column is ``id``, as in ``--prepare``.
    """
    params = load_params(params_file)
    experiments = all_experiments(params)
    if experiment not in experiments:
        raise ParamError(f"{params_file}: no experiment {experiment!r} in any of the experiment sections")
    where, spec = experiments[experiment]
    if spec.get("algorithm") not in LINEAR_BLOCKS:
        raise ParamError(f"{where}.{experiment}.algorithm: joint scoring is for the vertical linear models "
                         f"({', '.join(sorted(LINEAR_BLOCKS))}), got {spec.get('algorithm')!r}")
    model = Path(model_dir) if model_dir is not None else Path("reports/party") / experiment / party
    out = Path(out_dir) if out_dir is not None else model / "predict"
    if (model / "arbiter.json").is_file() and not (model / "model").exists():
        raise ParamError(f"--party {party!r}: {model} is a coordinator's output; the arbiter holds no block of the "
                         "model and takes no part in scoring")
    block, manifest = load_model(model, experiment=experiment, party=party, seed_index=seed_index)
    if manifest["params_sha256"] != params_sha256(spec, section(params, "seed")):
        raise ParamError(f"{params_file}: {where}.{experiment} (or the seed) is not what {model} was trained with "
                         "(the params digest differs); score with the params file of that training")
    names = tuple(manifest["parties"])
    guest = manifest["guest"]
    hosts = [n for n in names if n != guest]
    id_column = "id"
    ids, X = _own_rows(raw_file, block, id_column)
    X = apply_normalization(block["normalization"], X, where=str(raw_file))
    peers = load_peers(peers_file, party, names)
    edges = {frozenset((guest, h)) for h in hosts}
    net = PeerNetwork(party, names, edges, timeout)
    links = make_links("tls", net, peers.credentials, peers.identities, listen=peers.listen,
                       session=f"predict:{experiment}", pairs=edges, connect_timeout=connect_timeout,
                       facts=model_facts(manifest))
    log.info("predict %s: party %s (%d rows of %s) listening at %s; linking to %s", experiment, party, len(ids),
             raw_file, links.address, ", ".join(f"{n}@{a}" for n, a in peers.addresses.items()))
    start = time.perf_counter()
    try:
        links.connect(peers.addresses)
    except BaseException as exc:
        links.close(error=str(exc)[:300], timeout=1.0)
        raise
    kwargs = {"block": block, "ids": ids, "X": X, "guest": guest, "hosts": hosts,
              "max_request": len(ids) if max_request is None else max_request}
    result = run_program(links, _program, None, kwargs, timeout=timeout)["result"]
    seconds = time.perf_counter() - start
    aligned = result["aligned"]
    record = {"experiment": experiment, "party": party, "seed_index": seed_index, "rows": int(len(ids)),
              "aligned": int(len(aligned)),
              "aligned_ids_sha256": "sha256:" + hashlib.sha256("\n".join(map(str, aligned)).encode()).hexdigest(),
              "model_sha256": manifest["model_sha256"], "seconds": seconds,
              "seconds_clock": "this party's wall clock from linking to its peers to the end of scoring",
              "align_seconds": result["align_seconds"],
              "align_seconds_clock": "this party's wall clock around the private set intersection"}
    out.mkdir(parents=True, exist_ok=True)
    if result["scores"] is not None:
        _write_predictions(out / "predictions.csv", aligned, result["scores"])
        record["predictions"] = "predictions.csv"
    write_json(out / "predict.json", record)
    log.info("predict %s: party %s scored %d aligned rows of %d in %.1f s%s", experiment, party, len(aligned),
             len(ids), seconds, f"; wrote {out / 'predictions.csv'}" if result["scores"] is not None else "")
    if result["scores"] is not None:
        record = {**record, "ids": aligned, "scores": result["scores"]}
    return record


def _write_predictions(path: Path, ids: np.ndarray, scores: np.ndarray) -> None:
    """id, score, probability per aligned row (floats as their shortest exact repr), atomically."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["id", "score", "probability"])
    for i, s, p in zip(ids, scores.tolist(), expit(scores).tolist()):
        writer.writerow([i, repr(s), repr(p)])
    with atomic_path(path) as tmp:
        tmp.write_text(text.getvalue())
