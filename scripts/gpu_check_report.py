"""The report of scripts/gpu-check.sh: gpu-check.json and gpu-check.txt.

Reads the checks' rows (NAME, STATUS, SECONDS, DETAIL, tab-separated) that
gpu-check.sh wrote, the machine's facts (the GPU by nvidia-smi, torch by
importing it: this runs under the interpreter the build used) and the
machine-readable outputs of the checks (calibrate's profile, offload's and
fidelity's JSON), and writes one JSON file and one text summary into --out.
Standard library and torch only: a GPU machine has nothing else for sure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

JSON_CHECKS = ("run-smoke", "run-smoke-60", "offload", "fidelity")


def read_rows(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        name, status, seconds, detail = (line.split("\t") + ["", "", ""])[:4]
        rows.append({"name": name, "status": status, "seconds": int(seconds or 0), "detail": detail})
    return rows


def gpu_facts() -> list[dict[str, str]]:
    """Each GPU as nvidia-smi names it; empty without nvidia-smi."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    query = "name,driver_version,memory.total,compute_cap"
    try:
        text = subprocess.run([smi, f"--query-gpu={query}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    keys = query.split(",")
    return [dict(zip(keys, (field.strip() for field in line.split(","))))
            for line in text.splitlines() if line.strip()]


def torch_facts() -> dict[str, Any]:
    try:
        import torch  # noqa: PLC0415 (the machine's torch, imported only here)
    except ImportError as e:
        return {"error": str(e)}
    facts: dict[str, Any] = {"version": torch.__version__, "cuda": torch.version.cuda,
                             "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        facts["device"] = torch.cuda.get_device_name(0)
        facts["cudnn"] = torch.backends.cudnn.version()
    return facts


def check_json(log: Path) -> Any:
    """A check's stdout when it is one JSON document, else None."""
    try:
        return json.loads(log.read_text())
    except (OSError, ValueError):
        return None


def run_detail(run: dict[str, Any]) -> str:
    """A `memwall run --json`'s line: eager's bits and its last step's
    device peak, measured against predicted."""
    try:
        last = run["steps"][-1]["device_peak_bytes"]
        return (f"eager equal: {run['eager_equal']}; {run['policy']}; last step's device peak "
                f"{last['measured'] / 2**20:.2f} MiB measured, {last['predicted'] / 2**20:.2f} "
                f"MiB predicted")
    except (KeyError, IndexError, TypeError, ZeroDivisionError):
        return ""


def summary(report: dict[str, Any]) -> str:
    m = report["machine"]
    gpus = ", ".join(g.get("name", "?") for g in m["gpus"]) or "none"
    lines = [
        f"memwall GPU check ({report['mode']} mode), {report['seconds']} s",
        f"kit: {report['kit'].get('commit', 'a checkout')}  made {report['kit'].get('made', '-')}",
        f"machine: {m['cpu_count']} CPUs, GPU: {gpus}, torch {m['torch'].get('version', '?')} "
        f"(CUDA {m['torch'].get('cuda')}), Python {m['python']}",
        "",
        f"{'check':<16} {'status':<8} {'seconds':>7}  detail",
    ]
    for row in report["checks"]:
        lines.append(f"{row['name']:<16} {row['status']:<8} {row['seconds']:>7}  {row['detail']}")
    counts = {s: sum(r["status"] == s for r in report["checks"])
              for s in ("passed", "failed", "skipped", "not-run")}
    lines += ["", ", ".join(f"{n} {s}" for s, n in counts.items())]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--mode", choices=("gpu", "cpu"), required=True)
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--python", required=True)
    ap.add_argument("--seconds", type=int, required=True)
    args = ap.parse_args()
    kit_file = args.root / "KIT.json"
    kit = json.loads(kit_file.read_text()) if kit_file.is_file() else {}
    report: dict[str, Any] = {
        "mode": args.mode,
        "seconds": args.seconds,
        "kit": kit,
        "machine": {"cpu_count": os.cpu_count(), "kernel": platform.release(),
                    "python": platform.python_version(), "interpreter": args.python,
                    "gpus": gpu_facts(), "torch": torch_facts()},
        "checks": read_rows(args.results),
        "outputs": {},
    }
    for name in JSON_CHECKS:
        value = check_json(args.out / "logs" / f"{name}.log")
        if value is not None:
            report["outputs"][name] = value
    for row in report["checks"]:  # a run's JSON says more than its exit code
        run = report["outputs"].get(row["name"]) if row["name"].startswith("run-") else None
        if isinstance(run, dict) and not row["detail"]:
            row["detail"] = run_detail(run)
    profile = check_json(args.out / "calibrated-profile.json")
    if profile is not None:
        report["outputs"]["calibrated_profile"] = profile
    tmp = args.out / "gpu-check.json.tmp"
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    tmp.replace(args.out / "gpu-check.json")
    (args.out / "gpu-check.txt").write_text(summary(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
