"""transport: grpc: every party its own ``python -m ppml.party`` process on loopback, linked over mutual TLS.

The numbers are the in-process run's; a party is the name in its certificate, so a certificate from another CA
or one speaking as another party is refused, naming what was refused; a party that dies or never starts ends
the others at once or within the connect timeout, with an error naming it; a failed run writes nothing.
The faults are checked on both carriers of the links (``links: tls`` and ``links: grpc``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml

from ppml.history import ConvergenceWarning
from ppml.certs import free_base
from ppml.io import read_json, save_party, write_json
from ppml.network.links import CARRIERS, CLOSE_TIMEOUT
from ppml.runtime import EVALUATOR
from tests.algorithms.vertical_data import write_prepared
from tests.transport.test_ray import train_stage_pair, vertical_parties

LINKED = 30.0
"""--connect-timeout of parties that must link (s): far more than they take, so a loaded machine cannot fail
them, and far more than a refusal may take (a refusal is reported at once, not at the timeout)."""

SHORT = 2.0
"""--connect-timeout of parties that must give up waiting (s): an unreachable peer, a refused dialer."""

WAIT = 90.0
"""Longest any party process may run before the test fails (a hang is a failure, not a blocked suite)."""

SEED = 7
PARTIES = ("party1", "party2", "party3")
ADMM = {"algorithm": "admm_sharing", "dataset": "toy_vertical", "max_epochs": 4, "sigma": 0.05}


# --- helpers ------------------------------------------------------------------------------------------------


def make_certs(directory: Path, names) -> Path:
    """``python -m ppml.certs``: a throwaway CA, every party's key and certificate, and the peers file."""
    base = free_base(len(names))
    done = subprocess.run([sys.executable, "-m", "ppml.certs", str(directory), "--parties", *names,
                           "--host", "127.0.0.1", "--base-port", str(base)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert addresses(directory / "peers.yaml") == {n: f"127.0.0.1:{base + i}" for i, n in enumerate(names)}
    assert {f.name for f in directory.iterdir()} == {"ca.pem", "peers.yaml", *(f"{n}.{e}" for n in names
                                                                                 for e in ("pem", "key"))}
    assert all((directory / f"{n}.key").stat().st_mode & 0o077 == 0 for n in names)
    return directory / "peers.yaml"


def addresses(peers: Path) -> dict[str, str]:
    return {n: e["address"] for n, e in yaml.safe_load(peers.read_text())["parties"].items()}


def with_own(peers: Path, party: str, file_name: str, **entry) -> Path:
    """A copy of `peers`, beside it, whose entry of `party` is updated with `entry`."""
    doc = yaml.safe_load(peers.read_text())
    doc["parties"][party].update(entry)
    out = peers.parent / file_name
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


def write_params(path: Path, block: dict, carrier: str = "grpc") -> Path:
    """params.yaml with experiment ``exp`` (`block` with transport: grpc over `carrier`: what the party
    processes run) and ``local`` (`block` in-process)."""
    experiments = {"exp": {**block, "transport": "grpc", "links": carrier}, "local": block}
    path.write_text(yaml.safe_dump({"seed": SEED, "experiments": experiments}, sort_keys=False))
    return path


def write_horizontal(directory: Path, agents, evaluator) -> Path:
    """Horizontal shards (the agents', the evaluator's test rows) and their manifest, as prepare writes
    them."""
    directory.mkdir(parents=True, exist_ok=True)

    def entry(p, name):
        save_party(directory / f"{name}.npz", p)
        return {"name": name, "file": f"{name}.npz", "label_holder": p.is_label_holder,
                "columns": p.n_features, "train_rows": p.n_samples,
                "test_rows": 0 if p.X_test is None else int(p.X_test.shape[0])}

    assert evaluator.name == EVALUATOR
    write_json(directory / "manifest.json", {
        "dataset": "toy_horizontal", "available": True, "partition": "horizontal",
        "evaluator": entry(evaluator, EVALUATOR), "parties": [entry(p, p.name) for p in agents]})
    return directory


class Launcher:
    """Party processes of one test: started with their own logs, waited for with a deadline, never left
    behind."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: dict[str, subprocess.Popen] = {}

    def spawn(self, label: str, args: list[str]) -> subprocess.Popen:
        """Start ``python -m ppml.party ARGS`` as process `label`, its stdout and stderr in ``logs/<label>.*``."""
        logs = self.root / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / f"{label}.out", "wb") as out, open(logs / f"{label}.err", "wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "ppml.party", *args], stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.procs[label] = proc
        return proc

    def start(self, party: str, *, peers: Path, params: Path, data: Path, connect_timeout: float = LINKED,
              experiment: str = "exp", label: str | None = None, out: Path | None = None,
              extra: tuple[str, ...] = ()) -> subprocess.Popen:
        """Start `party`'s process; `label` (default: the party) names its logs, process and (without `out`) its
        out dir; `extra` are more arguments (``--resume``)."""
        label = label or party
        return self.spawn(label, ["--experiment", experiment, "--party", party, "--peers", str(peers),
                                  "--params", str(params), "--data", str(data), "--out", str(out or self.out(label)),
                                  "--connect-timeout", str(connect_timeout), *extra])

    def out(self, label: str) -> Path:
        return self.root / "out" / label

    def stderr(self, label: str) -> str:
        return (self.root / "logs" / f"{label}.err").read_text(errors="replace")

    def stderrs(self) -> dict[str, str]:
        return {n: self.stderr(n)[-3000:] for n in self.procs}

    def fail_line(self, label: str, party: str | None = None) -> str:
        """The one line a failed party printed (``party NAME: ...``), its last on stderr."""
        lines = [line for line in self.stderr(label).splitlines() if line.strip()]
        own = [line for line in lines if line.startswith(f"party {party or label}: ")]
        assert len(own) == 1 and lines[-1] == own[0], f"{label}'s stderr:\n{self.stderr(label)}"
        return own[0]

    def listening(self, party: str, timeout: float = 60.0) -> None:
        """Wait until `party` listens (it logs so just before it links to its peers)."""
        deadline = time.monotonic() + timeout
        while " listening at " not in self.stderr(party):
            assert self.procs[party].poll() is None, self.stderr(party)
            assert time.monotonic() < deadline, f"{party} does not listen: {self.stderr(party)}"
            time.sleep(0.02)

    def wait(self, names=None, timeout: float = WAIT) -> dict[str, int]:
        """Every (or each of `names`') process's exit status; one still running after `timeout` s fails the
        test."""
        deadline = time.monotonic() + timeout
        codes = {}
        for party in names or list(self.procs):
            try:
                codes[party] = self.procs[party].wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pytest.fail(f"{party} still running after {timeout:g} s; stderr:\n{self.stderr(party)}")
        return codes

    def kill(self, label: str) -> None:
        proc = self.procs[label]
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)

    def stop(self) -> None:
        for label in self.procs:
            self.kill(label)


@pytest.fixture
def launcher(tmp_path):
    launch = Launcher(tmp_path)
    yield launch
    launch.stop()


def run_inprocess(experiment: str, params: Path, data: Path, out: Path) -> Path:
    from ppml.crypto.paillier import KeyLengthWarning
    from stages.train import main

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", KeyLengthWarning)
        assert main(["--experiment", experiment, "--params", str(params), "--data", str(data),
                     "--out", str(out)]) == 0
    return out


def run_both(root: Path, launcher: Launcher, names, block: dict, data: Path, carrier: str = "grpc") -> Path:
    """The experiment by one process per party (into their out dirs), and in-process by the train stage (into
    the directory returned)."""
    params = write_params(root / "params.yaml", block, carrier)
    peers = make_certs(root / "certs", names)
    for name in names:
        launcher.start(name, peers=peers, params=params, data=data)
    codes = launcher.wait()
    assert codes == {n: 0 for n in names}, launcher.stderrs()
    assert_comm(launcher, names, peers, carrier)
    return run_inprocess("local", params, data, root / "inprocess")


def _kept(key: str, skip: tuple[str, ...]) -> bool:
    return not any(word in key for word in ("seconds", *skip))


def _subset(party: dict, local: dict, skip: tuple[str, ...], where: str) -> None:
    """Every key of the party's own record (but timing and `skip`) is the in-process run's, value for
    value."""
    # converged None: assembled from the other parties' facts (PP-ADMM's agents'), not the party's own to say
    keys = [k for k in party if _kept(k, skip) and not (k == "converged" and party[k] is None)]
    assert keys, f"{where}: empty"
    missing = [k for k in keys if k not in local]
    assert not missing, f"{where}: the in-process run has no {missing}"
    assert {k: party[k] for k in keys} == {k: local[k] for k in keys}, where


def assert_same_as_inprocess(party_out: Path, local_out: Path, *, skip: tuple[str, ...] = (),
                             final: bool = True) -> None:
    """The history party's history.json and metrics.json are the in-process run's (its own part of them; with
    `final` False its records only)."""
    assert {f.name for f in party_out.iterdir()} - {"model", "checkpoint"} == {
        "comm.json", "history.json", "run.json", "metrics.json", "timing.json"}
    mine = read_json(party_out / "history.json")["runs"]
    theirs = read_json(local_out / "history.json")["runs"]
    assert len(mine) == len(theirs) >= 1
    for s, (a, b) in enumerate(zip(mine, theirs)):
        assert (a["algorithm"], a["epochs"]) == (b["algorithm"], b["epochs"])
        if a["converged"] is not None:  # else assembled from the other parties' facts (PP-ADMM's agents')
            assert (a["converged"], a["stop_reason"]) == (b["converged"], b["stop_reason"])
        assert len(a["records"]) == len(b["records"]) >= 1
        for e, (ra, rb) in enumerate(zip(a["records"], b["records"])):
            _subset(ra, rb, skip, f"seed {s} record {e}")
        if final:
            _subset(a["final"], b["final"], skip, f"seed {s} final")
    run = read_json(party_out / "run.json")
    assert (run["transport"], run["assembled"]) == ("grpc", False)
    if final:
        local_metrics = {**read_json(local_out / "run.json"), **read_json(local_out / "metrics.json")}
        _subset(read_json(party_out / "metrics.json"), local_metrics, skip, "metrics.json")


def assert_comm(launcher: Launcher, names, peers: Path, carrier: str) -> None:
    """Each party's comm.json: its identity (its name), its address (the peers file's), its peers', its
    carrier; every party a process of its own."""
    where = addresses(peers)
    pids = set()
    for name in names:
        (run,) = read_json(launcher.out(name) / "comm.json")["runs"]
        assert (run["party"], run["identity"], run["address"], run["links"]) == \
            (name, name, where[name], carrier)
        assert run["peers"] == {n: {"identity": n, "address": where[n]} for n in names if n != name}
        pids.add(run["pid"])
    assert len(pids) == len(names) and os.getpid() not in pids


def assert_traffic(launcher: Launcher, names, local_out: Path, *, with_bytes: bool = True) -> None:
    """What the parties say they sent, tag by tag, is what the in-process run sent; and all of it arrived."""
    fields = ("messages", "bytes", "ciphertexts") if with_bytes else ("messages", "ciphertexts")
    (local,) = read_json(local_out / "comm.json")["runs"]
    expected = {tag: {f: t[f] for f in fields} for tag, t in local["tags"].items()}
    for kind in ("evaluation", "control"):
        tags = local.get(kind, {}).get("tags", {})
        expected.update({tag: {f: t[f] for f in fields} for tag, t in tags.items()})
    sent: dict[str, dict[str, int]] = {}
    totals = {"sent": [0, 0, 0], "received": [0, 0, 0]}
    for name in names:
        (run,) = read_json(launcher.out(name) / "comm.json")["runs"]
        assert run["rounds"] == local["rounds"]
        for tag, t in run["sent"]["tags"].items():
            for f in fields:
                sent.setdefault(tag, dict.fromkeys(fields, 0))[f] += t[f]
        for way in totals:
            totals[way][0] += run[way]["messages"]
            totals[way][1] += run[way]["bytes"]
            totals[way][2] += run[way]["ciphertexts"]
    assert sent == expected
    assert totals["sent"] == totals["received"] and totals["sent"][0] > 0


def assert_nothing_written(launcher: Launcher, names) -> None:
    for name in names:
        assert not launcher.out(name).exists(), f"{name} wrote {sorted(launcher.out(name).rglob('*'))}"


@pytest.fixture(scope="module")
def vertical3(tmp_path_factory):
    parties = vertical_parties(np.random.default_rng(1))
    return write_prepared(tmp_path_factory.mktemp("toy_vertical3"), parties)


@pytest.fixture(scope="module")
def vertical2(tmp_path_factory):
    parties = vertical_parties(np.random.default_rng(5), n=120, n_test=60, widths=(5, 4))
    return write_prepared(tmp_path_factory.mktemp("toy_vertical2"), parties)


# --- the same numbers as in-process -------------------------------------------------------------------------


def test_admm_sharing_three_processes_same_numbers(tmp_path, launcher, vertical3):
    local = run_both(tmp_path, launcher, PARTIES, ADMM, vertical3)
    assert_same_as_inprocess(launcher.out("party1"), local)
    assert_traffic(launcher, PARTIES, local)
    for member in PARTIES[1:]:  # only the label holder (the central node) holds the run's history
        assert sorted(f.name for f in launcher.out(member).iterdir()) == ["comm.json", "timing.json"]


def test_fdml_two_workers_and_server_same_numbers(tmp_path, launcher, vertical2):
    """Two workers (one per party) and the server (on the label holder's shard): three processes."""
    from ppml.algorithms.fdml import SERVER

    block = {"algorithm": "fdml", "dataset": "toy_vertical", "variant": "paper", "local_model": "lr",
             "tau": 0, "batch_size": 40, "eta": 1.0, "lam": 1e-3, "epochs": 2}
    names = ("party1", "party2", SERVER)
    local = run_both(tmp_path, launcher, names, block, vertical2)
    assert_same_as_inprocess(launcher.out(SERVER), local)
    assert_traffic(launcher, names, local)


PP_ADMM = ("agent1", "agent2", EVALUATOR)


@pytest.fixture(scope="module")
def pp_admm_run(tmp_path_factory):
    """PP-ADMM by two agents and the evaluator in three processes, and in-process: (launcher, in-process
    directory)."""
    from tests.algorithms.horizontal_data import horizontal

    root = tmp_path_factory.mktemp("pp_admm")
    agents, evaluator = horizontal(np.random.default_rng(4), agents=2, n=80, d=4, n_test=60)
    data = write_horizontal(root / "data", agents, evaluator)
    block = {"algorithm": "pp_admm", "dataset": "toy_horizontal", "agents": 2, "T": 4, "lam": 0.01,
             "epsilon": 1.0, "delta": 1e-3, "delta_i1": 1e-3}
    launch = Launcher(root)
    try:
        yield launch, run_both(root, launch, PP_ADMM, block, data)
    finally:
        launch.stop()


def test_pp_admm_two_agents_and_evaluator_same_numbers(pp_admm_run):
    launcher, local = pp_admm_run
    assert_same_as_inprocess(launcher.out(EVALUATOR), local, final=False)
    assert_traffic(launcher, PP_ADMM, local)
    for agent in PP_ADMM[:2]:
        assert sorted(f.name for f in launcher.out(agent).iterdir()) == ["comm.json", "timing.json"]


def test_pp_admm_evaluator_writes_its_final_metrics(pp_admm_run):
    launcher, local = pp_admm_run
    assert_same_as_inprocess(launcher.out(EVALUATOR), local)


def test_paillier_sqn_guest_host_arbiter_same_numbers(tmp_path, launcher, vertical2):
    """The 1024-bit key pair is made in the arbiter's process; ciphertexts are fresh random numbers written at
    the width of the widest, so byte counts may differ by a few bytes: everything else is exact."""
    from ppml.algorithms._hetero_lr import ARBITER

    block = {"algorithm": "paillier_sqn", "dataset": "toy_vertical", "batch_size": 60, "encrypted": True,
             "key_bits": 1024, "eta": 0.15, "lam": 0.01, "max_epochs": 2, "L": 2, "M": 3}
    names = ("party1", "party2", ARBITER)
    local = run_both(tmp_path, launcher, names, block, vertical2)
    assert_same_as_inprocess(launcher.out("party1"), local, skip=("bytes",))
    assert_traffic(launcher, names, local, with_bytes=False)
    (run,) = read_json(local / "comm.json")["runs"]
    assert run["ciphertexts"] > 0


def test_paillier_guest_two_hosts_arbiter_four_processes_same_numbers(tmp_path, launcher, vertical3):
    """Two hosts (party2, party3): four processes, the same programs as in-process; S_H sampled and packed
    ciphertexts, so the prefix sums, the cross terms and the rows of S_H cross process boundaries too."""
    from ppml.algorithms._hetero_lr import ARBITER, TAG_CROSS, TAG_PREFIX

    block = {"algorithm": "paillier_sqn", "dataset": "toy_vertical", "batch_size": 60, "encrypted": True,
             "key_bits": 1024, "eta": 0.15, "lam": 0.01, "max_epochs": 2, "L": 2, "M": 3, "S_H": 60,
             "packing": "auto", "frac_bits": 16}
    names = (*PARTIES, ARBITER)
    local = run_both(tmp_path, launcher, names, block, vertical3)
    assert_same_as_inprocess(launcher.out("party1"), local, skip=("bytes",))
    assert_traffic(launcher, names, local, with_bytes=False)
    (run,) = read_json(local / "comm.json")["runs"]
    assert run["tags"][TAG_PREFIX]["routes"] == ["party1->party3"]
    assert run["tags"][TAG_CROSS]["routes"] == ["party3->party1"]
    assert run["tags"]["fore_gradient"]["routes"] == ["party1->party2", "party1->party3"]
    history = read_json(local / "history.json")["runs"][0]
    assert list(history["extra"]["weights"]) == ["party2", "party3", "party1"]
    assert history["final"]["packing_slots"] >= 2
    for host in PARTIES[1:]:  # each host keeps its own block, the in-process run's weights
        block = read_json(launcher.out(host) / "model" / "seed0.json")
        assert (block["role"], block["weights"]) == ("host", history["extra"]["weights"][host])


# --- the train stage: transport: grpc starts every party on this machine and assembles the run --------------


def test_train_stage_runs_a_block_with_transport_grpc(vertical3, tmp_path):
    local, remote = train_stage_pair({**ADMM, "seeds": 2}, "grpc", vertical3, tmp_path, seed=SEED)
    assert len(remote["comm"]["runs"]) == 2
    for comm_remote in remote["comm"]["runs"]:
        parties = comm_remote["parties"]
        assert sorted(parties) == list(PARTIES)
        for name, where in parties.items():
            assert where["identity"] == name
            assert re.fullmatch(r"127\.0\.0\.1:\d+", where["address"]), where
        assert len({w["address"] for w in parties.values()}) == 3
        pids = {w["pid"] for w in parties.values()}
        assert len(pids) == 3 and os.getpid() not in pids
    # every seed ran in the same three processes, at the same addresses
    first, second = (run["parties"] for run in remote["comm"]["runs"])
    assert {n: (w["pid"], w["address"]) for n, w in first.items()} == \
        {n: (w["pid"], w["address"]) for n, w in second.items()}


# --- who a party is: the name in its certificate ------------------------------------------------------------
#
# Two parties of admm_sharing: party1 dials party2. Each scenario runs on both carriers at once (its own
# ports, its own processes, labelled <carrier>-<scenario>-<party>). An impostor's process is started first
# and the honest one once it listens, so that the impostor is there when the honest party links: a refusal
# is then at once, and an honest listener's short timeout only ever waits for a peer that does not come.

PAIR = ("party1", "party2")


class Certs:
    """One CA's certificates for `names`; :meth:`at` writes them with a peers file at free ports (in-process:
    the tests above use ``python -m ppml.certs``)."""

    def __init__(self, names) -> None:
        from ppml.network.tls import throwaway_set

        _, _, self.credentials = throwaway_set(list(names), hosts=("127.0.0.1", "localhost"))

    def at(self, directory: Path) -> Path:
        from ppml.network.peers import write_peers

        base = free_base(len(self.credentials))
        return write_peers(directory, self.credentials,
                           {n: f"127.0.0.1:{base + i}" for i, n in enumerate(self.credentials)})


@pytest.fixture(scope="module")
def pair_certs():
    """The run's CA and another CA (of the same name, for the same party names)."""
    return Certs(PAIR), Certs(PAIR)


def impostor_file(peers: Path, rogue: Certs, party: str, other: str, kind: str) -> Path:
    """A copy of `peers` whose own entry of `party` holds a certificate of another CA (``another_ca``) or
    `other`'s certificate and key, its identity set to `other` so that its own check passes and the
    certificate really reaches the peer (``another_party``)."""
    if kind == "another_ca":
        rogue.at(peers.parent / "rogue")
        entry = {"certificate": f"rogue/{party}.pem", "key": f"rogue/{party}.key"}
    else:
        entry = {"identity": other, "certificate": f"{other}.pem", "key": f"{other}.key"}
    return with_own(peers, party, f"{party}-{kind}.yaml", **entry)


def test_own_certificate_of_another_party_is_refused_before_linking(tmp_path, launcher, vertical2,
                                                                    pair_certs):
    """A peers file whose own entry holds another party's certificate and key: bad input (exit 2), named by
    the file and its key, before any link is opened; nothing written."""
    peers = pair_certs[0].at(tmp_path / "certs")
    wrong = with_own(peers, "party2", "party2-wrong.yaml", certificate="party1.pem", key="party1.key")
    launcher.start("party2", peers=wrong, params=write_params(tmp_path / "params.yaml", ADMM), data=vertical2)
    assert launcher.wait(timeout=60) == {"party2": 2}
    line = launcher.fail_line("party2")
    assert line.startswith(f"party party2: {wrong}: parties.party2: the certificate speaks as ['party1'"), \
        line
    assert line.endswith("not as 'party2'"), line
    assert_nothing_written(launcher, ["party2"])


SCENARIOS = [(carrier, kind) for carrier in CARRIERS for kind in ("another_ca", "another_party")]


def start_impostors(tmp_path, launcher, data, pair_certs, impostor: str, honest: str) -> dict[str, tuple]:
    """Per scenario, `impostor`'s process with a certificate of another CA or of `honest`, started and listening;
    the scenario's (honest peers file, params file) by its label ``<carrier>-<kind>``."""
    good, rogue = pair_certs
    runs = {}
    for carrier, kind in SCENARIOS:
        peers = good.at(tmp_path / f"{carrier}-{kind}")
        params = write_params(tmp_path / f"params-{carrier}.yaml", ADMM, carrier)
        label = f"{carrier}-{kind}"
        launcher.start(impostor, peers=impostor_file(peers, rogue, impostor, honest, kind), params=params,
                       data=data, label=f"{label}-{impostor}")
        runs[label] = (peers, params)
    for label in runs:
        launcher.listening(f"{label}-{impostor}")
    return runs


def test_a_dialer_refuses_a_listener_that_is_not_its_peer_at_once(tmp_path, launcher, vertical2, pair_certs):
    """party2's process presents a certificate of another CA, or party1's: party1, which dials it, refuses it
    at the handshake, naming it and its address, at once (not at its connect timeout); it writes nothing."""
    runs = start_impostors(tmp_path, launcher, vertical2, pair_certs, "party2", "party1")
    for label, (peers, params) in runs.items():
        launcher.start("party1", peers=peers, params=params, data=vertical2, connect_timeout=SHORT,
                       label=f"{label}-party1")
    dialers = [f"{label}-party1" for label in runs]
    assert launcher.wait(dialers, timeout=LINKED) == dict.fromkeys(dialers, 1), launcher.stderrs()
    for label, (peers, _) in runs.items():
        line = launcher.fail_line(f"{label}-party1", "party1")
        assert f"'party1' could not open an authenticated link to 'party2' at {addresses(peers)['party2']} " \
               "(its certificate must speak as 'party2' and be signed by a CA this party trusts" in line, \
            (label, line)
    assert_nothing_written(launcher, dialers)


def test_a_listener_refuses_a_dialer_that_is_not_its_peer(tmp_path, launcher, vertical2, pair_certs):
    """party1's process presents a certificate of another CA, or party2's, to party2, which refuses it.
    party2 keeps waiting for the real party1 until its connect timeout, then names it, its own address and,
    where it sees it, the refusal (gRPC refuses a certificate of another CA inside its TLS, out of the
    listener's sight); the impostor is told, and ends long before its own connect timeout. Nothing is written."""
    runs = start_impostors(tmp_path, launcher, vertical2, pair_certs, "party1", "party2")  # party1 dials party2
    # a gRPC dialer that found no listener retries after its channel's reconnect backoff (at most 0.5 s here):
    # twice SHORT covers the wait for its next attempt and the refusal
    for label, (peers, params) in runs.items():
        launcher.start("party2", peers=peers, params=params, data=vertical2, connect_timeout=2 * SHORT,
                       label=f"{label}-party2")
    listeners = [f"{label}-party2" for label in runs]
    assert launcher.wait(listeners, timeout=LINKED) == dict.fromkeys(listeners, 1), launcher.stderrs()
    refusal = "'party2' refused a link from a certificate speaking as ['party2'"
    for label, (peers, _) in runs.items():
        line = launcher.fail_line(f"{label}-party2", "party2")
        assert f"'party1' did not link to 'party2' (listening at {addresses(peers)['party2']}) within " \
               f"{2 * SHORT:g} s" in line, (label, line)
        if label.endswith("another_party"):
            assert f"; refused: {refusal}" in line, (label, line)
            assert line.endswith("]: not a peer that links to it ('party1')"), (label, line)
        elif label.startswith("tls"):
            assert "; refused: a TLS handshake failed ([SSL: CERTIFICATE_VERIFY_FAILED]" in line, \
                (label, line)
    assert_nothing_written(launcher, listeners)
    # the impostors: told (a refusal frame or status; the TLS alert of the listener). They may still be closing
    # their links (at most CLOSE_TIMEOUT) when the listener gives up; their own connect timeout is 30 s later.
    for label in runs:
        assert launcher.procs[f"{label}-party1"].wait(timeout=CLOSE_TIMEOUT + 2) == 1, launcher.stderrs()
        line = launcher.fail_line(f"{label}-party1", "party1")
        assert (refusal if label.endswith("another_party") else "'party2'") in line, (label, line)


# --- a party that dies or never comes -----------------------------------------------------------------------


def _established(ports) -> int:
    """TCP connections in state ESTABLISHED to one of `ports` (IPv4, or IPv6 with v4-mapped addresses:
    gRPC's)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and int(fields[2].rsplit(":", 1)[1], 16) in ports:
                count += 1
    return count


def test_a_killed_party_ends_the_others_naming_it(tmp_path, launcher, vertical3):
    """party2 is killed in the middle of a long run (on each carrier): party1 and party3 end at once (well
    within the run's timeout) with an error naming it; nothing is written."""
    block = {**ADMM, "max_epochs": 100_000, "tol_primal": 0.0, "tol_dual": 0.0, "timeout": 60}
    certs = Certs(PARTIES)
    ports = {}
    for carrier in CARRIERS:
        peers = certs.at(tmp_path / carrier)
        params = write_params(tmp_path / f"params-{carrier}.yaml", block, carrier)
        ports[carrier] = {int(a.rsplit(":", 1)[1]) for a in addresses(peers).values()}
        for name in PARTIES:
            launcher.start(name, peers=peers, params=params, data=vertical3, label=f"{carrier}-{name}")
    deadline = time.monotonic() + 60
    for carrier in CARRIERS:
        while _established(ports[carrier]) < 3:  # every pair linked (one connection each)
            assert time.monotonic() < deadline, launcher.stderrs()
            assert all(p.poll() is None for p in launcher.procs.values()), launcher.stderrs()
            time.sleep(0.02)
    time.sleep(0.5)  # the programs run
    assert all(p.poll() is None for p in launcher.procs.values()), launcher.stderrs()
    for carrier in CARRIERS:
        launcher.procs[f"{carrier}-party2"].send_signal(signal.SIGKILL)
    killed = time.monotonic()
    codes = launcher.wait(timeout=60)
    assert time.monotonic() - killed < 15, launcher.stderrs()
    expected = {f"{c}-{n}": -signal.SIGKILL if n == "party2" else 1 for c in CARRIERS for n in PARTIES}
    assert codes == expected, launcher.stderrs()
    for carrier in CARRIERS:
        for name in ("party1", "party3"):
            line = launcher.fail_line(f"{carrier}-{name}", name)
            # its own broken link, or party1's abort ("'party1' stopped (...)") that names it
            assert "the link to 'party2' broke (" in line, (carrier, line)
    assert_nothing_written(launcher, list(launcher.procs))


def test_an_unreachable_peer_ends_the_others_naming_it(tmp_path, launcher, vertical3):
    """party3 never starts (on each carrier): party1 and party2, which dial it, end naming it and its
    address; nothing is written. Whichever reaches its connect timeout first says it could not reach party3,
    and the other ends at once on that abort, which names party3 too. (party2 starts first, with the longer
    timeout, so that it is there when party1 links to it, however long party1 takes to start.)"""
    certs = Certs(PARTIES)
    runs = {}
    for carrier in CARRIERS:
        peers = certs.at(tmp_path / carrier)
        params = write_params(tmp_path / f"params-{carrier}.yaml", ADMM, carrier)
        launcher.start("party2", peers=peers, params=params, data=vertical3, connect_timeout=3 * SHORT,
                       label=f"{carrier}-party2")
        runs[carrier] = (peers, params)
    for carrier in CARRIERS:
        launcher.listening(f"{carrier}-party2")
    for carrier, (peers, params) in runs.items():
        launcher.start("party1", peers=peers, params=params, data=vertical3, connect_timeout=SHORT,
                       label=f"{carrier}-party1")
    codes = launcher.wait(timeout=LINKED)
    assert codes == dict.fromkeys(launcher.procs, 1), launcher.stderrs()
    for carrier, (peers, _) in runs.items():
        address = addresses(peers)["party3"]
        lines = {name: launcher.fail_line(f"{carrier}-{name}", name) for name in ("party1", "party2")}
        for name, line in lines.items():
            assert f"could not reach 'party3' at {address} within" in line, (carrier, line)
        # the first to give up names its own timeout
        assert any(f"{name!r} could not reach 'party3' at {address} within {timeout:g} s" in lines[name]
                   for name, timeout in (("party1", SHORT), ("party2", 3 * SHORT))), (carrier, lines)
    assert_nothing_written(launcher, list(launcher.procs))


def test_a_party_process_reports_its_own_peak_memory_not_its_launchers():
    """Linux carries a parent's peak resident memory across fork and exec into the child's getrusage; a party
    started by a large process reports its own peak (VmHWM) instead."""
    child = ("import json, resource; from ppml.launch.party import own_peak_mib; "
             "print(json.dumps([own_peak_mib(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))")
    parent = ("import subprocess, sys; big = bytearray(400 * 2**20); big[::4096] = b'1' * len(big[::4096]); "
              f"sys.stdout.write(subprocess.run([sys.executable, '-c', {child!r}], capture_output=True, "
              "text=True, check=True).stdout)")
    own, inherited = json.loads(subprocess.run([sys.executable, "-c", parent], capture_output=True, text=True,
                                               check=True).stdout)
    assert inherited > 400 > own > 0, (own, inherited)
