"""The GPU check kit's scripts (docs/gpu.md) where they need no build: the
one-line refusals of scripts/gpu-kit.sh and scripts/gpu-check.sh, and the
report scripts/gpu_check_report.py writes from the checks' rows. The kit's
whole build and --cpu run is `make gpu-kit-check` (minutes, not a unit test)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "scripts" / "gpu-kit.sh"
CHECK = ROOT / "scripts" / "gpu-check.sh"
REPORT = ROOT / "scripts" / "gpu_check_report.py"


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120)


def one_error_line(done: subprocess.CompletedProcess[str], prefix: str) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(prefix), lines[0]
    return lines[0]


def test_check_refuses_what_it_cannot_run_in_one_line(tmp_path: Path) -> None:
    one_error_line(run(CHECK), "gpu-check: usage:")
    assert "unknown option '--fast'" in one_error_line(run(CHECK, "--fast", tmp_path), "gpu-check:")
    assert "--jobs 'x'" in one_error_line(run(CHECK, "--jobs", "x", tmp_path), "gpu-check:")
    assert "no python3 on PATH and no --python" in one_error_line(
        run(CHECK, "--python", tmp_path / "none", tmp_path), "gpu-check:")
    no_torch = tmp_path / "python"
    no_torch.write_text("#!/bin/sh\nexit 1\n")
    no_torch.chmod(0o755)
    assert "cannot import torch" in one_error_line(
        run(CHECK, "--python", no_torch, tmp_path / "out"), "gpu-check:")
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_check_without_a_gpu_says_to_use_cpu_mode(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: gpu-check.sh would run")
    line = one_error_line(run(CHECK, "--python", sys.executable, tmp_path / "out"), "gpu-check:")
    assert line.endswith("on a machine without one run --cpu"), line


def test_kit_refuses_an_existing_folder_and_a_missing_build(tmp_path: Path) -> None:
    assert "exists" in one_error_line(run(KIT, tmp_path), "gpu-kit:")
    assert "build first (make build)" in one_error_line(
        run(KIT, "--build", tmp_path / "nothing", tmp_path / "kit"), "gpu-kit:")
    assert not (tmp_path / "kit").exists()


def test_report_has_every_row_the_machine_and_json_outputs(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    rows = [("build", "passed", "412", "torch 2.11.0+cu130, CUDA 13.0, Python 3.12.3"),
            ("runtime-cuda", "passed", "3", "[  PASSED  ] 6 tests."),
            ("run-smoke", "passed", "31", ""),
            ("exec-matrix", "not-run", "0", "the executor has no CUDA path yet"),
            ("offload", "failed", "20", "bench offload: no space left on device")]
    (logs / "results.tsv").write_text("".join("\t".join(r) + "\n" for r in rows))
    (tmp_path / "calibrated-profile.json").write_text(json.dumps({"name": "measured"}))
    (logs / "offload.log").write_text("not json")
    (logs / "fidelity.log").write_text(json.dumps({"cases": []}))
    # A run's JSON (the fields `memwall run --json` prints that the line reads).
    smoke = {"eager_equal": True, "policy": "stitching",
             "steps": [{"device_peak_bytes": {"measured": 3 << 20, "predicted": 2 << 20}}]}
    (logs / "run-smoke.log").write_text(json.dumps(smoke))
    (tmp_path / "KIT.json").write_text(json.dumps({"commit": "abc", "made": "2026-12-07"}))
    done = run(sys.executable, REPORT, "--results", logs / "results.tsv", "--out", tmp_path,
               "--mode", "gpu", "--root", tmp_path, "--python", sys.executable, "--seconds", "435")
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "gpu-check.json").read_text())
    assert [r["name"] for r in report["checks"]] == [r[0] for r in rows]
    assert report["checks"][0] == {"name": "build", "status": "passed", "seconds": 412,
                                   "detail": rows[0][3]}
    assert report["outputs"] == {"run-smoke": smoke, "fidelity": {"cases": []},
                                 "calibrated_profile": {"name": "measured"}}
    assert report["checks"][2]["detail"] == (
        "eager equal: True; stitching; last step's device peak 3.00 MiB measured, 2.00 MiB "
        "predicted")
    assert report["kit"]["commit"] == "abc"
    assert report["machine"]["torch"]["version"]
    text = (tmp_path / "gpu-check.txt").read_text().splitlines()
    assert text[0] == "memwall GPU check (gpu mode), 435 s"
    assert text[-1] == "3 passed, 1 failed, 0 skipped, 1 not-run"
    assert any(line.startswith("offload          failed        20  bench offload:")
               for line in text)
    assert not (tmp_path / "gpu-check.json.tmp").exists()
