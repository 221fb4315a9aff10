"""A throw-away test CA and a server certificate for the fake providers.

Generated at run time with ``cryptography`` (EC P-256, valid for a day) so no key sits
in the repository.  The leaf certificate carries the provider host names as SANs, so a
client (or spoolproxy's upstream side, through ``--connect-to`` + ``--upstream-ca``)
that believes it talks to ``api.openai.com`` verifies it against :attr:`TestCA.ca_pem_path`.
"""

from __future__ import annotations

import datetime
import ipaddress
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: SANs of the leaf certificate: the real provider hosts plus loopback.
DEFAULT_HOSTS: tuple[str, ...] = (
    "api.openai.com",
    "api.anthropic.com",
    "generativelanguage.googleapis.com",
    "api.cohere.com",
    "bedrock-runtime.us-east-1.amazonaws.com",
    "localhost",
    "127.0.0.1",
)


@dataclass(frozen=True)
class TestCA:
    """Paths (PEM files) of a generated CA and of the leaf it signed.

    ``ca_pem_path``: the CA certificate (give it to clients as ``verify=`` or to
    spoolproxy as ``--upstream-ca``).  ``cert_pem_path`` / ``key_pem_path``: the server's
    certificate chain (leaf then CA) and its unencrypted private key.
    """

    __test__ = False  # not a pytest test class despite the name

    ca_pem_path: Path
    cert_pem_path: Path
    key_pem_path: Path
    hosts: tuple[str, ...]


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "spoolproxy tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def generate(directory: Path, hosts: tuple[str, ...] = DEFAULT_HOSTS) -> TestCA:
    """Create ``ca.pem``, ``server.pem`` and ``server-key.pem`` in *directory*.

    Returns the :class:`TestCA` naming them.  Raises OSError when *directory* is not
    writable.
    """
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=1)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("spoolproxy fake provider test CA")
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    leaf_key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    leaf_cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_name)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=False,
                crl_sign=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(leaf_key.public_key()), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )

    pem = serialization.Encoding.PEM
    ca_path = directory / "ca.pem"
    cert_path = directory / "server.pem"
    key_path = directory / "server-key.pem"
    ca_path.write_bytes(ca_cert.public_bytes(pem))
    cert_path.write_bytes(leaf_cert.public_bytes(pem) + ca_cert.public_bytes(pem))
    key_path.write_bytes(
        leaf_key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    key_path.chmod(0o600)
    return TestCA(ca_path, cert_path, key_path, hosts)


_lock = threading.Lock()
_shared: TestCA | None = None


def shared_ca() -> TestCA:
    """One CA per test process (generated on first use in a temporary directory)."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = generate(Path(tempfile.mkdtemp(prefix="spoolproxy-fake-ca-")))
        return _shared
