"""The spoolproxy certificate authority and the CA bundle handed to recorded programs.

Everything lives in one per-user directory, never in a project:
``$SPOOLPROXY_HOME``, else ``$XDG_DATA_HOME/spoolproxy``, else ``~/.local/share/spoolproxy``
(mode 0700).  Inside it:

* ``mitmproxy/`` is mitmproxy's ``confdir``: ``mitmproxy-ca.pem`` (CA key + certificate,
  0600), ``mitmproxy-ca.p12`` (0600), ``mitmproxy-ca-cert.pem`` (the public certificate);
* ``ca-bundle.pem``: the usual roots (the system store and certifi's) followed by the
  spoolproxy CA certificate, for ``SSL_CERT_FILE``/``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE``
  so a client trusts both real servers and the recording proxy.

The CA is created on first use (RSA 2048, organisation and CN ``spoolproxy``); the bundle
is rebuilt whenever the CA certificate or a root store is newer than it.  An existing CA is
checked on every use (:func:`check_ca`, ~0.3 ms): a key or certificate that does not parse,
a key that does not belong to the certificate, or an expired certificate is a one-line
SpoolError naming ``spoolproxy ca --regenerate`` (:func:`regenerate_ca`), instead of
mitmproxy failing inside the proxy on the first HTTPS connection.
"""

from __future__ import annotations

import fcntl
import os
import ssl
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from ..errors import SpoolError

CA_BASENAME = "mitmproxy"  # mitmproxy's fixed file prefix inside confdir
BUNDLE_NAME = "ca-bundle.pem"
_PRIVATE_FILES = (f"{CA_BASENAME}-ca.pem", f"{CA_BASENAME}-ca.p12")


@dataclass(frozen=True)
class CAPaths:
    """Where the CA lives: ``cert`` (public PEM certificate), ``bundle`` (roots + our CA,
    PEM) and ``confdir`` (mitmproxy's confdir holding the CA key)."""

    cert: Path
    bundle: Path
    confdir: Path


