"""Crash and resume: each party's own checkpoints at epoch boundaries, and the agreement on where to resume.

A party of the Paillier protocols run with ``python -m ppml.party --out DIR`` writes, after every epoch, its whole
state (its model block, the optimizer's state, the batch schedule's position, every random stream's state, its
records so far) to ``DIR/checkpoint/seed<i>/epoch<e>.json``: written to a temporary file, then renamed, so a
checkpoint is whole or absent; the two latest are kept (a party killed mid-epoch holds one epoch fewer than a
peer that finished it). Restarted with ``--resume``, every party first tells the arbiter which epochs it holds
(:data:`HELD_TAG`); the arbiter answers with the latest epoch all of them hold (:data:`FROM_TAG`), or ends the run
naming the party that holds none of the others' epochs, and every party continues from its own checkpoint of
that epoch. The cipher's randomness is fresh after a restart (the arbiter makes a new key pair; its private key
is never written), and nothing else is random: the final model equals an uninterrupted run's bit for bit.

A checkpoint records the run's session (experiment, params digest, seed index) and the party; one of another
run or party is refused, naming the file and what differs. Floats are written as Python's shortest exact repr
and random streams as numpy's bit-generator state, so JSON carries the state exactly.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np

from ppml.config import ParamError
from ppml.network import CONTROL, ProtocolError, expect
from ppml.network.ownfiles import read_own_json

__all__ = ["Checkpoints", "HELD_TAG", "FROM_TAG", "encode_state", "decode_state"]

log = logging.getLogger(__name__)

#: every party -> arbiter on --resume: the epochs of this run it holds checkpoints of
HELD_TAG = CONTROL + "resume_held"
#: arbiter -> every party: the epoch to resume from (the latest all of them hold)
FROM_TAG = CONTROL + "resume_from"
FORMAT = "ppml-checkpoint/1"
KEEP = 2
_NAME = re.compile(r"epoch(\d+)\.json")
#: Most epochs a party may report holding (bounded decoding of HELD_TAG).
MAX_HELD = 16


def encode_state(value: Any) -> Any:
    """A JSON-able copy of `value`: arrays as ``{"__array__": dtype, "data": [...]}``, tuples as lists, floats
    exact (JSON's float is Python's repr)."""
    if isinstance(value, np.ndarray):
        return {"__array__": str(value.dtype), "shape": list(value.shape), "data": value.ravel().tolist()}
    if isinstance(value, dict):
        return {str(k): encode_state(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode_state(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def decode_state(value: Any) -> Any:
    """The inverse of :func:`encode_state`."""
    if isinstance(value, dict):
        if "__array__" in value:
            return np.asarray(value["data"], dtype=value["__array__"]).reshape(value["shape"])
        return {k: decode_state(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_state(v) for v in value]
    return value


class Checkpoints:
    """One party's checkpoints of one run (one seed), in ``out/checkpoint/seed<i>``.

    Parameters
    ----------
    directory : Path
        The party's output directory.
    session : str
        The run's session (:func:`ppml.launch.party.session_of`): experiment, params digest, seed index.
    party : str
        This party.
    arbiter : str
        The coordinator's name (it decides where to resume).
    peers : list of str
        Every other party of the run.
    resume : bool
        Whether this start resumes (then :meth:`agree` runs the agreement); a start that does not is refused
        when the directory holds checkpoints already, so that none is lost to a forgotten ``--resume``.
    """

    def __init__(self, directory: Path, *, session: str, party: str, seed_index: int, arbiter: str,
                 peers: list[str], resume: bool) -> None:
        self.dir = Path(directory) / "checkpoint" / f"seed{seed_index}"
        self.session, self.party, self.arbiter, self.peers, self.resume = session, party, arbiter, peers, resume
        if not resume and self.held():
            raise ParamError(f"{self.dir}: holds checkpoints of an earlier start (epochs {self.held()}); continue "
                             "it with --resume, or give another --out (or remove that directory) to start over")

    def held(self) -> list[int]:
        """The epochs this party holds a checkpoint of, ascending."""
        if not self.dir.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.dir.iterdir() if (m := _NAME.fullmatch(p.name)))

    def save(self, epoch: int, state: dict[str, Any]) -> None:
        """The state after `epoch` (1-based), atomically; only the :data:`KEEP` latest are kept."""
        self.dir.mkdir(parents=True, exist_ok=True)
        doc = {"format": FORMAT, "session": self.session, "party": self.party, "epoch": epoch,
               "state": encode_state(state)}
        path = self.dir / f"epoch{epoch}.json"
        tmp = self.dir / f".epoch{epoch}.json.tmp"
        tmp.write_text(json.dumps(doc, allow_nan=True))
        tmp.replace(path)
        for old in self.held()[:-KEEP]:
            (self.dir / f"epoch{old}.json").unlink(missing_ok=True)

    def load(self, epoch: int) -> dict[str, Any]:
        """This party's state after `epoch`, checked to be this run's and this party's."""
        path = self.dir / f"epoch{epoch}.json"
        doc = read_own_json(path, what="the checkpoint", limit=1 << 30)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or "state" not in doc:
            raise ParamError(f"{path}: not a checkpoint of format {FORMAT}")
        if doc.get("session") != self.session:
            raise ParamError(f"{path}: a checkpoint of run {str(doc.get('session'))[:80]!r}, not of this run "
                             f"{self.session!r} (another experiment, parameters or seed)")
        if doc.get("party") != self.party or doc.get("epoch") != epoch:
            raise ParamError(f"{path}: the checkpoint of party {doc.get('party')!r} after epoch "
                             f"{doc.get('epoch')!r}, not of {self.party!r} after epoch {epoch}")
        return decode_state(doc["state"])

    def check_own(self) -> None:
        """Before linking: every checkpoint this party would offer is this run's (else refused, named)."""
        for epoch in self.held():
            self.load(epoch)

    def agree(self, endpoint: Any) -> tuple[int, dict[str, Any]] | None:
        """On --resume: (epoch, this party's state after it), the latest epoch every party holds; None when no
        party holds any (a fresh start). A ProtocolError naming the party when they hold no common epoch."""
        if not self.resume:
            return None
        mine = self.held()
        if endpoint.name != self.arbiter:
            endpoint.send(self.arbiter, HELD_TAG, np.asarray(mine, dtype=np.int64))
            epoch = expect.integer(endpoint.recv(self.arbiter, FROM_TAG), sender=self.arbiter, tag=FROM_TAG,
                                   low=0, high=max(mine, default=0))
        else:
            held = {self.party: mine}
            for peer in self.peers:
                got = expect.vector(endpoint.recv(peer, HELD_TAG), sender=peer, tag=HELD_TAG, length=None,
                                    dtype="int", low=1, high=2**31)
                if got.size > MAX_HELD:
                    raise ProtocolError(f"{peer!r} sent {HELD_TAG!r} of {got.size} epochs, at most {MAX_HELD}")
                held[peer] = sorted(int(e) for e in got)
            common = set.intersection(*(set(h) for h in held.values()))
            if not common and any(held.values()):
                shown = "; ".join(f"{n}: {h or 'none'}" for n, h in held.items())
                raise ProtocolError(f"the parties hold no checkpoint of a common epoch ({shown}): resume "
                                    "needs every party's checkpoint of one epoch")
            epoch = max(common, default=0)
            endpoint.broadcast(self.peers, FROM_TAG, epoch)
        if epoch == 0:
            log.info("%s: no checkpoint held by every party; starting from epoch 1", self.party)
            return None
        if epoch not in mine:
            raise ProtocolError(f"{self.arbiter!r} sent {FROM_TAG!r} = {epoch}, an epoch {self.party} holds no "
                                f"checkpoint of (it holds {mine})")
        log.info("%s: resuming after epoch %d (held by every party)", self.party, epoch)
        return epoch, self.load(epoch)
