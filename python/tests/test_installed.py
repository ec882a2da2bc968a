"""The package as `make python` (and `make test`) installs it into memwall's
Python environment: `pip install ./python` (python/pyproject.toml,
scripts/install-python.sh), importable from any directory with its native
parts, and training there."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from test_training import WHY_NOT

pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT)

CHECK = """
import torch, memwall, memwall_core, os
from memwall.native import BIN
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
optimizer = torch.optim.AdamW(model.parameters())
trainer = memwall.Trainer(model, optimizer, loss_fn=torch.nn.functional.cross_entropy)
loss = trainer.step((torch.randn(8, 16), torch.randint(0, 4, (8,))))
print(memwall.__file__, memwall_core.__file__, os.environ["MEMWALL_EXEC_LIBRARY"],
      os.path.exists(os.path.join(BIN, "memwall")), float(loss) > 0)
"""


def test_the_installed_package_trains_from_any_directory() -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MEMWALL_CORE_DIR", "MEMWALL_EXEC_LIBRARY", "MEMWALL_BINARY",
                        "PYTHONPATH")}
    done = subprocess.run([sys.executable, "-c", CHECK], cwd="/", env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, ("the package is not installed in this environment "
                                  "(make python: scripts/install-python.sh): "
                                  + done.stderr[-1500:])
    package, core, executor, command, trained = done.stdout.split()
    site = os.path.dirname(os.path.dirname(package))
    assert site.endswith("site-packages")
    assert os.path.dirname(core) == site
    assert executor == os.path.join(site, "memwall", "bin", "libmemwall_exec.so")
    assert command == "True" and trained == "True"
