"""Connection settings: environment, flags over environment, and the TLS configuration they make."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from temporal_workflows.temporal import ConnectionConfig, ConnectionConfigError

FULL_ENV = {
    "TEMPORAL_ADDRESS": "ns.acct.tmprl.cloud:7233",
    "TEMPORAL_NAMESPACE": "ns.acct",
    "TEMPORAL_TLS": "true",
    "TEMPORAL_TLS_CLIENT_CERT_PATH": "/env/client.pem",
    "TEMPORAL_TLS_CLIENT_KEY_PATH": "/env/client.key",
    "TEMPORAL_TLS_SERVER_CA_CERT_PATH": "/env/ca.pem",
    "TEMPORAL_TLS_SERVER_NAME": "env.example",
    "TEMPORAL_API_KEY": "env-api-key",
}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    ConnectionConfig.add_arguments(parser)
    return parser.parse_args(argv)


@pytest.fixture
def pem_files(tmp_path: Path) -> dict[str, Path]:
    files = {name: tmp_path / f"{name}.pem" for name in ("cert", "key", "ca")}
    for name, path in files.items():
        path.write_bytes(f"-----BEGIN {name.upper()}-----\n{name}-bytes\n".encode())
    return files


def test_defaults_without_environment() -> None:
    config = ConnectionConfig.from_env({})
    assert config == ConnectionConfig(address="localhost:7233", namespace="default")
    assert config.tls_config() is False


def test_every_setting_from_the_environment() -> None:
    config = ConnectionConfig.from_env(FULL_ENV)
    assert config == ConnectionConfig(
        address="ns.acct.tmprl.cloud:7233",
        namespace="ns.acct",
        tls=True,
        tls_cert="/env/client.pem",
        tls_key="/env/client.key",
        tls_ca="/env/ca.pem",
        tls_server_name="env.example",
        api_key="env-api-key",
    )


def test_flags_override_the_environment_and_unset_flags_keep_it() -> None:
    args = parse(["--address", "flag:7233", "--api-key", "flag-key", "--no-tls", "--tls-server-name", ""])
    config = ConnectionConfig.from_args(args, environ=FULL_ENV)
    assert config.address == "flag:7233" and config.api_key == "flag-key" and config.tls is False
    assert config.tls_server_name is None  # an empty flag clears the variable
    assert config.namespace == "ns.acct" and config.tls_cert == "/env/client.pem"  # from the environment
    assert ConnectionConfig.from_args(parse([]), environ={}) == ConnectionConfig()


def test_the_api_key_is_not_in_repr() -> None:
    assert "secret-key" not in repr(ConnectionConfig(api_key="secret-key"))


@pytest.mark.parametrize(
    ("text", "value"), [("true", True), ("1", True), ("YES", True), ("false", False), ("0", False)]
)
def test_tls_variable_is_a_boolean(text: str, value: bool) -> None:
    assert ConnectionConfig.from_env({"TEMPORAL_TLS": text}).tls is value


def test_a_tls_variable_that_is_not_a_boolean_is_refused() -> None:
    with pytest.raises(ConnectionConfigError, match="TEMPORAL_TLS='maybe'"):
        ConnectionConfig.from_env({"TEMPORAL_TLS": "maybe"})


def test_an_api_key_implies_tls_with_system_roots() -> None:
    assert ConnectionConfig(api_key="k").tls_config() is True
    assert ConnectionConfig(tls=True).tls_config() is True
    assert ConnectionConfig(api_key="k", tls=False).tls_config() is False  # e.g. a local proxy that terminates TLS


def test_mtls_reads_certificate_key_and_ca(pem_files: dict[str, Path]) -> None:
    config = ConnectionConfig(
        tls_cert=str(pem_files["cert"]),
        tls_key=str(pem_files["key"]),
        tls_ca=str(pem_files["ca"]),
        tls_server_name="temporal.internal",
    )
    tls = config.tls_config()
    assert isinstance(tls, TLSConfig)
    assert tls.client_cert == pem_files["cert"].read_bytes()
    assert tls.client_private_key == pem_files["key"].read_bytes()
    assert tls.server_root_ca_cert == pem_files["ca"].read_bytes()
    assert tls.domain == "temporal.internal"


def test_a_private_ca_alone_turns_tls_on(pem_files: dict[str, Path]) -> None:
    tls = ConnectionConfig(tls_ca=str(pem_files["ca"])).tls_config()
    assert isinstance(tls, TLSConfig) and tls.client_cert is None and tls.server_root_ca_cert is not None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"tls_cert": "c.pem"}, "--tls-cert is set but --tls-key is not"),
        ({"tls_key": "k.pem"}, "--tls-key is set but --tls-cert is not"),
        ({"tls": False, "tls_ca": "ca.pem"}, r"TLS is turned off .* but --tls-ca is set"),
    ],
)
def test_contradictory_settings_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConnectionConfigError, match=match):
        ConnectionConfig(**kwargs).tls_config()  # type: ignore[arg-type]


def test_a_missing_file_is_named(tmp_path: Path, pem_files: dict[str, Path]) -> None:
    missing = tmp_path / "nope.key"
    with pytest.raises(ConnectionConfigError, match=r"client key \(--tls-key\) file .*nope.key.* does not exist"):
        ConnectionConfig(tls_cert=str(pem_files["cert"]), tls_key=str(missing)).tls_config()


async def test_connect_fails_on_configuration_before_any_network_traffic() -> None:
    with pytest.raises(ConnectionConfigError):
        await ConnectionConfig(address="unreachable.invalid:7233", tls_cert="only-cert.pem").connect()


# -- the settings the `temporal` CLI reads: TOML profiles, every TEMPORAL_* variable ----------------

PROFILES = """
[profile.default]
address = "default.example:7233"
namespace = "from-default"

