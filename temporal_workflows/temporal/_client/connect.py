"""Connecting clients and workers to a cluster: profiles, address, namespace, TLS, mTLS and API keys.

One frozen :class:`ConnectionConfig` is read the way the ``temporal`` CLI and
the SDKs read their settings (``temporalio.envconfig``): a TOML profile
(``~/.config/temporalio/temporal.toml``, or ``TEMPORAL_CONFIG_FILE``; profile
``TEMPORAL_PROFILE`` or ``default``), overridden by the ``TEMPORAL_*``
environment variables, overridden by command-line flags. The worker, the CLI
and applications share it, so a deployment configures a secured cluster
(e.g. Temporal Cloud: ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE`` and
``TEMPORAL_API_KEY``, or a client certificate, or a profile that says all of
it) once, for every process, and ``temporal`` and this project's commands
always talk to the same server.
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
from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS
from temporalio.service import TLSConfig

from temporal_workflows._errors import WorkflowError
from temporal_workflows.temporal._exit import end_cleanly

__all__ = ["ENVIRONMENT_VARIABLES", "ConnectionConfig", "ConnectionConfigError"]

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"

ENVIRONMENT_VARIABLES = (
    "TEMPORAL_CONFIG_FILE",
    "TEMPORAL_PROFILE",
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    "TEMPORAL_API_KEY",
    "TEMPORAL_TLS",
    "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "TEMPORAL_TLS_CLIENT_CERT_DATA",
    "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "TEMPORAL_TLS_CLIENT_KEY_DATA",
    "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
    "TEMPORAL_TLS_SERVER_CA_CERT_DATA",
    "TEMPORAL_TLS_SERVER_NAME",
    "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION",
    "TEMPORAL_GRPC_META_<NAME>",
)
"""Every variable read (as ``temporalio.envconfig`` and the ``temporal`` CLI read them)."""

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
# Flags (dest names) that override a loaded setting when given.
_FLAGS = (
    "address",
    "namespace",
    "tls",
    "tls_cert",
    "tls_key",
    "tls_ca",
    "tls_server_name",
    "api_key",
    "tls_cert_data",
    "tls_key_data",
    "tls_ca_data",
)


class ConnectionConfigError(WorkflowError, ValueError):
    """The connection settings contradict each other, or name a profile or file that cannot be read."""


def _parse_bool(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConnectionConfigError(f"{name}={text!r} is not a boolean (use true or false)")


def _source(value: Any) -> tuple[str | None, bytes | None]:
    """A profile's certificate source as (path, data): envconfig gives a Path for a path, str/bytes for data."""
    if value is None:
        return None, None
    if isinstance(value, Path):
        return str(value), None
    if isinstance(value, str):
        return None, value.encode()
    return None, bytes(value)


