"""A real OTLP/HTTP receiver on loopback, standing in for a collector: it decodes what exporters send.

Traces (``/v1/traces``) and metrics (``/v1/metrics``) arrive as protobuf
export requests (``opentelemetry-proto``) and are kept as plain records with
their resource, so a test asserts what an operator's backend would get, not
what an in-memory exporter holds. Metric points are cumulative per exporting
process (the OTLP exporters' default), so a counter's total is the sum over
processes of each one's latest value, as a backend computes it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def _attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


@dataclass(frozen=True)
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    start: int
    end: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status_code: int
    scope: str
    links: tuple[str, ...] = ()

    @property
    def instance(self) -> str:
        return str(self.resource.get("service.instance.id", ""))


@dataclass(frozen=True)
class Point:
    """One metric data point: a counter's or up-down counter's cumulative value, or a histogram's count and sum."""

    metric: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    time: int
    value: float
    count: int = 0

    @property
    def instance(self) -> str:
        return str(self.resource.get("service.instance.id", ""))


@dataclass
class Received:
    spans: list[Span] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    # -- spans ------------------------------------------------------------------------------

    def span_list(self, where: Callable[[Span], bool] = lambda s: True) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if where(s)]

    def named(self, name: str, **attributes: Any) -> list[Span]:
        return self.span_list(lambda s: s.name == name and all(s.attributes.get(k) == v for k, v in attributes.items()))

    # -- metrics ----------------------------------------------------------------------------

    def total(self, metric: str, **attributes: Any) -> float:
        """A sum or counter's total over every process: each process's latest cumulative value, summed."""
        return sum(p.value for p in self._latest(metric, attributes))

    def histogram_count(self, metric: str, **attributes: Any) -> int:
        return sum(p.count for p in self._latest(metric, attributes))

    def by_instance(self, metric: str, **attributes: Any) -> dict[str, float]:
        out: dict[str, float] = {}
        for p in self._latest(metric, attributes):
            out[p.instance] = out.get(p.instance, 0) + p.value
        return out

    def _latest(self, metric: str, attributes: dict[str, Any]) -> list[Point]:
        latest: dict[tuple[str, tuple[tuple[str, Any], ...]], Point] = {}
        with self.lock:
            for p in self.points:
                if p.metric != metric or any(p.attributes.get(k) != v for k, v in attributes.items()):
                    continue
                key = (p.instance, tuple(sorted((k, repr(v)) for k, v in p.attributes.items())))
                if key not in latest or latest[key].time <= p.time:
                    latest[key] = p
        return list(latest.values())

    async def until(self, what: str, probe: Callable[[], bool], timeout: float = 60) -> None:
        """Wait (polling) until ``probe()`` holds; fail naming ``what`` after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not probe():
            if loop.time() > deadline:
                raise AssertionError(f"the receiver never got {what}")
            await asyncio.sleep(0.1)


class _Handler(BaseHTTPRequestHandler):
    received: Received

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/v1/traces":
            self._traces(body)
        elif self.path == "/v1/metrics":
            self._metrics(body)
        with self.received.lock:
            self.received.requests.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def _traces(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        spans: list[Span] = []
        for rs in request.resource_spans:
            resource = _attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    spans.append(
                        Span(
                            name=s.name,
                            trace_id=s.trace_id.hex(),
                            span_id=s.span_id.hex(),
                            parent_id=s.parent_span_id.hex(),
                            kind=s.kind,
                            start=s.start_time_unix_nano,
                            end=s.end_time_unix_nano,
                            attributes=_attributes(s.attributes),
                            resource=resource,
                            status_code=s.status.code,
                            scope=ss.scope.name,
                            links=tuple(link.span_id.hex() for link in s.links),
                        )
                    )
        with self.received.lock:
            self.received.spans.extend(spans)

    def _metrics(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest.FromString(body)
        points: list[Point] = []
        for rm in request.resource_metrics:
            resource = _attributes(rm.resource.attributes)
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    kind = m.WhichOneof("data")
                    data = getattr(m, kind)
                    for dp in data.data_points:
                        attributes = _attributes(dp.attributes)
                        if kind in ("sum", "gauge"):
                            value = dp.as_int if dp.WhichOneof("value") == "as_int" else dp.as_double
                            points.append(Point(m.name, attributes, resource, dp.time_unix_nano, float(value)))
                        elif kind == "histogram":
                            points.append(
                                Point(m.name, attributes, resource, dp.time_unix_nano, dp.sum, count=dp.count)
                            )
        with self.received.lock:
            self.received.points.extend(points)

    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclass
class Receiver:
    endpoint: str
    received: Received

    def env(self, service: str, *, interval_ms: int = 500) -> dict[str, str]:
        """The standard variables that point a process's telemetry here (nothing project-specific)."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_SERVICE_NAME": service,
            "OTEL_METRIC_EXPORT_INTERVAL": str(interval_ms),
        }


def serve() -> Iterator[Receiver]:
    """A receiver on a free loopback port, for a pytest fixture (``yield from serve()``)."""
    received = Received()
    handler = type("Handler", (_Handler,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Receiver(f"http://127.0.0.1:{server.server_address[1]}", received)
    finally:
        server.shutdown()
        server.server_close()
