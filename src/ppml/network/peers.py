"""The peers file of ``transport: grpc``: where every party listens, which CA may certify each peer, and the
party's own credentials.

Each organization writes its own (``python -m ppml.certs DIR --parties ... --ca-per-party`` writes one per party,
with one CA per party, for rehearsing three organizations on one machine)::

    parties:
      guest:                    # this party: its certificate and key
        address: 10.0.0.1:47000 # where the others reach it
        listen: 0.0.0.0:47000   # optional: where it listens, if not its address
        certificate: guest.pem
        key: guest.key
        ca: guest-ca.pem        # optional: its own CA; its certificate must be signed by it
      host:
        address: 10.0.0.2:47000
        identity: host.bank.example  # optional: the name its certificate speaks as (default: the party's name)
        ca: bank-ca.pem         # the CA certificate(s) allowed to certify host, and no other peer (a PEM bundle)
        fingerprint: sha256:9f86d0...  # optional: host must present exactly this certificate (SHA-256 of its DER)
      arbiter:
        address: 10.0.0.3:47000
        ca: agency-ca.pem
    ca: ca.pem                  # optional: the CA bundle of every peer entry without its own ca

A certificate is accepted as peer P only if it is signed by a CA of P's ``ca`` (the CA that signed it directly:
an organization using an intermediate CA lists it, with its root), names P's identity and, where pinned, has
P's fingerprint (:func:`~ppml.network.tls.check_presented`): a CA trusted for one peer certifies no other.
Every peer entry of the run needs its own ``ca`` or the top-level default.

Paths are relative to the peers file. The file refuses ambiguity: a key given twice anywhere (a party listed
twice) is an error naming the key and its line, and only the party's own entry may hold ``certificate`` and
``key``, except in a file saying ``rehearsal: true`` (``python -m ppml.certs`` without ``--ca-per-party``: one
file holding every party's key, for trying all parties on one machine). Every error names the file and the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ppml.config import ParamError
from ppml.network.ownfiles import NotRegularFileError, read_own_bytes
from ppml.network.tls import Credentials, check_own, check_presented, subjects

__all__ = ["Peers", "load_peers", "write_peers", "write_peers_per_party"]

_FINGERPRINT = re.compile(r"sha256:([0-9a-f]{2}(?::?[0-9a-f]{2}){31})")


class _DuplicateKey(Exception):
    pass


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a mapping that gives a key twice (YAML would keep the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the constructor refuses it
                    continue
                line = key_node.start_mark.line + 1
                if first is not None:
                    raise _DuplicateKey(f"line {line}: duplicate key {key!r} (first at line {first})")
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


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
        return read_own_bytes(path, what=f"the file of {key}")
    except NotRegularFileError as exc:
        raise ParamError(f"{file}: {key}: {exc}") from None
    except OSError as exc:
        raise ParamError(f"{file}: {key}: cannot read {path} ({exc.strerror or exc})") from None


def _bundle(file: Path, key: str, value: Any) -> bytes:
    pem = _read(file, key, value)
    try:
        if not subjects(pem):
            raise ValueError("no certificate")
    except ValueError:
        raise ParamError(f"{file}: {key}: {file.parent / value} is not a PEM certificate bundle") from None
    return pem


def _pin(file: Path, key: str, value: Any) -> str:
    match = _FINGERPRINT.fullmatch(value.strip().lower()) if isinstance(value, str) else None
    if match is None:
        raise ParamError(f"{file}: {key} must be sha256:<64 hex digits> (of the DER certificate), got {value!r}")
    return "sha256:" + match.group(1).replace(":", "")


def load_peers(path: str | Path, me: str, names: tuple[str, ...] | list[str]) -> Peers:
    """Party `me`'s peers file, checked.

    Parameters
    ----------
    path : str or Path
        The peers file (format in the module docstring).
    me : str
        This party.
    names : sequence of str
        The run's parties: each needs an entry with an address, and each peer a CA (its own ``ca`` or the
        top-level one).

    Returns
    -------
    Peers
        Its credentials carry the union of the peers' CAs (:attr:`Credentials.ca`), each peer's own CA
        (:attr:`Credentials.peer_ca`) and pinned fingerprints (:attr:`Credentials.pins`).

    Raises
    ------
    ParamError
        One line naming the file and the key: unreadable or not YAML, a key given twice (with its line), a
        missing entry, address or CA, another party's entry holding a certificate or key, a bad fingerprint,
        this party's certificate not speaking as its identity, not matching its key or not signed by its
        own ``ca``.
    """
    file = Path(path)
    try:
        text = read_own_bytes(file, what="the peers file").decode("utf-8")
        doc = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except NotRegularFileError as exc:
        raise ParamError(str(exc)) from None
    except OSError as exc:
        raise ParamError(f"{file}: cannot read the peers file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ParamError(f"{file}: the peers file is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except _DuplicateKey as exc:
        raise ParamError(f"{file}: {exc}") from None
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
    rehearsal = doc.get("rehearsal", False)
    if not isinstance(rehearsal, bool):
        raise ParamError(f"{file}: rehearsal must be true or false, got {rehearsal!r}")
    if not rehearsal:
        for name, entry in parties.items():
            held = [k for k in ("certificate", "key") if isinstance(entry, dict) and k in entry]
            if name != me and held:
                raise ParamError(f"{file}: parties.{name}.{held[-1]}: only this party's own entry ({me}) may hold "
                                 f"a certificate or key (a file for every party on one machine says rehearsal: "
                                 f"true)")
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
    default = _bundle(file, "ca", doc["ca"]) if "ca" in doc else None
    peer_ca: dict[str, bytes] = {}
    pins: dict[str, str] = {}
    for name in names:
        if name == me:
            continue
        entry = parties[name]
        if "ca" in entry:
            peer_ca[name] = _bundle(file, f"parties.{name}.ca", entry["ca"])
        elif default is not None:
            peer_ca[name] = default
        else:
            raise ParamError(f"{file}: parties.{name}.ca is required (the CA allowed to certify {name}), as the "
                             "file has no top-level ca")
        if "fingerprint" in entry:
            pins[name] = _pin(file, f"parties.{name}.fingerprint", entry["fingerprint"])
    union = b"".join(dict.fromkeys(([default] if default is not None else []) + list(peer_ca.values())))
    credentials = Credentials(identities[me], _read(file, f"parties.{me}.certificate", own["certificate"]),
                              _read(file, f"parties.{me}.key", own["key"]), union, peer_ca, pins)
    try:
        check_own(credentials, identities[me], f"{file}: parties.{me}")
    except ValueError as exc:
        raise ParamError(str(exc)) from None
    if "ca" in own:
        own_ca = _bundle(file, f"parties.{me}.ca", own["ca"])
        try:
            check_presented(credentials.certificate, me, identities[me], own_ca, None, me)
        except ValueError as exc:
            raise ParamError(f"{file}: parties.{me}.ca: {exc}") from None
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
                    + yaml.safe_dump({"ca": "ca.pem", "rehearsal": True, "parties": parties}, sort_keys=False))
    return file


def write_peers_per_party(directory: Path, cas: dict[str, tuple[bytes, bytes]], credentials: dict[str, Credentials],
                          addresses: dict[str, str]) -> dict[str, Path]:
    """Write one directory per party, as each organization would hold it: ``<directory>/<party>/`` with its
    certificate and key, its own CA's key (readable by the owner only; to issue more certificates), every
    party's CA certificate (``ca-<name>.pem``) and a peers file whose every entry names its own party's CA.

    Parameters
    ----------
    directory : Path
        Where the per-party directories go.
    cas : dict of str to (bytes, bytes)
        Per party: its organization's CA certificate and key (PEM).
    credentials : dict of str to Credentials
        Per party: its certificate and key, signed by its own CA.
    addresses : dict of str to str
        Per party: ``host:port``.

    Returns
    -------
    dict of str to Path
        Per party: its peers file.
    """
    files = {}
    for me, cred in credentials.items():
        home = directory / me
        home.mkdir(parents=True, exist_ok=True)
        for name, (ca, _) in cas.items():
            (home / f"ca-{name}.pem").write_bytes(ca)
        for name, secret in ((f"{me}.key", cred.key), (f"ca-{me}.key", cas[me][1])):
            (home / name).touch(mode=0o600)
            (home / name).write_bytes(secret)
        (home / f"{me}.pem").write_bytes(cred.certificate)
        parties = {name: {"address": addresses[name], "ca": f"ca-{name}.pem"} for name in credentials}
        parties[me].update(certificate=f"{me}.pem", key=f"{me}.key")
        files[me] = home / "peers.yaml"
        files[me].write_text(f"# {me}'s peers file: only its own key; each peer certified by its own CA alone\n"
                             "# (python -m ppml.certs --ca-per-party, rehearsing one organization per party)\n"
                             + yaml.safe_dump({"parties": parties}, sort_keys=False))
    return files