def ca_dir() -> Path:
    """The per-user spoolproxy directory (not created here).

    ``$SPOOLPROXY_HOME`` wins, then ``$XDG_DATA_HOME/spoolproxy``, then
    ``~/.local/share/spoolproxy``.
    """
    env = os.environ.get("SPOOLPROXY_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "spoolproxy"


def _root_stores() -> list[Path]:
    """PEM files holding the usual trusted roots: the system store, then certifi's."""
    found: list[Path] = []
    paths = ssl.get_default_verify_paths()
    for cand in (paths.cafile, paths.openssl_cafile, "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"):
        if cand and Path(cand).is_file():
            found.append(Path(cand).resolve())
            break
    try:
        import certifi

        found.append(Path(certifi.where()).resolve())
    except ImportError:  # pragma: no cover - certifi ships with httpx/requests
        pass
    out: list[Path] = []
    for p in found:
        if p not in out:
            out.append(p)
    return out


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    fd = os.open(directory / ".lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _ensure_private_dir(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    if d.stat().st_mode & 0o077:
        os.chmod(d, 0o700)


def ensure_ca() -> CAPaths:
    """Create the CA and the CA bundle when missing or stale; return their paths.

    Key files are forced to mode 0600 and the directories to 0700.  Raises SpoolError
    when the directory cannot be created or written (set ``SPOOLPROXY_HOME``).
    """
    home = ca_dir()
    confdir = home / "mitmproxy"
    try:
        _ensure_private_dir(home)
        _ensure_private_dir(confdir)
        with _locked(home):
            cert = confdir / f"{CA_BASENAME}-ca-cert.pem"
            if not (confdir / f"{CA_BASENAME}-ca.pem").exists():
                from mitmproxy.certs import CertStore

                CertStore.create_store(confdir, CA_BASENAME, 2048, organization="spoolproxy", cn="spoolproxy CA")
            for name in _PRIVATE_FILES:
                f = confdir / name
                if f.exists() and f.stat().st_mode & 0o077:
                    os.chmod(f, 0o600)
            if not cert.exists():
                raise SpoolError(f"the spoolproxy CA in {confdir} is damaged ({cert.name} is missing); {REGENERATE}")
            check_ca(confdir)
            bundle = home / BUNDLE_NAME
            _build_bundle(bundle, cert)
    except OSError as exc:
        raise SpoolError(
            f"cannot set up the spoolproxy CA in {home}: {exc.strerror}; set SPOOLPROXY_HOME to a writable directory"
        ) from None
    return CAPaths(cert=cert, bundle=bundle, confdir=confdir)


REGENERATE = ("run 'spoolproxy ca --regenerate' to move it aside and create a new one (then trust the new "
              "certificate wherever you added the old one by hand)")


def check_ca(confdir: Path) -> datetime:
    """Check the CA in mitmproxy's ``confdir``: ``mitmproxy-ca.pem`` holds a private key and
    a certificate that parse and belong together, ``mitmproxy-ca-cert.pem`` is that same
    certificate, and it has not expired.  Returns its expiry (UTC).  Raises SpoolError
    (one line, naming ``spoolproxy ca --regenerate``) otherwise."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    def damaged(what: str) -> SpoolError:
        return SpoolError(f"the spoolproxy CA in {confdir} is damaged ({what}); {REGENERATE}")

    pem = confdir / f"{CA_BASENAME}-ca.pem"
    try:
        data = pem.read_bytes()
        public = (confdir / f"{CA_BASENAME}-ca-cert.pem").read_bytes()
    except OSError as exc:
        raise damaged(f"cannot read it: {exc.strerror}") from None
    try:
        # the key/certificate pairing below is the consistency check (full RSA validation costs ~70 ms)
        key = serialization.load_pem_private_key(data, None, unsafe_skip_rsa_key_validation=True)
    except (ValueError, TypeError, Exception) as exc:  # noqa: BLE001 - any parse failure means damage
        raise damaged(f"{pem.name}: the private key does not parse: {str(exc).split('.')[0]}") from None
    try:
        cert = x509.load_pem_x509_certificate(data)
        shipped = x509.load_pem_x509_certificate(public)
    except ValueError as exc:
        raise damaged(f"the certificate does not parse: {str(exc).split('.')[0]}") from None
    if cert.public_key().public_numbers() != key.public_key().public_numbers():  # type: ignore[union-attr]
        raise damaged(f"{pem.name}: the private key does not belong to the certificate")
    if shipped != cert:
        raise damaged(f"{CA_BASENAME}-ca-cert.pem is not the certificate in {pem.name}")
    expires = cert.not_valid_after_utc
    if expires <= datetime.now(timezone.utc):
        raise SpoolError(f"the spoolproxy CA in {confdir} expired on {expires:%Y-%m-%d}; {REGENERATE}")
    return expires


def regenerate_ca() -> tuple[CAPaths, Path | None]:
    """Move the current CA (damaged or not) aside to ``mitmproxy.old-<UTC time>`` in the
    spoolproxy directory and create a new one.  Returns (new paths, where the old one went,
    None when there was none).  Raises SpoolError when the directory is not writable."""
    home = ca_dir()
    confdir = home / "mitmproxy"
    moved = None
    if confdir.exists():
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        moved = home / f"mitmproxy.old-{stamp}"
        try:
            confdir.rename(moved)
        except OSError as exc:
            raise SpoolError(f"cannot move the CA in {confdir} aside: {exc.strerror}; move or delete it by hand") from None
    return ensure_ca(), moved


def _build_bundle(bundle: Path, cert: Path) -> None:
    sources = [*_root_stores(), cert]
    if bundle.exists():
        mtime = bundle.stat().st_mtime
        if all(s.stat().st_mtime <= mtime for s in sources):
            return
    parts = []
    for s in sources:
        text = s.read_text(encoding="utf-8", errors="replace").strip()
        if text:
            parts.append(f"# from {s}\n{text}\n")
    from ..cassettes.storage import atomic_write

    atomic_write(bundle, "\n".join(parts), mode=0o644)