[profile.prod]
address = "prod.example:7233"
namespace = "prod-ns"
api_key = "profile-key"

[profile.prod.tls]
server_name = "prod.internal"

[profile.prod.grpc_meta]
x-team = "graphs"

[profile.mtls.tls]
client_cert_path = "/profile/client.pem"
client_key_data = "-----BEGIN KEY-----profile"
"""


@pytest.fixture(autouse=True)
def no_home_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A tester's own ~/.config/temporalio/temporal.toml must not change what these tests read."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "temporal.toml"
    path.write_text(PROFILES)
    return path


def test_the_default_profile_of_the_config_file_is_read(config_file: Path) -> None:
    config = ConnectionConfig.from_env({"TEMPORAL_CONFIG_FILE": str(config_file)})
    assert (config.address, config.namespace) == ("default.example:7233", "from-default")


def test_a_profile_is_chosen_by_variable_flag_or_argument(config_file: Path) -> None:
    env = {"TEMPORAL_CONFIG_FILE": str(config_file), "TEMPORAL_PROFILE": "prod"}
    config = ConnectionConfig.from_env(env)
    assert (config.address, config.namespace, config.api_key, config.profile) == (
        "prod.example:7233",
        "prod-ns",
        "profile-key",
        "prod",
    )
    assert config.tls_server_name == "prod.internal" and config.rpc_metadata == {"x-team": "graphs"}
    assert isinstance(config.tls_config(), TLSConfig)  # an API key and a server name: TLS on
    flagged = ConnectionConfig.from_args(parse(["--config-file", str(config_file), "--profile", "prod"]), environ={})
    assert flagged.address == "prod.example:7233"
    assert ConnectionConfig.from_env({}, profile="prod", config_file=config_file).namespace == "prod-ns"


def test_variables_override_the_profile_and_flags_override_both(config_file: Path) -> None:
    env = {"TEMPORAL_CONFIG_FILE": str(config_file), "TEMPORAL_PROFILE": "prod", "TEMPORAL_NAMESPACE": "env-ns"}
    config = ConnectionConfig.from_args(parse(["--address", "flag:1", "--grpc-meta", "x-run=cli"]), environ=env)
    assert (config.address, config.namespace, config.api_key) == ("flag:1", "env-ns", "profile-key")
    assert config.rpc_metadata == {"x-team": "graphs", "x-run": "cli"}


def test_certificates_as_data_from_the_environment_or_the_profile(config_file: Path) -> None:
    env = {
        "TEMPORAL_TLS_CLIENT_CERT_DATA": "-----BEGIN CERT-----env",
        "TEMPORAL_TLS_CLIENT_KEY_DATA": "-----BEGIN KEY-----env",
        "TEMPORAL_TLS_SERVER_CA_CERT_DATA": "-----BEGIN CA-----env",
        "TEMPORAL_GRPC_META_X_TENANT": "t1",
    }
    config = ConnectionConfig.from_env(env)
    tls = config.tls_config()
    assert isinstance(tls, TLSConfig)
    assert (tls.client_cert, tls.client_private_key, tls.server_root_ca_cert) == (
        b"-----BEGIN CERT-----env",
        b"-----BEGIN KEY-----env",
        b"-----BEGIN CA-----env",
    )
    assert config.rpc_metadata == {"x-tenant": "t1"}
    assert "BEGIN KEY" not in repr(config)  # a private key is never shown
    mtls = ConnectionConfig.from_env({"TEMPORAL_CONFIG_FILE": str(config_file), "TEMPORAL_PROFILE": "mtls"})
    assert mtls.tls_cert == "/profile/client.pem" and mtls.tls_key_data == b"-----BEGIN KEY-----profile"
    # A path flag replaces the profile's data for the same item.
    flagged = ConnectionConfig.from_args(
        parse(["--profile", "mtls", "--tls-key", "/flag/key.pem"]), environ={"TEMPORAL_CONFIG_FILE": str(config_file)}
    )
    assert flagged.tls_key == "/flag/key.pem" and flagged.tls_key_data is None


@pytest.mark.parametrize(
    ("env", "kwargs", "match"),
    [
        ({"TEMPORAL_PROFILE": "nope"}, {}, "Profile 'nope' not found"),
        ({}, {"config_file": "/no/such/temporal.toml"}, "does not exist"),
        ({"TEMPORAL_TLS_DISABLE_HOST_VERIFICATION": "true"}, {}, "always verifies"),
    ],
    ids=["unknown-profile", "missing-file", "no-host-verification"],
)
def test_settings_that_cannot_be_followed_are_refused(
    config_file: Path, env: dict[str, str], kwargs: dict[str, str], match: str
) -> None:
    with pytest.raises(ConnectionConfigError, match=match):
        ConnectionConfig.from_env({"TEMPORAL_CONFIG_FILE": str(config_file), **env}, **kwargs)  # type: ignore[arg-type]


def test_a_config_file_that_is_not_toml_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[profile.default\naddress = 1")
    with pytest.raises(ConnectionConfigError, match=r"cannot read the Temporal config \(.*bad.toml\): .*TOML"):
        ConnectionConfig.from_env({"TEMPORAL_CONFIG_FILE": str(bad)})


def test_a_grpc_meta_flag_must_be_key_value() -> None:
    with pytest.raises(ConnectionConfigError, match="expected KEY=VALUE"):
        ConnectionConfig.from_args(parse(["--grpc-meta", "novalue"]), environ={})
