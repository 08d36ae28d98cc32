"""The container's health check: `python -m gateway.healthcheck`.

It asks the gateway that the same S3GW_* variables describe for GET /health/ready: on its own
port, over HTTPS when they turn TLS on (trusting the certificate the gateway serves), else
HTTP. Exit status 0 when ready; 1 with one line saying why otherwise (`docker inspect` shows
it). A check with a fixed `http://` URL reports a TLS gateway unhealthy for ever.
"""

from __future__ import annotations

import argparse
import errno
import ssl
import sys
import urllib.error
import urllib.request

from . import tls
from .config import Settings, add_options, settings_from

# A wildcard address listens on every interface, loopback included: ask loopback.
_LOOPBACK = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}


def settings() -> Settings:
    """The gateway's settings as `s3gw serve` reads them from the environment alone."""
    parser = argparse.ArgumentParser(add_help=False)
    add_options(parser)
    return settings_from(parser.parse_args([]))


def ready_url(settings: Settings) -> str:
    scheme = "https" if settings.tls_self_signed or settings.tls_cert else "http"
    host = _LOOPBACK.get(settings.host, settings.host)
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{settings.port}/health/ready"


def client_context(settings: Settings) -> ssl.SSLContext | None:
    """Trust exactly the certificate the gateway serves, and nothing else."""
    if settings.tls_self_signed:
        cert = settings.data / tls.SELF_SIGNED_DIR / "localhost.crt"
    elif settings.tls_cert:
        cert = settings.tls_cert
    else:
        return None
    if not cert.is_file():  # ssl's own error does not name the file
        raise FileNotFoundError(errno.ENOENT, "no certificate", str(cert))
    context = ssl.create_default_context(cafile=cert)
    # An operator's certificate names the public host, not the loopback address asked here,
    # and may be a leaf under a CA this container does not hold: the chain is still checked
    # against the served certificate itself, so no other server passes.
    context.check_hostname = False
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return context


def main(timeout: float = 4.0) -> int:
    try:
        current = settings()
        url = ready_url(current)
        context = client_context(current)
    except (SystemExit, Exception) as exc:  # a bad setting, a missing certificate: one line
        print(f"unhealthy: {exc}", file=sys.stderr)
        return 1
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as reply:
            status = reply.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError as exc:  # refused, timed out, or a certificate that does not verify
        print(f"unhealthy: {url}: {exc}", file=sys.stderr)
        return 1
    if status != 200:
        print(f"unhealthy: {url} answered {status}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
