"""Running one experiment of params.yaml: build parameters, run every seed, gather what the stage writes."""

from __future__ import annotations

import contextlib
import importlib
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from ppml.algorithms import ALGORITHMS, get_algorithm, make_network
from ppml.config import ParamError, build, check, flat_fields, section_of_algorithm
from ppml.history import History
from ppml.io import read_json
from ppml.network import CARRIERS, DEFAULT_TIMEOUT, MAX_TIMEOUT
from ppml.privacy.noise import NOISE_SOURCES, run_generator
from ppml.runtime import TRANSPORTS, Public
from ppml.timing import is_timing, timing_record

log = logging.getLogger(__name__)

#: keys of an experiment block that the stage reads itself (the rest are the algorithm's parameters)
STAGE_KEYS = ("algorithm", "dataset", "seeds", "description", "noise_source", "allow_large_delta", "transport",
              "timeout", "links")

#: the launcher (ppml.launch, above this module) that starts the party processes of a transport other than
#: inprocess. Loaded by name, and only for a block that uses it: so the code deps of a dvc.yaml train group hold
#: it, and the links and carriers it imports, only when one of the group's experiments runs on that transport
#: (ppml.codegraph)
LAUNCHERS = {"ray": "ppml.launch.ray_runner", "grpc": "ppml.launch.local"}

#: the algorithm each pipeline section holds (its dvc.yaml train group depends only on that algorithm's code)
SECTION_ALGORITHMS = {section_of_algorithm(a): a for a in ALGORITHMS}

#: parameters that are a differential-privacy delta, checked against the records they protect
DELTA_KEYS = ("delta", "delta_i1")

#: final fields aggregated over seeds as <key>_mean / <key>_std (and <key> = mean); ``seconds`` and its
#: spread go to timing.json (:func:`split_summary`)
AGGREGATED = ("train_objective", "train_logloss", "train_error", "test_logloss", "test_auc", "test_error",
              "test_accuracy", "epochs", "seconds")


def experiment_params(name: str, block: Any, *, section: str = "experiments") -> tuple[Any, Any, int]:
    """(module, validated Params, number of seeds) of experiment `name`; the stage keys are checked too."""
    path = f"{section}.{name}"
    if "." in name:
        raise ParamError(f"{path}: experiment names must not contain '.' (DVC reads it as a key separator); "
                         f"write {name.replace('.', '_')!r}")
    if not isinstance(block, dict):
        raise ParamError(f"{path} must be a mapping, got {block!r}")
    for key in ("algorithm", "dataset"):
        if key not in block:
            raise ParamError(f"{path}.{key} is required")
    allowed = SECTION_ALGORITHMS.get(section)
    if allowed is None and section != "experiments":
        raise ParamError(f"{section}: no algorithm {section.removesuffix('_experiments')!r} (sections are "
                         f"experiments and <algorithm>_experiments; algorithms: {', '.join(ALGORITHMS)})")
    if allowed is not None and block["algorithm"] != allowed:
        raise ParamError(f"{path}.algorithm must be {allowed!r} in {section} (its train stages depend only on "
                         f"that algorithm's code), got {block['algorithm']!r}; put the experiment in "
                         f"{section_of_algorithm(block['algorithm'])}")
    try:
        module = get_algorithm(block["algorithm"])
    except KeyError as exc:
        raise ParamError(f"{path}.algorithm: {exc.args[0]}") from None
    seeds = block.get("seeds", 1)
    if isinstance(seeds, bool) or not isinstance(seeds, int):
        raise ParamError(f"{path}.seeds must be an integer, got {seeds!r}")
    check(f"{path}.seeds", seeds, ge=1)
    source = check(f"{path}.noise_source", block.get("noise_source", "seeded"), choices=NOISE_SOURCES)
    if source == "os" and not getattr(module, "DP_NOISE", False):
        raise ParamError(f"{path}.noise_source: 'os' has nothing to draw: algorithm {block['algorithm']!r} adds "
                         "no differential-privacy noise")
    transport = check(f"{path}.transport", block.get("transport", "inprocess"), choices=TRANSPORTS)
    if transport != "inprocess" and not hasattr(module, "roles"):
        raise ParamError(f"{path}.transport: algorithm {block['algorithm']!r} runs in one process only")
    check(f"{path}.links", block.get("links", "tls"), choices=CARRIERS)
    if "links" in block and transport == "inprocess":
        raise ParamError(f"{path}.links: transport inprocess has no links (set transport: ray or grpc)")
    timeout = block.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ParamError(f"{path}.timeout must be a number of seconds, got {timeout!r}")
    check(f"{path}.timeout", float(timeout), gt=0, le=MAX_TIMEOUT)
    if not isinstance(block.get("allow_large_delta", False), bool):
        raise ParamError(f"{path}.allow_large_delta must be true or false, got {block['allow_large_delta']!r}")
    params = build(module.Params, block, path, ignore=STAGE_KEYS)
    return module, params, seeds


