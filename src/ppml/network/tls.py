"""Certificates for authenticated links: a party is the name in its certificate.

A link (:mod:`ppml.network.links`) is mutual TLS: each side presents a certificate signed by a CA the other
trusts, and the name in it (a DNS subject-alternative name, or the common name when there is none) is the
party it speaks as. :func:`throwaway_set` makes a CA and one key and certificate per party, for one run (Ray
launches one per run) or for trying parties on one machine (``python -m ppml.certs``); a real deployment
brings the certificates its organizations issue.

Keys are ECDSA P-256 (a key pair in about a millisecond; gRPC's TLS accepts them); certificates are valid
from an hour ago (clock skew) for `days` days, and carry both the server and client extended key usages, as
every party both accepts and opens links.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass

__all__ = ["Credentials", "throwaway_set", "identities", "check_own"]


@dataclass(frozen=True)
class Credentials:
    """What one party needs for its links: its certificate and key (PEM), and the CA certificates it trusts."""

    name: str
    certificate: bytes
    key: bytes
    ca: bytes

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


def throwaway_set(names: list[str] | tuple[str, ...], *, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
                  days: int = 30, ca_name: str = "ppml throwaway CA") -> tuple[bytes, bytes, dict[str, Credentials]]:
    """(CA certificate, CA key, credentials per name): a fresh CA and one certificate per party.

    Each certificate names its party as common name and DNS name, and lists `hosts` (IP addresses or host
    names) beside it so that it also verifies as the host it is reached at.
    """
    x509, hashes, _, ec, EKU, _ = _x509()
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"certificates need distinct party names, got {list(names)}")
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name(ca_name)).issuer_name(_name(ca_name))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    ca_pem = _pem(ca)
    out = {}
    for name in names:
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
        out[name] = Credentials(name, _pem(cert), _key_pem(key), ca_pem)
    return ca_pem, _key_pem(ca_key), out


def identities(certificate: bytes) -> list[str]:
    """The names a certificate speaks as: its DNS subject-alternative names, then its common name."""
    x509, *_, NameOID = _x509()
    cert = x509.load_pem_x509_certificate(certificate)
    names: list[str] = []
    try:
        names += cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName)
    except x509.ExtensionNotFound:
        pass
    names += [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
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
