"""The peers file of ``transport: grpc``: where every party listens, whom a party trusts, and its own credentials.

Each organization writes its own (``python -m ppml.certs`` writes one for trying every party on one machine)::

    ca: ca.pem                  # the CA certificate(s) this party trusts (a PEM bundle)
    parties:
      guest:                    # this party: its certificate and key
        address: 10.0.0.1:47000 # where the others reach it
        listen: 0.0.0.0:47000   # optional: where it listens, if not its address
        certificate: guest.pem
        key: guest.key
      host:
        address: 10.0.0.2:47000
        identity: host.bank.example  # optional: the name its certificate speaks as (default: the party's name)
      arbiter:
        address: 10.0.0.3:47000

Paths are relative to the peers file. Only the party's own entry needs ``certificate`` and ``key``; the
other entries say where a peer listens and the name its certificate must carry. Every error names the file
and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ppml.config import ParamError
from ppml.network.tls import Credentials, check_own

__all__ = ["Peers", "load_peers", "write_peers"]


@dataclass(frozen=True)
class Peers:
    """One party's reading of its peers file."""

    me: str
    credentials: Credentials
    addresses: dict[str, str]
    identities: dict[str, str]
    listen: str


def _address(file: Path, key: str, value: Any) -> str:
    host, colon, port = str(value).rpartition(":")
    if not isinstance(value, str) or not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ParamError(f"{file}: {key} must be host:port, got {value!r}")
    return value


def _read(file: Path, key: str, value: Any) -> bytes:
    if not isinstance(value, str):
        raise ParamError(f"{file}: {key} must be a file name, got {value!r}")
    path = (file.parent / value)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ParamError(f"{file}: {key}: cannot read {path} ({exc.strerror})") from None


def load_peers(path: str | Path, me: str, names: tuple[str, ...] | list[str]) -> Peers:
    """Party `me`'s peers file, checked: an entry with an address for each of `names` (the run's addresses),
    its own certificate and key, which must speak as its identity and match each other."""
    file = Path(path)
    try:
        doc = yaml.safe_load(file.read_text())
    except OSError as exc:
        raise ParamError(f"{file}: cannot read the peers file ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ParamError(f"{file}: not YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("parties"), dict):
        raise ParamError(f"{file}: needs a mapping 'parties' of party name to its address")
    parties = doc["parties"]
    missing = [n for n in names if n not in parties]
    if missing:
        raise ParamError(f"{file}: parties lacks {missing} (this run's parties: {', '.join(names)})")
    if me not in names:
        raise ParamError(f"--party {me!r} is not a party of this run (its parties: {', '.join(names)})")
    addresses, identities = {}, {}
    for name in names:
        entry = parties[name]
        if not isinstance(entry, dict):
            raise ParamError(f"{file}: parties.{name} must be a mapping with an address, got {entry!r}")
        addresses[name] = _address(file, f"parties.{name}.address", entry.get("address"))
        identity = entry.get("identity", name)
        if not isinstance(identity, str) or not identity:
            raise ParamError(f"{file}: parties.{name}.identity must be a name, got {identity!r}")
        identities[name] = identity
    own = parties[me]
    for key in ("certificate", "key"):
        if key not in own:
            raise ParamError(f"{file}: parties.{me}.{key} is required (this party's own {key})")
    if "ca" not in doc:
        raise ParamError(f"{file}: ca is required (the CA certificates this party trusts)")
    credentials = Credentials(identities[me], _read(file, f"parties.{me}.certificate", own["certificate"]),
                              _read(file, f"parties.{me}.key", own["key"]), _read(file, "ca", doc["ca"]))
    try:
        check_own(credentials, identities[me], f"{file}: parties.{me}")
    except ValueError as exc:
        raise ParamError(str(exc)) from None
    listen = _address(file, f"parties.{me}.listen", own.get("listen", addresses[me]))
    return Peers(me, credentials, {n: a for n, a in addresses.items() if n != me},
                 {n: i for n, i in identities.items() if n != me}, listen)


def write_peers(directory: Path, credentials: dict[str, Credentials], addresses: dict[str, str]) -> Path:
    """Write `credentials` (the CA, and each party's certificate and key, readable by the owner only) and a
    peers file naming them into `directory`; returns the peers file."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = next(iter(credentials.values())).ca
    (directory / "ca.pem").write_bytes(ca)
    parties = {}
    for name, cred in credentials.items():
        (directory / f"{name}.pem").write_bytes(cred.certificate)
        key = directory / f"{name}.key"
        key.touch(mode=0o600)
        key.write_bytes(cred.key)
        parties[name] = {"address": addresses[name], "certificate": f"{name}.pem", "key": f"{name}.key"}
    file = directory / "peers.yaml"
    file.write_text("# every party's address, certificate and key, for trying all parties on one machine\n"
                    "# (python -m ppml.certs); a real deployment gives each party a file with only its own key\n"
                    + yaml.safe_dump({"ca": "ca.pem", "parties": parties}, sort_keys=False))
    return file
