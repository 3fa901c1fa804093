"""Which exporter the OTEL_* environment selects (no provider is installed here)."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from temporal_workflows.errors import WorkflowError
from temporal_workflows.temporal._telemetry.config import _exporter_from_env

OTEL_VARS = [
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in OTEL_VARS:
        monkeypatch.delenv(var, raising=False)


def test_nothing_configured_exports_nowhere() -> None:
    assert _exporter_from_env() == ("none", None)


def test_an_otlp_endpoint_selects_otlp_over_http(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    name, exporter = _exporter_from_env()
    assert name == "otlp" and isinstance(exporter, OTLPSpanExporter)


def test_console_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    name, exporter = _exporter_from_env()
    assert name == "console" and isinstance(exporter, ConsoleSpanExporter)


def test_sdk_disabled_wins_over_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert _exporter_from_env() == ("none", None)


def test_unknown_exporter_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(WorkflowError, match="OTEL_TRACES_EXPORTER='zipkin'"):
        _exporter_from_env()
