"""Protocols as role programs: what one party runs, on any transport.

Every multi-party algorithm is written once, as the programs its parties run (DESIGN.md §4). A module gives

- ``roles(public, params, *, rng, network) -> list[Role]``: one :class:`Role` per network address, built from
  public facts only (:class:`Public`: names, row and column counts, who holds the labels), never from data;
- ``assemble(public, params, results) -> History``: the run's record from what the programs returned (the
  label holder's, or the evaluator's, history records and each party's own privacy facts).

A role's program is a module-level function ``program(endpoint, party, **kwargs)``: `endpoint` is its only
way to other parties, `party` its own shard (None for roles without data: an arbiter, a parameter server),
`kwargs` the picklable inputs :func:`roles` chose for it (parameters, its random stream, public facts). Its
control flow may depend only on its own state and the messages it receives, so every transport gives the
same numbers: :func:`run_inprocess` (deterministic, the default), :func:`ppml.launch.ray_runner.run_ray`
(one actor per party, each in its own process, each loading only its own shard) and ``python -m ppml.party``
(one process per party, each started by its own organization).
"""

from __future__ import annotations

import os
import resource
import socket
import sys
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable

from ppml.config import ParamError, fail
from ppml.network import Network
from ppml.parties import Party

__all__ = ["PartyInfo", "Public", "Role", "EVALUATOR", "TRANSPORTS", "fit", "run_inprocess", "shards_of", "here"]

TRANSPORTS = ("inprocess", "ray", "grpc")
"""What moves the bytes: ``inprocess`` (the deterministic default), ``ray`` (a process per party, placed by Ray,
linked directly) or ``grpc`` (a process per party started by itself, linked over mutual TLS; the train stage
starts every party on this machine)."""

EVALUATOR = "evaluator"
"""The shard (and, where a protocol has one, the address) of horizontal data's held-out rows."""


@dataclass(frozen=True)
class PartyInfo:
    """Public facts about one party's shard: what the prepare stage's manifest says of it."""

    name: str
    columns: int
    train_rows: int
    test_rows: int
    label_holder: bool

    # the names a Party uses for the same facts, so public code can take either
    @property
    def n_samples(self) -> int:
        return self.train_rows

    @property
    def n_features(self) -> int:
        return self.columns

    @property
    def is_label_holder(self) -> bool:
        return self.label_holder


@dataclass(frozen=True)
class Public:
    """What every party may know before a run: names, shapes and the label holder; no data."""

    partition: str
    parties: tuple[PartyInfo, ...]
    evaluator: PartyInfo | None = None

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.parties]

    def info(self, name: str) -> PartyInfo:
        for p in self.parties:
            if p.name == name:
                return p
        if self.evaluator is not None and name == self.evaluator.name:
            return self.evaluator
        raise KeyError(f"no party {name!r} (parties: {', '.join(self.names)})")

    @property
    def label_holders(self) -> list[str]:
        return [p.name for p in self.parties if p.label_holder]

    def vertical_label_holder(self, algorithm: str) -> PartyInfo:
        """The one label holder of vertical data; a ParamError naming `algorithm` for anything else."""
        if self.evaluator is not None:
            fail("dataset", f"must be vertically partitioned for {algorithm}; it has an evaluation party "
                            "(horizontal data)")
        holders = self.label_holders
        if len(holders) != 1:
            raise ParamError(f"dataset must give labels to exactly one party, found label holders {holders}")
        return self.info(holders[0])

    @classmethod
    def from_parties(cls, parties: list[Party], evaluation: Party | None = None) -> "Public":
        def info(p: Party, name: str | None = None) -> PartyInfo:
            test = 0 if p.X_test is None else p.X_test.shape[0]
            return PartyInfo(name or p.name, p.n_features, p.n_samples, test, p.is_label_holder)

        partition = "horizontal" if evaluation is not None else "vertical"
        return cls(partition, tuple(info(p) for p in parties),
                   None if evaluation is None else info(evaluation, EVALUATOR))

    @classmethod
    def from_manifest(cls, manifest: dict[str, Any]) -> "Public":
        """The public facts of a prepared dataset, from its manifest.json alone."""
        def info(entry: dict[str, Any], name: str | None = None) -> PartyInfo:
            missing = [k for k in ("name", "columns", "train_rows", "test_rows") if k not in entry]
            if missing:
                raise ValueError(f"manifest.json of {manifest.get('dataset', '?')!r}: the entry of "
                                 f"{entry.get('name', '?')!r} lacks {missing}; re-run its prepare stage")
            return PartyInfo(name or str(entry["name"]), int(entry["columns"]), int(entry["train_rows"]),
                             int(entry["test_rows"]), bool(entry.get("label_holder", False)))

        evaluator = manifest.get("evaluator")
        return cls(str(manifest.get("partition", "vertical")), tuple(info(e) for e in manifest["parties"]),
                   None if evaluator is None else info(evaluator, EVALUATOR))


@dataclass(frozen=True)
class Role:
    """One network address's program and what it starts with.

    Attributes
    ----------
    name : str
        The address it runs as.
    program : callable
        A module-level function ``program(endpoint, party, **kwargs)`` (so that it can be shipped to another
        process by reference).
    shard : str or None
        Whose data it loads: a party's name, :data:`EVALUATOR`, or None for a role without data.
    kwargs : dict
        Picklable inputs: parameters, its random stream, public facts.
    """

    name: str
    program: Callable[..., Any]
    shard: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)


def here() -> dict[str, Any]:
    """Where this code runs: the host and process id comm.json records for every party, and the process's
    peak resident memory so far (MiB; Linux reports it in KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)
    return {"host": socket.gethostname(), "pid": os.getpid(), "peak_rss_mib": round(peak, 1)}


def shards_of(parties: list[Party], evaluation: Party | None = None) -> dict[str, Party]:
    """Every shard by the name a :class:`Role` asks for it."""
    shards = {p.name: p for p in parties}
    if evaluation is not None:
        shards[EVALUATOR] = evaluation
    return shards


def run_inprocess(roles: list[Role], network: Network, shards: dict[str, Party]) -> dict[str, Any]:
    """Run the role programs in this process on `network`, deterministically (:meth:`Network.run`)."""
    programs: dict[str, Callable[[], Any]] = {}
    for role in roles:
        if role.shard is not None and role.shard not in shards:
            raise KeyError(f"role {role.name!r} needs shard {role.shard!r}, which is not loaded")
        party = None if role.shard is None else shards[role.shard]
        endpoint = network.endpoint(role.name)
        programs[role.name] = (lambda r=role, e=endpoint, p=party: r.program(e, p, **r.kwargs))
    results = network.run(programs)
    network.where = {role.name: here() for role in roles}
    return results


def fit(module: ModuleType, parties: list[Party], network: Network, params: Any, *, rng: Any,
        evaluation: Party | None = None):
    """An algorithm's ``fit``: its role programs run in this process; returns the assembled History."""
    public = Public.from_parties(parties, evaluation)
    roles = module.roles(public, params, rng=rng, network=network)
    results = run_inprocess(roles, network, shards_of(parties, evaluation))
    return module.assemble(public, params, results)
