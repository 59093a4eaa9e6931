"""A run's timing fields: which final fields are times, and what clock each one read.

The train stage writes them to ``timing.json`` beside ``metrics.json`` and never into it: a time measures the
machine and its load as much as the method, so ``dvc metrics diff`` would list clocks that moved on every
run. ``timing.json`` holds::

    {"experiment": <name>, "values": {<field>: <number or null>, ...}, "basis": {<field>: {...}, ...}}

Each basis says ``kind`` (``measured``: a reading of a real clock; ``simulated``: a model's or a simulator's
number, not a measurement), ``unit`` and ``clock`` (which clock, where, around what). :data:`TIMING` lists
every timing field an algorithm's final record or the experiment runner writes; ``<field>_mean`` and
``<field>_std`` of an aggregated field (mean and sample standard deviation over the seeds) are timing fields
too.
"""

from __future__ import annotations

from typing import Any

MEASURED, SIMULATED = "measured", "simulated"

#: the clock of the runner's own ``seconds`` for one seed, on each transport (ppml.experiment.run); the
#: field is the mean over the seeds
_SECONDS = {
    "inprocess": "wall clock (time.perf_counter) of the train stage's process around one seed: building "
                 "the network, training and evaluation, loading the data excluded",
    "ray": "wall clock of the train stage's process around one seed, the parties' Ray processes included "
           "(the cluster's start excluded)",
    "grpc": "the slowest party's own wall clock around its role program for one seed (its links already "
            "connected; waiting for the other parties to finish included)",
}

_SIM_UNIT = "simulated time units (one iteration of a speed-1 party)"

#: every timing field: field -> (kind, unit, clock); ``seconds`` depends on the transport (:func:`basis`).
#: "first seed": the field is the first seed's value, not aggregated over the seeds.
TIMING: dict[str, tuple[str, str, str]] = {
    "seconds": (MEASURED, "s", _SECONDS["inprocess"]),
    "seconds_per_epoch": (
        MEASURED, "s", "one epoch of the protocol by one party's own wall clock, mean over the epochs "
        "(FDML: the slowest party's protocol_seconds / epochs, its evaluations excluded; Paillier "
        "protocols: the guest's clock around each epoch's training messages, evaluation excluded); first seed"),
    "protocol_seconds": (
        MEASURED, "s", "FDML: the slowest party's own wall clock from its start to the end of its last "
        "epoch, its evaluations excluded; first seed"),
    "sim_time": (
        SIMULATED, _SIM_UNIT, "FDML's discrete-event simulation clock when the last party finished its "
        "last epoch; null in threads mode (no simulated clock); first seed"),
    "sim_time_per_epoch": (SIMULATED, _SIM_UNIT, "sim_time / epochs; first seed"),
    "cost_seconds": (
        SIMULATED, "s", "FDML's cost model: each iteration the slowest worker's compute at flop_rate "
        "plus its messages at latency and bandwidth (parameters, not measurements), times the "
        "iterations; first seed"),
    "cost_seconds_per_epoch": (SIMULATED, "s", "cost_seconds / epochs; first seed"),
}

_OVER_SEEDS = {"_mean": "mean over the seeds of",
               "_std": "sample standard deviation (ddof 1) over the seeds of"}


def _base(field: str) -> tuple[str, str]:
    """(listed field, suffix): ``seconds_std`` -> (``seconds``, ``_std``); an unlisted field -> ("", "")."""
    if field in TIMING:
        return field, ""
    for suffix in _OVER_SEEDS:
        if field.endswith(suffix) and field[:-len(suffix)] in TIMING:
            return field[:-len(suffix)], suffix
    return "", ""


def is_timing(field: str) -> bool:
    """Whether `field` is a timing field: listed in :data:`TIMING`, or its ``_mean`` / ``_std`` over seeds."""
    return bool(_base(field)[0])


def basis(field: str, *, transport: str = "inprocess") -> dict[str, str]:
    """What timing field `field` of a run on `transport` is: ``{"kind", "unit", "clock"}``.

    Raises
    ------
    KeyError
        `field` is not a timing field.
    """
    name, suffix = _base(field)
    if not name:
        raise KeyError(f"{field!r} is not a timing field (ppml.timing.TIMING lists them)")
    kind, unit, clock = TIMING[name]
    if name == "seconds":
        if transport not in _SECONDS:
            raise KeyError(f"no clock of 'seconds' for transport {transport!r}; known: {sorted(_SECONDS)}")
        clock = _SECONDS[transport]
        if not suffix:
            clock = f"mean over the seeds of: {clock}"
    if suffix:
        clock = f"{_OVER_SEEDS[suffix]} {name} (per seed: {clock})"
    return {"kind": kind, "unit": unit, "clock": clock}


def timing_record(experiment: str, values: dict[str, Any], *, transport: str = "inprocess") -> dict[str, Any]:
    """timing.json of a run: its timing `values` and, for each, its :func:`basis`."""
    return {"experiment": experiment, "values": dict(values),
            "basis": {field: basis(field, transport=transport) for field in values}}
