"""Connecting clients and workers to a cluster: address, namespace, TLS, mTLS and API keys.

One frozen :class:`ConnectionConfig` is read from the environment variables the
``temporal`` CLI and the SDKs' environment configuration use, overridden by
command-line flags, and turned into ``Client.connect`` arguments. The worker,
the CLI and applications share it, so a deployment configures a secured
cluster (e.g. Temporal Cloud: ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE`` and
``TEMPORAL_API_KEY``, or a client certificate) once, for every process.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client, Plugin
from temporalio.service import TLSConfig

from temporal_workflows._errors import WorkflowError

__all__ = ["ConnectionConfig", "ConnectionConfigError"]

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"

# Field -> environment variable, as `temporal` and temporalio.envconfig name them.
_ENV = {
    "address": "TEMPORAL_ADDRESS",
    "namespace": "TEMPORAL_NAMESPACE",
    "tls": "TEMPORAL_TLS",
    "tls_cert": "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "tls_key": "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "tls_ca": "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
    "tls_server_name": "TEMPORAL_TLS_SERVER_NAME",
    "api_key": "TEMPORAL_API_KEY",
}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class ConnectionConfigError(WorkflowError, ValueError):
    """The connection settings contradict each other or name a file that cannot be read."""


def _parse_bool(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConnectionConfigError(f"{name}={text!r} is not a boolean (use true or false)")


@dataclass(frozen=True)
class ConnectionConfig:
    """Where and how to connect to Temporal.

    Attributes:
        address: ``host:port`` of the frontend (Temporal Cloud:
            ``<namespace>.<account>.tmprl.cloud:7233``, or the regional
            endpoint for API keys).
        namespace: The namespace every run lives in.
        tls: ``True``/``False`` forces TLS on or off; ``None`` (default) turns
            it on when an API key or any TLS file or server name is given.
        tls_cert: Client certificate (PEM) for mTLS; needs ``tls_key``.
        tls_key: The client certificate's private key (PEM).
        tls_ca: Root CA (PEM) to verify the server with, instead of the
            system's roots (self-hosted clusters with a private CA).
        tls_server_name: The name the server's certificate is checked against
            (and TLS SNI), when it differs from the address's host.
        api_key: Sent as ``Authorization: Bearer <key>``; implies TLS, which
            Temporal Cloud requires. Never shown in ``repr``.
    """

    address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    tls: bool | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    tls_server_name: str | None = None
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # An empty value (e.g. `--api-key ""` over an exported variable) means "not set".
        for name in ("tls_cert", "tls_key", "tls_ca", "tls_server_name", "api_key"):
            if getattr(self, name) == "":
                object.__setattr__(self, name, None)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ConnectionConfig:
        """Settings from ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_TLS``,
        ``TEMPORAL_TLS_CLIENT_CERT_PATH``, ``TEMPORAL_TLS_CLIENT_KEY_PATH``,
        ``TEMPORAL_TLS_SERVER_CA_CERT_PATH``, ``TEMPORAL_TLS_SERVER_NAME`` and
        ``TEMPORAL_API_KEY``; unset or empty variables keep the defaults.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name, var in _ENV.items():
            text = env.get(var, "").strip()
            if text:
                values[name] = _parse_bool(var, text) if name == "tls" else text
        return cls(**values)

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """Add ``--address --namespace --tls/--no-tls --tls-cert --tls-key --tls-ca --tls-server-name --api-key``.

        ``--tls-cert-path``, ``--tls-key-path`` and ``--tls-ca-path`` (the
        ``temporal`` CLI's names) are accepted too. Every flag defaults to
        ``None``, so :meth:`from_args` can tell a flag given from one left to
        the environment.
        """
        group = parser.add_argument_group("connection (flags override the TEMPORAL_* environment variables)")
        group.add_argument("--address", default=None, help=f"host:port ($TEMPORAL_ADDRESS; default {DEFAULT_ADDRESS})")
        group.add_argument(
            "--namespace", default=None, help=f"namespace ($TEMPORAL_NAMESPACE; default {DEFAULT_NAMESPACE})"
        )
        group.add_argument(
            "--tls",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="force TLS on or off ($TEMPORAL_TLS; default: on with an API key or TLS files)",
        )
        group.add_argument(
            "--tls-cert",
            "--tls-cert-path",
            dest="tls_cert",
            default=None,
            metavar="PATH",
            help="mTLS client certificate ($TEMPORAL_TLS_CLIENT_CERT_PATH)",
        )
        group.add_argument(
            "--tls-key",
            "--tls-key-path",
            dest="tls_key",
            default=None,
            metavar="PATH",
            help="mTLS client key ($TEMPORAL_TLS_CLIENT_KEY_PATH)",
        )
        group.add_argument(
            "--tls-ca",
            "--tls-ca-path",
            dest="tls_ca",
            default=None,
            metavar="PATH",
            help="server root CA ($TEMPORAL_TLS_SERVER_CA_CERT_PATH)",
        )
        group.add_argument(
            "--tls-server-name", default=None, metavar="NAME", help="server name to verify ($TEMPORAL_TLS_SERVER_NAME)"
        )
        group.add_argument(
            "--api-key",
            default=None,
            help="API key; implies TLS ($TEMPORAL_API_KEY; prefer the variable: flags show in `ps`)",
        )

    @classmethod
    def from_args(cls, args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ConnectionConfig:
        """The environment's settings with every flag :meth:`add_arguments` added and the user gave applied."""
        flags = {name: getattr(args, name, None) for name in _ENV}
        return dataclasses.replace(cls.from_env(environ), **{k: v for k, v in flags.items() if v is not None})

    def tls_config(self) -> TLSConfig | bool:
        """The ``tls`` argument of ``Client.connect``: ``False``, ``True`` (system roots) or a :class:`TLSConfig`.

        Raises:
            ConnectionConfigError: Only one of certificate and key is given,
                TLS is forced off while TLS options are set, or a file cannot
                be read.
        """
        if (self.tls_cert is None) != (self.tls_key is None):
            one, other = ("--tls-cert", "--tls-key") if self.tls_cert else ("--tls-key", "--tls-cert")
            raise ConnectionConfigError(
                f"mTLS needs a client certificate and its key: {one} is set but {other} is not "
                "(TEMPORAL_TLS_CLIENT_CERT_PATH / TEMPORAL_TLS_CLIENT_KEY_PATH)"
            )
        options = {
            "--tls-cert": self.tls_cert,
            "--tls-key": self.tls_key,
            "--tls-ca": self.tls_ca,
            "--tls-server-name": self.tls_server_name,
        }
        given = [flag for flag, value in options.items() if value]
        enabled = self.tls if self.tls is not None else bool(self.api_key or given)
        if not enabled:
            if given:
                raise ConnectionConfigError(
                    f"TLS is turned off (--no-tls / TEMPORAL_TLS=false) but {', '.join(given)} is set"
                )
            return False
        if not given:
            return True
        return TLSConfig(
            server_root_ca_cert=_read(self.tls_ca, "server CA certificate (--tls-ca)"),
            domain=self.tls_server_name,
            client_cert=_read(self.tls_cert, "client certificate (--tls-cert)"),
            client_private_key=_read(self.tls_key, "client key (--tls-key)"),
        )

    async def connect(self, *, plugins: Sequence[Plugin] = (), **kwargs: Any) -> Client:
        """``Client.connect`` with these settings; ``kwargs`` go to it as they are.

        Configuration errors are raised before any network traffic.
        """
        return await Client.connect(
            self.address,
            namespace=self.namespace,
            api_key=self.api_key,
            tls=self.tls_config(),
            plugins=list(plugins),
            **kwargs,
        )


def _read(path: str | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise ConnectionConfigError(f"the {what} file {path!r} does not exist") from None
    except OSError as e:
        raise ConnectionConfigError(f"cannot read the {what} file {path!r}: {e}") from None
