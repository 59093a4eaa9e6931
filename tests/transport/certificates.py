"""Certificates the transport tests forge: names chosen apart (a common name and DNS names that disagree)."""

from __future__ import annotations

import datetime


def certificate_naming(ca_pem: bytes, ca_key_pem: bytes, common_name: str, dns_names: list[str]
                       ) -> tuple[bytes, bytes]:
    """(certificate, key) in PEM: common name `common_name`, DNS subject-alternative names `dns_names` (no such
    extension when empty), signed by the CA `ca_pem`, as :func:`ppml.network.tls.issue` does otherwise."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
               .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                     ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
    if dns_names:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(d) for d in dns_names]),
                                        critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))
