"""``spoolproxy ca``: check the spoolproxy CA and print where its certificate and the CA bundle live.

Creates them on first use (see :mod:`spoolproxy.proxy.ca`) and checks an existing CA every
time: a damaged or expired one is a one-line error that says to run
``spoolproxy ca --regenerate``, which moves it aside and creates a new one.
``--cert``/``--bundle`` print just one path, for scripts:
``export SSL_CERT_FILE=$(spoolproxy ca --bundle)``.
"""

from __future__ import annotations

import click

from ..proxy.ca import ca_dir, check_ca, ensure_ca, regenerate_ca


@click.command(short_help="Check the spoolproxy CA; print its certificate and CA bundle paths.")
@click.option("--cert", "only", flag_value="cert", help="Print only the CA certificate path.")
@click.option("--bundle", "only", flag_value="bundle", help="Print only the CA bundle path.")
@click.option("--regenerate", is_flag=True,
              help="Move the current CA aside (damaged or not) and create a new one; clients you gave the old "
                   "certificate by hand must then trust the new one.")
def command(only: str | None, regenerate: bool) -> None:
    """Check the spoolproxy CA and print its certificate (trust it in clients with their own
    CA store) and the bundle of usual roots plus that CA (what recorded programs get in
    SSL_CERT_FILE).  A damaged CA is an error naming --regenerate."""
    if regenerate:
        paths, moved = regenerate_ca()
        if moved is not None:
            click.echo(f"spoolproxy ca: moved the old CA to {moved}; created a new one", err=True)
    else:
        paths = ensure_ca()
    if only == "cert":
        click.echo(str(paths.cert))
    elif only == "bundle":
        click.echo(str(paths.bundle))
    else:
        expires = check_ca(paths.confdir)
        click.echo(f"CA certificate: {paths.cert}")
        click.echo(f"CA bundle:      {paths.bundle}")
        click.echo(f"CA directory:   {ca_dir()} (the key stays here, mode 0600)")
        click.echo(f"CA check:       ok, valid until {expires:%Y-%m-%d}")
