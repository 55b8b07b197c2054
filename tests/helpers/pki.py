"""Certificates for TLS tests: a CA and leaves it signs, written as PEM files."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DAY = datetime.timedelta(days=1)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    # ZooKeeper's PEM keystore reads unencrypted PKCS#8 only.
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@dataclass(frozen=True)
class Leaf:
    cert: Path
    key: Path
    both: Path  # certificate and key in one file, as ZooKeeper's keystore wants


def _builder(
    cn: str, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, ca: bool
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - DAY)
        .not_valid_after(now + 30 * DAY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )


class Authority:
    def __init__(self, directory: Path, cn: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.cert = (
            _builder(cn, _name(cn), self.key, ca=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        self.pem = directory / f"{cn}.pem"
        self.pem.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, cn: str, dns: tuple[str, ...] = (), client: bool = False) -> Leaf:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            _builder(cn, self.cert.subject, key, ca=False)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        if dns:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False
            )
        cert = builder.sign(self.key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
        pem_key = _pem_key(key)
        leaf = Leaf(self.directory / f"{cn}.crt", self.directory / f"{cn}.key", self.directory / f"{cn}.pem")
        leaf.cert.write_bytes(cert)
        leaf.key.write_bytes(pem_key)
        leaf.both.write_bytes(cert + pem_key)
        return leaf