def check_delta(path: str, block: dict, params: Any, parties: list) -> None:
    """Refuse a delta that is not below 1/n, n the records one party's guarantee protects.

    Each party's data is the dataset its guarantee is about (a vertical party holds every row's features; a
    horizontal agent its own rows), so n is the largest party's row count. A delta of 1/n or more allows
    mechanisms that publish a record outright; ``allow_large_delta: true`` in the block accepts it anyway.
    """
    if block.get("allow_large_delta", False) or not parties:
        return
    n = max(p.n_samples for p in parties)
    for key in DELTA_KEYS:
        value = getattr(params, key, None)
        if value is not None and value >= 1.0 / n:
            raise ParamError(f"{path}.{key} must be below 1/n = {1.0 / n:.3g} (n = {n} records per "
                             f"party), got {value!r}; set allow_large_delta: true to accept it")


def shard_files(data_dir: Path, manifest: dict[str, Any]) -> dict[str, str]:
    """Each shard's file (absolute: a party's process may run elsewhere), by the name a Role asks for it."""
    from ppml.runtime import EVALUATOR

    entries = [(e["name"], e) for e in manifest["parties"]]
    if manifest.get("evaluator") is not None:
        entries.append((EVALUATOR, manifest["evaluator"]))
    out = {}
    for shard, entry in entries:
        path = (data_dir / entry["file"]).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"{path}: shard {shard!r} listed in {data_dir / 'manifest.json'} is missing")
        out[shard] = str(path)
    return out


def unavailable_metrics(name: str, block: dict, params: Any, reason: str) -> dict[str, Any]:
    return {"experiment": name, "algorithm": block["algorithm"], "dataset": block["dataset"],
            "status": f"not run: data unavailable ({reason})", **flat_fields(params)}


def _unavailable(name: str, block: dict, params: Any, reason: str) -> dict[str, Any]:
    described, metrics, timing = split_summary(unavailable_metrics(name, block, params, reason), params)
    return {"run": described, "metrics": metrics, "timing": timing, "history": {"runs": []},
            "ledger": {"runs": []}, "comm": {"runs": []}}


