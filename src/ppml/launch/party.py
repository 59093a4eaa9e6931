"""One party of ``transport: grpc``: its own process, shard, certificate and links (``python -m ppml.party``).

Every organization runs its party with the same experiment block and seed, its own shard (the prepared
dataset's manifest, which holds only public facts, and its own shard file) and its own peers file
(:mod:`ppml.network.peers`). The process builds the run's roles from the public facts exactly as every other
party does, runs its own role's program over links to its peers (:mod:`ppml.network.links`) and writes what
it saw into its output directory:

- ``comm.json``: per seed, its identity and address, its peers' identities and addresses, what each peer's
  certificate presented (``presented``: identity, issuer, sha256 fingerprint), what it sent
  (messages, bytes, ciphertexts, per tag) and what it received;
- where its program returns the run's history (the label holder, the evaluator, FDML's server):
  ``history.json``, ``metrics.json`` and ``timing.json`` (its clocks, :mod:`ppml.timing`) of its own
  records; the Paillier protocols' arbiter writes ``arbiter.json`` (its batch losses and key facts);
- a data party of the Paillier protocols: its own block of the model and its manifest, ``model/seed<i>.json``
  (:mod:`ppml.launch.model`), exchanged digests included; no file holds another party's weights. The run's privacy ledger and the other parties' facts stay with them: ``run.json`` says
  ``assembled: false``. (The train stage with ``transport: grpc`` starts every party on this machine and
  assembles the whole run, as for every transport; :mod:`ppml.launch.local`.)

Links agree on a session (the experiment name, a digest of its block and the seed, and the seed index), on the
parameters themselves (:func:`param_facts`, so that a difference is named by its key) and on the public facts
of the prepared data (:func:`data_facts`: the parties' columns and row counts, the split, the alignment), so two
parties with different parameters, or whose data were prepared differently, refuse each other at the hello,
naming what differs, instead of computing garbage.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import pickle
from pathlib import Path
from typing import Any

from ppml.config import ParamError, all_experiments, load_params, section
from ppml.io import write_json
from ppml.launch.checkpoint import Checkpoints
from ppml.launch.model import (LINEAR_BLOCKS, MODEL_TAGS, block_sha256, exchange_digests, model_block,
                               normalization_of, write_model)
from ppml.network import grpc_links, tls_links  # noqa: F401 - they register the carriers ``links`` may name
from ppml.network.endpoint import DEFAULT_TIMEOUT
from ppml.network.links import CONNECT_TIMEOUT, OWN_FACTS, make_links, printable, run_program
from ppml.network.ownfiles import read_own_json
from ppml.network.peer import PeerNetwork
from ppml.network.peers import load_peers
from ppml.timing import is_timing, timing_record

log = logging.getLogger(__name__)

__all__ = ["run_party", "session_of", "params_sha256", "param_facts", "data_facts", "shard_facts", "own_shard",
           "fail_line"]


def params_sha256(block: dict[str, Any], seed: int) -> str:
    """The digest of an experiment's block and the seed (hex)."""
    return hashlib.sha256(json.dumps({"block": block, "seed": seed}, sort_keys=True, default=str).encode()).hexdigest()


def session_of(experiment: str, block: dict[str, Any], seed: int, index: int) -> str:
    """What both ends of every link must agree on: the experiment, its parameters and the seed."""
    return f"{experiment}:{params_sha256(block, seed)[:16]}:seed{index}"


def param_facts(block: dict[str, Any], seed: int) -> dict[str, Any]:
    """The experiment's parameters as hello facts (``param.<key>``, in the block's order, then ``param.seed``),
    so that peers whose blocks differ are told which key differs first; a value that is not a short scalar is
    given by its digest, and a block of more than 64 keys by its first 64 (the session digest covers all)."""
    facts: dict[str, Any] = {}
    for key, value in list(block.items())[:64]:
        if not (value is None or isinstance(value, (bool, int, float)) or (isinstance(value, str)
                                                                           and len(value) <= 200)):
            text = json.dumps(value, sort_keys=True, default=str)
            value = "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]
        facts[f"param.{str(key)[:190]}"] = value
    facts["param.seed"] = seed
    return facts


