"""The benchmark harness still runs end to end (``python -m bench --quick --json``).

Only the shape of its report is checked, never a timing: timings on a shared
machine are noise, and the targets are judged in the benchmark's own output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.run import REQUIRED_KEYS, TARGETS

ROOT = Path(__file__).resolve().parents[1]


def _quick_report() -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    last = [line for line in proc.stdout.splitlines() if line.startswith("{")][-1]
    report: dict[str, Any] = json.loads(last)
    return report


def test_quick_benchmark_reports_every_key() -> None:
    report = _quick_report()
    for key, typ in REQUIRED_KEYS.items():
        assert key in report, f"missing {key}"
        assert isinstance(report[key], typ), f"{key} = {report[key]!r} is not a {typ.__name__}"
    assert report["fanout_1000_ok"] is True
    # Load: every one of the runs started at once completed with the right result, on both sides.
    assert report["concurrent_200_ok"] is True
    assert report["concurrent_200_baseline_ok"] is True
    load = report["details"]["concurrent_200"]
    assert load["runs"] == report["config"]["load_runs"] > 0
    for prefix in ("concurrent_200", "concurrent_200_baseline"):
        p50, p99, slowest = (report[f"{prefix}_{p}_ms"] for p in ("p50", "p99", "max"))
        assert 0 < p50 <= p99 <= slowest
    # kill -9 of the only worker with runs mid-step (scaled down in --quick): every run completed on a new
    # worker, ours noticed by the heartbeat timeout, hand-written by its start-to-close timeout.
    assert report["kill9_ok"] is True
    assert report["kill9_recovery_seconds"] > 0 and report["kill9_recovery_baseline_seconds"] > 0
    kill9 = report["details"]["kill9"]
    assert kill9["runs"] == report["config"]["kill9_runs"] > 0 and kill9["scaled_down"] is True
    assert kill9["noticed_by"] == {"ours": ["HEARTBEAT"], "base": ["START_TO_CLOSE"]}
    # --quick checks that everything runs; it judges no timing.
    assert {t.key for t in TARGETS} <= set(report["targets"])
    assert all(t["met"] is None for t in report["targets"].values())
    assert report["config"]["quick"] is True
    # The report says which side ran in the sandbox: ours opts out, hand-written keeps the default.
    assert report["config"]["sandboxed"] == {"ours": False, "base": True}
    if not report["fanout_5000_ok"]:
        assert report["fanout_5000_error"]


def test_quick_fleet_benchmark_reports_every_key_and_loses_nothing() -> None:
    """``python -m bench --only fleet --quick --json``: every stage runs on real worker processes (scaled down);
    what must hold whatever the timing holds: no run lost, failed, stuck or wrong under kill -9, no step's
    effect committed twice, no duplicate in a live reader's committed view, none failed by a rolling restart
    or a versioned rollout."""
    from bench.fleet import REQUIRED_KEYS as FLEET_KEYS

    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--only", "fleet", "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report: dict[str, Any] = json.loads(proc.stdout)  # one JSON object, nothing else on stdout
    for key, typ in FLEET_KEYS.items():
        assert isinstance(report[key], typ), f"{key} = {report.get(key)!r} is not a {typ.__name__}"
    assert report["chaos_runs"] > 0 and report["details"]["chaos"]["kills"] > 0
    for key in ("chaos_lost", "chaos_failed", "chaos_stuck", "chaos_wrong", "chaos_duplicate_commits"):
        assert report[key] == 0, (key, report["details"]["chaos"]["problems"])
    assert report["chaos_reader_duplicates"] == 0 and report["details"]["chaos"]["readers"] > 0
    assert report["rolling_failures"] == 0 and report["details"]["rolling"]["exit_codes"] == [0, 0]
    assert report["versioned_rollout_failures"] == 0, report["details"]["versioned"]["problems"]
    # The spread stage's steps say which worker ran them: each of the two workers ran some.
    assert report["spread_min_share"] > 0
    assert report["config"]["quick"] is True and all(t["met"] is None for t in report["targets"].values())


def test_the_llama_runtime_bench_reports_its_ratios_and_counts_invocations() -> None:
    """``python -m bench --only llama-runtime --quick --json``: one JSON object on stdout with the ratios beside
    hand-written Temporal code and llama-agents-dbos, and the step invocations counted by the steps themselves
    (none ran twice); --quick judges no timing."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--only", "llama-runtime", "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    for key in (
        "chain_wall_ratio_vs_hand_written",
        "fanout_wall_ratio_vs_hand_written",
        "fanout_wall_ratio_vs_dbos",
        "chain_bytes_ratio_vs_hand_written",
        "fanout_bytes_ratio_vs_hand_written",
    ):
        assert isinstance(report[key], float) and report[key] > 0, key
    assert report["duplicate_invocations"] == 0
    joins = report["fan_join_invocations"]
    assert joins["hand_written"] == [report["fan_width"]] and joins["runtime"][0] >= report["fan_width"]
    assert report["targets"]["duplicate_invocations"]["met"] is True
    assert all(t["met"] is None for k, t in report["targets"].items() if k != "duplicate_invocations")
    assert len(report["load_average_before"]) == 3


def test_the_fleet_bench_runs_the_stages_named_in_its_own_order_and_refuses_an_unknown_one() -> None:
    """``--stage`` (repeated or a comma list) picks stages, run in the benchmark's order; a misspelt stage is
    refused before any server or worker starts, naming the stages there are."""
    import argparse

    from bench.fleet import STAGES, _chosen_stages

    parser = argparse.ArgumentParser()
    assert _chosen_stages(parser, None) == list(STAGES)
    assert _chosen_stages(parser, ["versioned,spread", "rolling", "spread"]) == ["spread", "rolling", "versioned"]
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--only", "fleet", "--stage", "versioned,rollout"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert "unknown stage rollout; choose from spread, throughput, chaos, rolling, versioned" in proc.stderr