@dataclass(frozen=True)
class ConnectionConfig:
    """Where and how to connect to Temporal.

    Attributes:
        address: ``host:port`` of the frontend (Temporal Cloud:
            ``<namespace>.<account>.tmprl.cloud:7233``, or the regional
            endpoint for API keys).
        namespace: The namespace every run lives in.
        tls: ``True``/``False`` forces TLS on or off; ``None`` (default) turns
            it on when an API key or any TLS file, data or server name is given.
        tls_cert: Client certificate file (PEM) for mTLS; needs a key.
        tls_key: The client certificate's private key file (PEM).
        tls_ca: Root CA file (PEM) to verify the server with, instead of the
            system's roots (self-hosted clusters with a private CA).
        tls_server_name: The name the server's certificate is checked against
            (and TLS SNI), when it differs from the address's host.
        api_key: Sent as ``Authorization: Bearer <key>``; implies TLS, which
            Temporal Cloud requires. Never shown in ``repr``.
        tls_cert_data: The client certificate itself (PEM), instead of a file.
        tls_key_data: The client key itself (PEM), instead of a file. Never shown in ``repr``.
        tls_ca_data: The root CA itself (PEM), instead of a file.
        rpc_metadata: gRPC headers sent with every call (a profile's
            ``grpc_meta``, ``TEMPORAL_GRPC_META_<NAME>``, ``--grpc-meta``).
        profile: The profile the settings were read from, if a file had one
            (for messages; connecting does not read it again).
    """

    address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    tls: bool | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    tls_server_name: str | None = None
    api_key: str | None = field(default=None, repr=False)
    tls_cert_data: bytes | None = field(default=None, repr=False)
    tls_key_data: bytes | None = field(default=None, repr=False)
    tls_ca_data: bytes | None = field(default=None, repr=False)
    rpc_metadata: Mapping[str, str] = field(default_factory=dict, hash=False)
    profile: str | None = None

    def __post_init__(self) -> None:
        # An empty value (e.g. `--api-key ""` over an exported variable) means "not set".
        for name in ("tls_cert", "tls_key", "tls_ca", "tls_server_name", "api_key"):
            if getattr(self, name) == "":
                object.__setattr__(self, name, None)
        for name in ("tls_cert_data", "tls_key_data", "tls_ca_data"):
            value = getattr(self, name)
            if isinstance(value, str):  # text given where bytes are expected: PEM is ASCII
                object.__setattr__(self, name, value.encode() or None)
            elif value == b"":
                object.__setattr__(self, name, None)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        profile: str | None = None,
        config_file: str | os.PathLike[str] | None = None,
    ) -> ConnectionConfig:
        """The settings the ``temporal`` CLI would use: a TOML profile, overridden by ``TEMPORAL_*`` variables.

        Args:
            environ: The variables to read instead of ``os.environ`` (they
                also locate the file: ``TEMPORAL_CONFIG_FILE``, else
                ``~/.config/temporalio/temporal.toml``).
            profile: The profile to load; default ``TEMPORAL_PROFILE`` or ``default``.
                Naming a profile the file does not have is an error.
            config_file: A TOML file to read instead of ``TEMPORAL_CONFIG_FILE``'s
                or the default one; it must exist.

        Raises:
            ConnectionConfigError: The file cannot be parsed, the profile does
                not exist, or a variable has a value that is not valid
                (``TEMPORAL_TLS=maybe``), or asks for what the Python SDK
                cannot do (``TEMPORAL_TLS_DISABLE_HOST_VERIFICATION=true``).
        """
        env = dict(os.environ if environ is None else environ)
        # envconfig ignores a TEMPORAL_TLS it cannot read; a typo must not silently turn TLS off.
        tls_text = env.get("TEMPORAL_TLS", "").strip()
        tls_forced = _parse_bool("TEMPORAL_TLS", tls_text) if tls_text else None
        no_verify = env.get("TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", "").strip()
        if no_verify and _parse_bool("TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", no_verify):
            raise ConnectionConfigError(
                "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION=true: the Python SDK always verifies the server's "
                "certificate; set TEMPORAL_TLS_SERVER_NAME (--tls-server-name) to the name it was issued for"
            )
        source: Path | None = None
        if config_file is not None:
            source = Path(config_file)
            if not source.is_file():
                raise ConnectionConfigError(f"the Temporal config file {str(source)!r} does not exist")
        try:
            loaded = ClientConfigProfile.load(profile, config_source=source, override_env_vars=env)
        except Exception as e:  # the bridge's ConfigError: a TOML error, an unknown profile, ...
            where = str(source or env.get("TEMPORAL_CONFIG_FILE") or "~/.config/temporalio/temporal.toml")
            raise ConnectionConfigError(f"cannot read the Temporal config ({where}): {e}".strip()) from None
        config = cls._from_profile(loaded, profile or env.get("TEMPORAL_PROFILE") or None)
        # envconfig reads only true/false/1/0; yes/no/on/off are booleans here as they always were.
        return config if tls_forced is None else dataclasses.replace(config, tls=tls_forced)

    @classmethod
    def _from_profile(cls, loaded: ClientConfigProfile, profile: str | None) -> ConnectionConfig:
        values: dict[str, Any] = {"profile": profile}
        if loaded.address:
            values["address"] = loaded.address
        if loaded.namespace:
            values["namespace"] = loaded.namespace
        if loaded.api_key:
            values["api_key"] = loaded.api_key
        if loaded.grpc_meta:
            values["rpc_metadata"] = dict(loaded.grpc_meta)
        tls: ClientConfigTLS | None = loaded.tls
        if tls is not None:
            if tls.disabled is not None:
                values["tls"] = not tls.disabled
            values["tls_server_name"] = tls.server_name
            values["tls_cert"], values["tls_cert_data"] = _source(tls.client_cert)
            values["tls_key"], values["tls_key_data"] = _source(tls.client_private_key)
            values["tls_ca"], values["tls_ca_data"] = _source(tls.server_root_ca_cert)
        return cls(**values)

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """Add the connection flags, named as the ``temporal`` CLI names them.

        ``--address --namespace --profile --config-file --tls/--no-tls
        --tls-cert --tls-key --tls-ca --tls-server-name --api-key --grpc-meta``
        and ``--tls-cert-data --tls-key-data --tls-ca-data``; ``--tls-cert-path``,
        ``--tls-key-path`` and ``--tls-ca-path`` are accepted too. Every flag
        defaults to ``None``, so :meth:`from_args` can tell a flag given from
        one left to the profile and the environment.
        """
        group = parser.add_argument_group(
            "connection (flags override TEMPORAL_* variables, which override the TOML profile, as for `temporal`)"
        )
        group.add_argument("--address", default=None, help=f"host:port ($TEMPORAL_ADDRESS; default {DEFAULT_ADDRESS})")
        group.add_argument(
            "--namespace", "-n", default=None, help=f"namespace ($TEMPORAL_NAMESPACE; default {DEFAULT_NAMESPACE})"
        )
        group.add_argument(
            "--profile", default=None, help="profile of the TOML config file ($TEMPORAL_PROFILE; default 'default')"
        )
        group.add_argument(
            "--config-file",
            default=None,
            metavar="PATH",
            help="TOML config file ($TEMPORAL_CONFIG_FILE; default ~/.config/temporalio/temporal.toml)",
        )
        group.add_argument(
            "--tls",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="force TLS on or off ($TEMPORAL_TLS; default: on with an API key or TLS options)",
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
        group.add_argument("--tls-cert-data", default=None, metavar="PEM", help="($TEMPORAL_TLS_CLIENT_CERT_DATA)")
        group.add_argument("--tls-key-data", default=None, metavar="PEM", help="($TEMPORAL_TLS_CLIENT_KEY_DATA)")
        group.add_argument("--tls-ca-data", default=None, metavar="PEM", help="($TEMPORAL_TLS_SERVER_CA_CERT_DATA)")
        group.add_argument(
            "--tls-server-name", default=None, metavar="NAME", help="server name to verify ($TEMPORAL_TLS_SERVER_NAME)"
        )
        group.add_argument(
            "--api-key",
            default=None,
            help="API key; implies TLS ($TEMPORAL_API_KEY; prefer the variable: flags show in `ps`)",
        )
        group.add_argument(
            "--grpc-meta",
            action="append",
            default=None,
            metavar="KEY=VALUE",
            help="gRPC header for every call, repeatable ($TEMPORAL_GRPC_META_<KEY>)",
        )

    @classmethod
    def from_args(cls, args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ConnectionConfig:
        """The profile's and the environment's settings with every flag :meth:`add_arguments` added applied."""
        loaded = cls.from_env(
            environ, profile=getattr(args, "profile", None), config_file=getattr(args, "config_file", None)
        )
        flags: dict[str, Any] = {name: getattr(args, name, None) for name in _FLAGS}
        changes = {k: v for k, v in flags.items() if v is not None}
        meta = getattr(args, "grpc_meta", None)
        if meta:
            headers = dict(loaded.rpc_metadata)
            for item in meta:
                key, sep, value = item.partition("=")
                if not sep or not key.strip():
                    raise ConnectionConfigError(f"--grpc-meta {item!r}: expected KEY=VALUE")
                headers[key.strip().lower()] = value
            changes["rpc_metadata"] = headers
        # A path flag replaces inline data from the profile for the same item, and the other way round.
        for item in ("tls_cert", "tls_key", "tls_ca"):
            if item in changes:
                changes.setdefault(f"{item}_data", None)
            elif f"{item}_data" in changes:
                changes[item] = None
        return dataclasses.replace(loaded, **changes)

    def tls_config(self) -> TLSConfig | bool:
        """The ``tls`` argument of ``Client.connect``: ``False``, ``True`` (system roots) or a :class:`TLSConfig`.

        Raises:
            ConnectionConfigError: Only one of certificate and key is given,
                TLS is forced off while TLS options are set, or a file cannot
                be read.
        """
        has_cert = self.tls_cert is not None or self.tls_cert_data is not None
        has_key = self.tls_key is not None or self.tls_key_data is not None
        if has_cert != has_key:
            one, other = ("--tls-cert", "--tls-key") if has_cert else ("--tls-key", "--tls-cert")
            raise ConnectionConfigError(
                f"mTLS needs a client certificate and its key: {one} is set but {other} is not "
                "(TEMPORAL_TLS_CLIENT_CERT_PATH / TEMPORAL_TLS_CLIENT_KEY_PATH, or the profile's tls section)"
            )
        options = {
            "--tls-cert": self.tls_cert or self.tls_cert_data,
            "--tls-key": self.tls_key or self.tls_key_data,
            "--tls-ca": self.tls_ca or self.tls_ca_data,
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
            server_root_ca_cert=self.tls_ca_data or _read(self.tls_ca, "server CA certificate (--tls-ca)"),
            domain=self.tls_server_name,
            client_cert=self.tls_cert_data or _read(self.tls_cert, "client certificate (--tls-cert)"),
            client_private_key=self.tls_key_data or _read(self.tls_key, "client key (--tls-key)"),
        )

    async def connect(self, *, plugins: Sequence[Plugin] = (), **kwargs: Any) -> Client:
        """``Client.connect`` with these settings; ``kwargs`` go to it as they are.

        Configuration errors are raised before any network traffic.
        """
        if self.rpc_metadata and "rpc_metadata" not in kwargs:
            kwargs["rpc_metadata"] = dict(self.rpc_metadata)
        end_cleanly()  # no abort at the process's exit (temporal/_exit.py)
        return await Client.connect(
            self.address,
            namespace=self.namespace,
            api_key=self.api_key,
            tls=self.tls_config(),
            plugins=list(plugins),
            **kwargs,
        )

    def describe(self) -> str:
        """Where this connects, for messages: ``address (namespace 'ns', profile 'p')``."""
        extra = [f"namespace {self.namespace!r}"] if self.namespace != DEFAULT_NAMESPACE else []
        if self.profile:
            extra.append(f"profile {self.profile!r}")
        return self.address + (f" ({', '.join(extra)})" if extra else "")


def _read(path: str | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise ConnectionConfigError(f"the {what} file {path!r} does not exist") from None
    except OSError as e:
        raise ConnectionConfigError(f"cannot read the {what} file {path!r}: {e}") from None