def split_summary(summary: dict[str, Any], params: Any
                  ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(run.json, metrics.json, timing.json) of a run's summary.

    metrics.json holds the run's numeric outcomes only, so that ``dvc metrics diff`` and ``dvc exp show``
    list what a change moved; timing.json every timing field (:func:`ppml.timing.is_timing`: wall clocks,
    simulated clocks, cost-model seconds, numbers or null), each with the clock it read
    (:func:`ppml.timing.timing_record`), since a time measures the machine's load as much as the method;
    run.json holds what the run was: its name, algorithm, dataset, status, transport, every parameter
    (numeric ones included, as DVC shows those from params.yaml; FDML's ``latency`` is a parameter, not a
    timing) and every other non-numeric field (labels, notes, flags, lists). Readers merge run.json and
    metrics.json (``{**run, **metrics}``) and read timing.json apart.
    """
    parameters = (set(flat_fields(params)) | {"seeds"}) - set(AGGREGATED)  # FDML's `epochs` is also an outcome
    described: dict[str, Any] = {}
    metrics: dict[str, Any] = {}
    timing: dict[str, Any] = {}
    for key, value in summary.items():
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if key in parameters:
            described[key] = value
        elif is_timing(key):
            timing[key] = value
        else:
            (metrics if numeric else described)[key] = value
    record = timing_record(str(summary.get("experiment")), timing,
                           transport=str(summary.get("transport", "inprocess")))
    return described, metrics, record


def run(name: str, block: dict, data_dir: str | Path, *, seed: int, section: str = "experiments"
        ) -> dict[str, Any]:
    """Run experiment `name` (of params.yaml's `section`) on the prepared data in `data_dir`.

    Returns ``{"run", "metrics", "timing", "history", "ledger", "comm"}`` ready to be written as JSON (see
    :func:`split_summary` for what goes to ``run``, ``metrics`` and ``timing``). A dataset marked unavailable
    gives ``status: "not run: data unavailable"`` in ``run``, no metrics, no timing and empty other parts.
    """
    from ppml.data.prepared import DataUnavailable, load_prepared

    module, params, seeds = experiment_params(name, block, section=section)
    path = f"{section}.{name}"
    manifest = read_json(Path(data_dir) / "manifest.json")
    if not manifest.get("available", True):
        reason = manifest.get("reason", "see the download stage")
        log.warning("%s: dataset %s unavailable, not run", name, block["dataset"])
        return _unavailable(name, block, params, reason)
    transport = block.get("transport", "inprocess")
    if transport == "inprocess":
        try:
            _, parties, evaluation = load_prepared(data_dir)
        except DataUnavailable as exc:
            return _unavailable(name, block, params, str(exc))
    else:  # each party loads its own shard in its own process; here only the manifest's public facts
        launcher = importlib.import_module(LAUNCHERS[transport])
        public = Public.from_manifest(manifest)
        parties, evaluation = list(public.parties), None
        shard_paths = shard_files(Path(data_dir), manifest)

    check_delta(path, block, params, parties)
    noise_source = block.get("noise_source", "seeded")
    histories: list[History] = []
    seconds: list[float] = []
    linked: list[dict[str, Any]] | None = None  # transport grpc: every seed's outputs, from the party processes
    with (launcher.ray_cluster() if transport == "ray" else contextlib.nullcontext()):
        for s in range(seeds):
            rng = run_generator(noise_source, [seed, s])
            log.info("%s: seed %d/%d, %s on %s (%s)", name, s + 1, seeds, block["algorithm"], block["dataset"],
                     transport)
            start = time.perf_counter()
            try:
                network = make_network(module, parties, params, rng=rng)
                network.timeout = float(block.get("timeout", DEFAULT_TIMEOUT))
                if transport == "inprocess":
                    history = module.fit(parties, network, params, rng=rng, evaluation=evaluation)
                else:
                    roles = module.roles(public, params, rng=rng, network=network)
                    if transport == "ray":
                        history = module.assemble(public, params, launcher.run_ray(
                            roles, network, shard_paths, links=block.get("links", "tls")))
                    else:  # every seed at once: each party process runs them all over the same certificates
                        if linked is None:
                            linked = launcher.run_local(name, block, section, seed, data_dir,
                                                        tuple(n for n in network.names if n in {r.name for r in roles}))
                        history = module.assemble(public, params, launcher.adopt(network, linked[s]))
            except ParamError as exc:  # a parameter that does not fit the data: name it by its key path
                message = str(exc)
                raise ParamError(message if message.startswith(f"{path}.") else f"{path}.{message}") from None
            # grpc: the slowest party's own clock (the processes ran every seed before the first was assembled)
            seconds.append(time.perf_counter() - start if linked is None
                           else max(out["seconds"] for out in linked[s].values()))
            history.comm = {**network.summary(), "transport": transport, "parties": network.where}
            if getattr(module, "DP_NOISE", False):
                history.ledger.noise_source = noise_source
            histories.append(history)

    summary = summarize(name, block, params, histories, seconds)
    summary["transport"] = transport
    if getattr(module, "DP_NOISE", False):
        summary["noise_source"] = noise_source
    described, metrics, timing = split_summary(summary, params)
    return {
        "run": described,
        "metrics": metrics,
        "timing": timing,
        "history": {"runs": [h.to_dict() for h in histories]},
        "ledger": {"runs": [h.ledger.to_dict() for h in histories]},
        "comm": {"runs": [h.comm for h in histories]},
    }


def summarize(name: str, block: dict, params: Any, histories: list[History], seconds: list[float]) -> dict:
    """The run's defining parameters as flat fields and its final numbers (mean over seeds), which
    :func:`split_summary` divides into run.json, metrics.json and timing.json. ``seconds[i]`` is seed i's
    clock as :data:`ppml.timing.TIMING` describes it for the run's transport."""
    finals = [dict(h.final, seconds=sec) for h, sec in zip(histories, seconds)]
    metrics: dict[str, Any] = {
        "experiment": name, "algorithm": block["algorithm"], "dataset": block["dataset"],
        # a seed whose own final record says it failed (e.g. a model the optimizer never moved) fails the run
        "status": next((f["status"] for f in finals if f.get("status", "ok") != "ok"), "ok"),
        "seeds": len(histories), **flat_fields(params),
    }
    for key in finals[0]:
        values = [f.get(key) for f in finals]
        if key in AGGREGATED and all(isinstance(v, (int, float)) and v is not None for v in values):
            metrics[key] = float(np.mean(values))
            if len(values) > 1:
                metrics[f"{key}_mean"] = float(np.mean(values))
                metrics[f"{key}_std"] = float(np.std(values, ddof=1))
        elif key not in metrics:
            metrics[key] = values[0]
    metrics["converged"] = all(bool(h.converged) for h in histories)
    # Traffic (messages, bytes, ciphertexts per seed and role) is in comm.json, not here: an asynchronous run's
    # counts follow its threads' scheduling and a masked value's encoding its random mask, so they would show
    # as changed results in every metrics diff of a re-run.
    return metrics
