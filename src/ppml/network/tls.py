"""Certificates for authenticated links: a party is the name in its certificate, certified by its own CA.

A link (:mod:`ppml.network.links`) is mutual TLS: each side presents a certificate, and the name in it (a DNS
subject-alternative name, or the common name when there is none: :func:`identities`) is the party it speaks as. Trust is per peer:
a certificate is accepted as peer P only if P's CA bundle (:attr:`Credentials.peer_ca`, else the default
:attr:`Credentials.ca`) holds the CA that signed it, it names P's identity, and, where P's fingerprint is
pinned (:attr:`Credentials.pins`), it is that certificate (:func:`check_presented`). So with one CA per
organization, no organization's CA can certify another organization's party.

:func:`throwaway_set` makes a CA and one key and certificate per party, for one run (Ray launches one per
run) or for trying parties on one machine (``python -m ppml.certs``); :func:`make_ca` and :func:`issue` make
one CA per party (``--ca-per-party``); a real deployment brings the certificates its organizations issue.

Keys are ECDSA P-256 (a key pair in about a millisecond; gRPC's TLS accepts them); certificates are valid
from an hour ago (clock skew) for `days` days, and carry both the server and client extended key usages, as
every party both accepts and opens links.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Credentials", "throwaway_set", "make_ca", "issue", "identities", "check_own", "check_presented",
           "fingerprint", "der_of", "subjects", "issuer_of"]


@dataclass(frozen=True)
class Credentials:
    """What one party needs for its links: its certificate and key (PEM), and the CA certificates it trusts.

    Attributes
    ----------
    name : str
        The identity this party's certificate speaks as.
    certificate, key : bytes
        This party's certificate and private key (PEM).
    ca : bytes
        Every CA certificate this party trusts (PEM bundle): the union a listener accepts at the TLS layer,
        and the CA of every peer without its own in `peer_ca`.
    peer_ca : dict of str to bytes
        Per peer (party name): the CA certificate(s) allowed to certify that peer, and only that peer.
    pins : dict of str to str
        Per peer: the ``sha256:<hex>`` fingerprint (of the DER certificate) it must present.
    """

    name: str
    certificate: bytes
    key: bytes
    ca: bytes
    peer_ca: dict[str, bytes] = field(default_factory=dict, compare=False, hash=False)
    pins: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def ca_of(self, peer: str) -> bytes:
        """The CA bundle allowed to certify `peer`: its own, else the default."""
        return self.peer_ca.get(peer, self.ca)

    def __repr__(self) -> str:  # never print a private key
        return f"Credentials(name={self.name!r}, certificate=<{len(self.certificate)} bytes>, key=<hidden>)"


def _x509():
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    return x509, hashes, serialization, ec, ExtendedKeyUsageOID, NameOID


def _name(common_name: str):
    x509, *_, NameOID = _x509()
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem(cert) -> bytes:
    _, _, serialization, *_ = _x509()
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key) -> bytes:
    _, _, serialization, *_ = _x509()
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _span(days: int):
    now = datetime.datetime.now(datetime.timezone.utc)
    return now - datetime.timedelta(hours=1), now + datetime.timedelta(days=days)


def make_ca(ca_name: str = "ppml throwaway CA", *, days: int = 30) -> tuple[bytes, bytes]:
    """(certificate, key) in PEM of a fresh self-signed CA named `ca_name`, valid for `days` days."""
    x509, hashes, _, ec, _, _ = _x509()
    start, end = _span(days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name(ca_name)).issuer_name(_name(ca_name))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    return _pem(ca), _key_pem(ca_key)


def issue(ca_pem: bytes, ca_key_pem: bytes, name: str, *, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
          days: int = 30) -> tuple[bytes, bytes]:
    """(certificate, key) in PEM: a fresh key and a certificate for `name`, signed by the CA `ca_pem`.

    The certificate names `name` as common name and DNS name, and lists `hosts` (IP addresses or host names)
    beside it so that it also verifies as the host it is reached at. Whoever holds a CA's key can issue any
    name: :func:`check_presented` is what keeps one organization's CA from certifying another's party.
    """
    x509, hashes, serialization, ec, EKU, _ = _x509()
    ca = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    start, end = _span(days)
    key = ec.generate_private_key(ec.SECP256R1())
    alt: list = [x509.DNSName(name)]
    for host in hosts:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            if host != name:
                alt.append(x509.DNSName(host))
    cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.ExtendedKeyUsage([EKU.SERVER_AUTH, EKU.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return _pem(cert), _key_pem(key)


def throwaway_set(names: list[str] | tuple[str, ...], *, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
                  days: int = 30, ca_name: str = "ppml throwaway CA") -> tuple[bytes, bytes, dict[str, Credentials]]:
    """(CA certificate, CA key, credentials per name): a fresh CA and one certificate per party (:func:`issue`)."""
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"certificates need distinct party names, got {list(names)}")
    ca_pem, ca_key = make_ca(ca_name, days=days)
    out = {}
    for name in names:
        certificate, key = issue(ca_pem, ca_key, name, hosts=hosts, days=days)
        out[name] = Credentials(name, certificate, key, ca_pem)
    return ca_pem, ca_key, out


def identities(certificate: bytes) -> list[str]:
    """The names a certificate (PEM or DER) speaks as: its DNS subject-alternative names when it has any, else
    its common name (RFC 6125: a certificate with DNS names is never read by its common name, so a common name
    of ``guest`` does not make a certificate whose DNS names name another party speak as ``guest``)."""
    x509, *_, NameOID = _x509()
    cert = x509.load_der_x509_certificate(der_of(certificate))
    names: list[str] = []
    try:
        names += cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName)
    except x509.ExtensionNotFound:
        pass
    if not names:
        names = [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    return list(dict.fromkeys(names))


def check_own(credentials: Credentials, identity: str, where: str) -> None:
    """Refuse, naming `where`, a certificate that does not speak as `identity` or does not match its key."""
    x509, _, serialization, *_ = _x509()
    try:
        cert = x509.load_pem_x509_certificate(credentials.certificate)
        key = serialization.load_pem_private_key(credentials.key, password=None)
        x509.load_pem_x509_certificates(credentials.ca)
    except ValueError as exc:
        raise ValueError(f"{where}: not a PEM certificate, key or CA bundle ({exc})") from None
    if identity not in identities(credentials.certificate):
        raise ValueError(f"{where}: the certificate speaks as {identities(credentials.certificate)}, not as "
                         f"{identity!r}")
    if key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) != \
            cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo):
        raise ValueError(f"{where}: the key is not the certificate's")


def der_of(certificate: bytes) -> bytes:
    """The DER form of a PEM certificate (DER given is returned as is)."""
    x509, _, serialization, *_ = _x509()
    if certificate.lstrip().startswith(b"-----BEGIN"):
        return x509.load_pem_x509_certificate(certificate).public_bytes(serialization.Encoding.DER)
    return certificate


def fingerprint(certificate: bytes) -> str:
    """``sha256:<hex>`` of a certificate's DER form (PEM or DER given)."""
    return "sha256:" + hashlib.sha256(der_of(certificate)).hexdigest()