def data_facts(manifest: dict[str, Any]) -> dict[str, Any]:
    """The public facts of a prepared dataset that every party of a run shares, from its manifest.json.

    Parameters
    ----------
    manifest : dict
        What the prepare stage wrote (:mod:`ppml.data.prepare`).

    Returns
    -------
    dict of str to scalar
        Flat and bounded, for the hello of every link (:class:`~ppml.network.links.Links`), in this order:
        the partition and the parties; the split (its method, test fraction and row counts); the alignment's
        method, shared ids and any digest the manifest holds (the alignment's, and the digest of the shared
        ids that ``--prepare`` writes under ``prepared``); per party (and the evaluator) its columns,
        training and test rows and whether it holds the labels; the seed the data were prepared with. A fact
        the manifest lacks is left out; a value that is not a short scalar is replaced by its digest.
    """
    facts: dict[str, Any] = {"partition": manifest.get("partition")}
    entries = [e for e in list(manifest.get("parties") or [])[:32] if isinstance(e, dict)]
    facts["parties"] = ",".join(str(e.get("name")) for e in entries)
    for block, keys in (("split", ("method", "test_fraction", "train", "test")),
                        ("alignment", ("method", "shared_ids")), ("prepared", ("holding",))):
        given = manifest.get(block) or {}
        if isinstance(given, dict):
            keys = keys + tuple(k for k in given if ("digest" in k or "sha256" in k) and k not in keys)
            facts.update({f"{block}.{k}": given[k] for k in keys if k in given})
    if manifest.get("evaluator") is not None:
        entries.append({**manifest["evaluator"], "name": "evaluator"})
    for entry in entries:
        for key in ("columns", "train_rows", "test_rows", "label_holder"):
            if key in entry:
                facts[f"{entry.get('name')}.{key}"] = entry[key]
    if "seed" in manifest:
        facts["prepare.seed"] = json.dumps(manifest["seed"], sort_keys=True)
    # scalars only, bounded (a hello carries at most MAX_FACTS of them); anything else by its digest
    for key, value in facts.items():
        if not (value is None or isinstance(value, (bool, int, float))) and (not isinstance(value, str)
                                                                            or len(value) > 200):
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
            facts[key] = "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]
    return {k[:200]: v for k, v in facts.items()}


def shard_facts(shard: Any, partition: Any) -> dict[str, Any]:
    """The facts a party derives from its own shard, for the hello (:data:`~ppml.network.links.OWN_FACTS`):
    with vertical data every party holds the same entities in the same order, so the digest of its training
    ids and then its test ids must be every data party's; a shard aligned over other ids (even with the same
    counts) is named at the hello. Nothing for other partitions (each agent holds rows of its own)."""
    if shard is None or partition != "vertical":
        return {}
    test = () if shard.test_ids is None else shard.test_ids
    text = "\n".join(str(i) for i in shard.ids) + "\n--test--\n" + "\n".join(str(i) for i in test)
    return {f"{OWN_FACTS}ids_sha256": "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:32]}


def own_shard(data_dir: Path, manifest: dict[str, Any], shard: str) -> Path:
    """This party's shard file, as its own manifest names it, refused unless it is a plain file name (no
    directory part) naming a regular file inside `data_dir`: a manifest (the label holder hands one out)
    never leads a party to read outside its own data directory."""
    from ppml.runtime import EVALUATOR

    where = data_dir / "manifest.json"
    entries = {e.get("name"): e for e in manifest.get("parties") or [] if isinstance(e, dict)}
    if isinstance(manifest.get("evaluator"), dict):
        entries[EVALUATOR] = manifest["evaluator"]
    if shard not in entries:
        raise ParamError(f"{where}: lists no shard of this party ({shard!r}; it lists {sorted(map(str, entries))})")
    name = entries[shard].get("file")
    if (not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name
            or "\0" in name or not name.endswith(".npz")):
        raise ParamError(f"{where}: the file of shard {shard!r} must be a plain .npz file name inside {data_dir}, "
                         f"got {printable(repr(name))[:120]}")
    path = data_dir / name
    try:
        inside = path.resolve().parent == data_dir.resolve()
    except OSError:
        inside = False
    if not inside:
        raise ParamError(f"{where}: the file of shard {shard!r}, {name}, leads outside {data_dir}")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: this party's shard {shard!r}, listed in {where}, is missing or not a "
                                "regular file")
    return path


