# pytest's setup for the package's unit tests: `python -m pytest python/tests`
# from the repository root, in memwall's Python environment (the venv of
# scripts/install-deps.sh --torch; `make test` runs them as the ctest
# PythonPackage). The package is imported from python/, not installed.
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