def subjects(bundle: bytes) -> list[str]:
    """The subjects (RFC 4514) of the certificates of a PEM bundle."""
    x509, *_ = _x509()
    return [c.subject.rfc4514_string() for c in x509.load_pem_x509_certificates(bundle)]


def issuer_of(certificate: bytes) -> str:
    """The subject (RFC 4514) of the CA that signed a certificate (PEM or DER)."""
    x509, *_ = _x509()
    return x509.load_der_x509_certificate(der_of(certificate)).issuer.rfc4514_string()


def check_presented(certificate: bytes, peer: str, identity: str, ca: bytes, pin: str | None, me: str
                    ) -> dict[str, Any]:
    """What `peer`'s certificate presented (identity, issuer, fingerprint), once it is accepted as `peer`.

    Accepted only if a CA of `ca` (the bundle allowed to certify `peer`; the CA that signed the certificate
    directly) signed it, both are valid now, it speaks as `identity`, and it is the pinned one when `pin`
    is given. This is checked after the TLS handshake on both sides: a listener accepts every CA it trusts at
    the TLS layer, as it cannot know who dials before the handshake.

    Parameters
    ----------
    certificate : bytes
        The certificate the peer presented (DER or PEM).
    peer, identity : str
        The party it claims to be, and the name its certificate must speak as.
    ca : bytes
        PEM bundle of the CA certificates allowed to certify `peer`.
    pin : str or None
        ``sha256:<hex>`` of the DER certificate `peer` must present.
    me : str
        This party, named in the refusal.

    Raises
    ------
    ValueError
        One line naming `peer`, the presented issuer and the expected one (or the fingerprints).
    """
    x509, *_ = _x509()
    der = der_of(certificate)
    cert = x509.load_der_x509_certificate(der)
    issuer = cert.issuer.rfc4514_string()
    found = fingerprint(der)
    names = identities(der)
    shown = {"identity": identity if identity in names else (names[0] if names else ""), "issuer": issuer,
             "fingerprint": found}
    cas = x509.load_pem_x509_certificates(ca)
    expected = " or ".join(repr(c.subject.rfc4514_string()) for c in cas) or "none"
    refused = f"{me!r} refused {peer!r}: its certificate"
    now = datetime.datetime.now(datetime.timezone.utc)
    signer = None
    for candidate in cas:
        try:
            cert.verify_directly_issued_by(candidate)
        except Exception:  # noqa: BLE001 - another CA's name, key or signature: not this one
            continue
        signer = candidate
        break
    if signer is None:
        raise ValueError(f"{refused} is issued by {issuer!r}, not by a CA allowed to certify {peer!r} ({expected})")
    for what, c in (("certificate", cert), ("CA certificate", signer)):
        if not c.not_valid_before_utc <= now <= c.not_valid_after_utc:
            raise ValueError(f"{me!r} refused {peer!r}: its {what} is valid from {c.not_valid_before_utc:%Y-%m-%d %H:%M} to "
                             f"{c.not_valid_after_utc:%Y-%m-%d %H:%M} UTC, not now (issuer {issuer!r})")
    if identity not in names:
        raise ValueError(f"{refused} speaks as {names}, not as {identity!r} (issuer {issuer!r}, expected "
                         f"{expected})")
    if pin is not None and found != pin.lower():
        raise ValueError(f"{refused} has fingerprint {found}, not the pinned {pin} (issuer {issuer!r}, "
                         f"expected {expected})")
    return shown
