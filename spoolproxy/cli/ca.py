"""``spoolproxy ca``: print where the spoolproxy CA certificate and the CA bundle live.

Creates them on first use (see :mod:`spoolproxy.proxy.ca`).  ``--cert``/``--bundle`` print
just one path, for scripts: ``export SSL_CERT_FILE=$(spoolproxy ca --bundle)``.
"""

from __future__ import annotations

import click

from ..proxy.ca import ca_dir, ensure_ca


@click.command(short_help="Print the spoolproxy CA certificate and CA bundle paths.")
@click.option("--cert", "only", flag_value="cert", help="Print only the CA certificate path.")
@click.option("--bundle", "only", flag_value="bundle", help="Print only the CA bundle path.")
def command(only: str | None) -> None:
    """Print the spoolproxy CA certificate (trust it in clients with their own CA store)
    and the bundle of usual roots plus that CA (what recorded programs get in SSL_CERT_FILE)."""
    paths = ensure_ca()
    if only == "cert":
        click.echo(str(paths.cert))
    elif only == "bundle":
        click.echo(str(paths.bundle))
    else:
        click.echo(f"CA certificate: {paths.cert}")
        click.echo(f"CA bundle:      {paths.bundle}")
        click.echo(f"CA directory:   {ca_dir()} (the key stays here, mode 0600)")