def run_party(*, experiment: str, party: str, peers_file: str | Path, params_file: str | Path,
              data_dir: str | Path | None, out_dir: str | Path | None, result_file: str | Path | None = None,
              connect_timeout: float = CONNECT_TIMEOUT, resume: bool = False) -> list[dict[str, Any]]:
    """Run party `party` of `experiment` for every seed; returns its output per seed (see :func:`run_program`).

    The Paillier protocols' parties checkpoint every epoch under `out_dir` (:mod:`ppml.launch.checkpoint`); with
    `resume` they continue from the latest epoch every party holds.

    Raises
    ------
    ParamError, FileNotFoundError, ShardError
        Bad input, named by file and key, before any link is opened (or when this party's data do not fit).
    ProtocolError
        A peer that cannot be reached, is not who the peers file says, failed or broke its link.
    """
    from ppml.algorithms import make_network
    from ppml.algorithms._hetero_names import ARBITER
    from ppml.data.prepared import load_shard
    from ppml.experiment import check_delta, experiment_params
    from ppml.privacy.noise import run_generator
    from ppml.runtime import Public, here

    params = load_params(params_file)
    experiments = all_experiments(params)
    if experiment not in experiments:
        raise ParamError(f"{params_file}: no experiment {experiment!r} in any of the experiment sections")
    where, block = experiments[experiment]
    seed = section(params, "seed")
    module, p, seeds = experiment_params(experiment, block, section=where)
    if not hasattr(module, "roles"):
        raise ParamError(f"{where}.{experiment}.algorithm: {block['algorithm']!r} runs in one process only")
    data = Path(data_dir) if data_dir is not None else Path("data/prepared") / str(block["dataset"])
    out = Path(out_dir) if out_dir is not None else Path("reports/party") / experiment / party
    if not (data / "manifest.json").exists():
        raise FileNotFoundError(f"{data / 'manifest.json'}: missing. A data party prepares its shard first (the "
                                "prepare stage, or python -m ppml.party --prepare); a party without data (the "
                                "Paillier arbiter) copies the label holder's manifest.json there (public facts "
                                "only), or gives --data the directory holding it")
    manifest = read_own_json(data / "manifest.json", what="the prepared dataset's manifest")
    if not isinstance(manifest, dict):
        raise ParamError(f"{data / 'manifest.json'}: not a manifest (a JSON object), got a {type(manifest).__name__}")
    if not manifest.get("available", True):
        raise ParamError(f"{data}: dataset {block['dataset']!r} is not available here "
                         f"({manifest.get('reason', 'see its download stage')})")
    public = Public.from_manifest(manifest)
    check_delta(f"{where}.{experiment}", block, p, list(public.parties))
    timeout = float(block.get("timeout", DEFAULT_TIMEOUT))
    outputs = []
    peers = shard = None  # the same for every seed: read once
    for index in range(seeds):
        rng = run_generator(block.get("noise_source", "seeded"), [seed, index])
        network = make_network(module, list(public.parties), p, rng=rng)
        roles = {r.name: r for r in module.roles(public, p, rng=rng, network=network)}
        if party not in roles:
            raise ParamError(f"--party {party!r} is not a party of {experiment} (its parties: {', '.join(roles)})")
        names = tuple(n for n in network.names if n in roles)
        role = roles[party]
        if peers is None:
            peers = load_peers(peers_file, party, names)
            shard = None if role.shard is None else load_shard(own_shard(data, manifest, role.shard))
            facts = {**param_facts(block, seed), **data_facts(manifest),
                     **shard_facts(shard, manifest.get("partition"))}
        session = session_of(experiment, block, seed, index)
        checkpoints = None
        if block["algorithm"] in LINEAR_BLOCKS:  # refused before linking when they are another run's
            checkpoints = Checkpoints(out, session=session, party=party, seed_index=index, arbiter=ARBITER,
                                      peers=[n for n in names if n != party], resume=resume)
            checkpoints.check_own()
        net = PeerNetwork(party, names, network.edges, timeout)
        links = make_links(block.get("links", "tls"), net, peers.credentials, peers.identities,
                           listen=peers.listen, session=session, pairs=network.edges,
                           connect_timeout=connect_timeout, facts=facts)
        log.info("%s: seed %d/%d, party %s listening at %s; linking to %s", experiment, index + 1, seeds, party,
                 links.address, ", ".join(f"{n}@{a}" for n, a in peers.addresses.items()))
        try:
            links.connect(peers.addresses)
        except BaseException as exc:
            links.close(error=str(exc)[:300], timeout=1.0)
            raise
        program, kwargs = role.program, role.kwargs
        if checkpoints is not None:
            kwargs = {**kwargs, "checkpoints": checkpoints}
        keeps = block["algorithm"] in LINEAR_BLOCKS and shard is not None
        if keeps:
            program, kwargs = keep_block, {"program": role.program, "kwargs": kwargs, "spec": {
                "experiment": experiment, "algorithm": block["algorithm"], "dataset": str(block["dataset"]),
                "params_sha256": params_sha256(block, seed), "session": session, "seed_index": index,
                "normalization": normalization_of(str((manifest.get("normalization") or {}).get("method"))),
                "ids_sha256": facts.get(f"{OWN_FACTS}ids_sha256"),
                "guest": next(p.name for p in public.parties if p.is_label_holder),
                "hosts": [p.name for p in public.parties if not p.is_label_holder]}}
        output = run_program(links, program, shard, kwargs, timeout=timeout)
        output["where"] = {**here(), **links.describe()}
        peak = own_peak_mib()
        if peak is not None:  # this process's own, not its launcher's (see own_peak_mib)
            output["where"]["peak_rss_mib"] = peak
        output["peers"] = {n: {"identity": peers.identities[n], "address": a} for n, a in peers.addresses.items()}
        output["received"] = list(net.received)
        outputs.append(output)
    _write(out, experiment, block, party, outputs, result_file)
    return outputs


def keep_block(endpoint: Any, shard: Any, *, program: Any, kwargs: dict[str, Any], spec: dict[str, Any]) -> Any:
    """Run a data party's `program`, then build its block of the model and exchange the blocks' digests with the
    other data parties over the same links (:mod:`ppml.launch.model`); the program's result gains ``model``
    (the block) and ``model_digests``."""
    result = program(endpoint, shard, **kwargs)
    block = model_block(experiment=spec["experiment"], algorithm=spec["algorithm"], dataset=spec["dataset"],
                        party=shard.name, label_holder=shard.is_label_holder, params_sha256=spec["params_sha256"],
                        session=spec["session"], seed_index=spec["seed_index"], columns=tuple(shard.columns),
                        theta=result["theta"], normalization=spec["normalization"], ids_sha256=spec["ids_sha256"])
    digests = exchange_digests(endpoint, block_sha256(block), guest=spec["guest"], hosts=spec["hosts"])
    return {**result, "model": block, "model_digests": digests}


def own_peak_mib() -> float | None:
    """This process's own peak resident memory in MiB (Linux's VmHWM), or None where /proc does not say.

    ``getrusage``'s peak (:func:`ppml.runtime.here`) is not this process's own when a large process started
    it: Linux carries the parent's peak across the fork and exec that started it (a party started by the
    train stage reported the stage's 529 MiB where its own peak was under 300).
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _traffic(items: list[tuple[str, str, int, int]]) -> dict[str, Any]:
    tags: dict[str, dict[str, int]] = {}
    for _, tag, nbytes, ciphertexts in items:
        t = tags.setdefault(tag, {"messages": 0, "bytes": 0, "ciphertexts": 0})
        t["messages"] += 1
        t["bytes"] += nbytes
        t["ciphertexts"] += ciphertexts
    return {"messages": len(items), "bytes": sum(i[2] for i in items), "ciphertexts": sum(i[3] for i in items),
            "tags": tags}


def _write(out: Path, experiment: str, block: dict[str, Any], party: str, outputs: list[dict[str, Any]],
           result_file: str | Path | None) -> None:
    """This party's files; metrics.json last (it marks a complete run), the launcher's result file before it.

    The model digests' exchange after training is counted apart (``model_exchange``), so that the run's
    traffic is the in-process run's."""
    def run_comm(o: dict[str, Any]) -> dict[str, Any]:
        sent = [(m[0], m[1], m[3], m[4]) for m in o["messages"]]
        received = list(o["received"])
        record = {"party": party, **o["where"], "peers": o["peers"], "rounds": o["rounds"],
                  "sent": _traffic([m for m in sent if m[1] not in MODEL_TAGS]),
                  "received": _traffic([m for m in received if m[1] not in MODEL_TAGS])}
        if any(m[1] in MODEL_TAGS for m in sent + received):
            record["model_exchange"] = {"sent": _traffic([m for m in sent if m[1] in MODEL_TAGS]),
                                        "received": _traffic([m for m in received if m[1] in MODEL_TAGS])}
        return record

    write_json(out / "comm.json", {"runs": [run_comm(o) for o in outputs]})
    for o in outputs:
        if isinstance(o["result"], dict) and "model" in o["result"]:
            write_model(out, o["result"]["model"], o["result"]["model_digests"])
    arbiter = [o["result"] for o in outputs if isinstance(o["result"], dict) and "losses" in o["result"]
               and "public_key" in o["result"]]
    if len(arbiter) == len(outputs):  # the Paillier protocols' coordinator: what it holds of the run
        write_json(out / "arbiter.json", {"experiment": experiment, "party": party, "runs": [{
            "epochs": len(r["losses"]), "batch_loss": r["losses"], "public_key": r["public_key"],
            "curvature": r.get("curvature")} for r in arbiter],
            "note": "the coordinator's own facts; its private key was never written"})
    if result_file is not None:
        Path(result_file).write_bytes(pickle.dumps(outputs))
    histories = [_finished(o["result"]) for o in outputs if isinstance(o["result"], dict)
                 and hasattr(o["result"].get("history"), "to_dict")]
    if len(histories) == len(outputs):
        write_json(out / "history.json", {"runs": [h.to_dict() for h in histories]})
        write_json(out / "run.json", {"experiment": experiment, "algorithm": block["algorithm"],
                                      "dataset": block["dataset"], "party": party, "transport": "grpc",
                                      "assembled": False, "note": "this party's own records; the privacy ledger "
                                      "and the other parties' facts stay with them"})
        finals = [{k: v for k, v in h.final.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)} for h in histories]
        means = {k: sum(f[k] for f in finals) / len(finals) for k in finals[0] if all(k in f for f in finals)}
        timing = {k: v for k, v in means.items() if is_timing(k)}
        epochs = [r["seconds"] for r in histories[0].records if isinstance(r.get("seconds"), (int, float))]
        if "seconds_per_epoch" not in timing and epochs:  # the Paillier guest's clock around each epoch
            timing["seconds_per_epoch"] = sum(epochs) / len(epochs)
    own = sum(o["seconds"] for o in outputs) / len(outputs)
    _write_timing(out, experiment, {**(timing if len(histories) == len(outputs) else {}), "seconds": own})
    if len(histories) == len(outputs):
        write_json(out / "metrics.json", {k: v for k, v in means.items() if not is_timing(k)})


def _write_timing(out: Path, experiment: str, values: dict[str, Any]) -> None:
    """This party's own clocks, apart from results as the train stage writes them (:mod:`ppml.timing`):
    ``seconds`` is this party's wall clock around its role program, not the slowest party's."""
    record = timing_record(experiment, values, transport="grpc")
    record["basis"]["seconds"]["clock"] = ("mean over the seeds of: this party's own wall clock around its role "
                                           "program for one seed (its links already connected; waiting for the "
                                           "other parties to finish included)")
    write_json(out / "timing.json", record)


def _finished(result: dict[str, Any]) -> Any:
    """The history a program returned, finished: the decentralized protocols' evaluator returns it with what
    :meth:`History.finish` needs beside it (``final``, ``extra``), which assemble passes on; here it is finished
    with those alone (assemble's cross-party parts, such as the exact stopping rule, are not this party's)."""
    history = result["history"]
    if not history.final and isinstance(result.get("final"), dict):
        history = copy.deepcopy(history)
        history.finish(**result["final"], **(result.get("extra") or {}))
    return history


def fail_line(party: str, exc: BaseException) -> str:
    """The one line a failed party prints."""
    return printable(f"party {party}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")

