"""A user's script as a model source (--script FILE.py:FUNCTION)."""
from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from memwall.errors import TraceError, fail, first_line


def build_script(spec: str) -> tuple[Any, Any, Any, Any]:
    """Imports FILE.py (its directory first on sys.path) and returns what
    FUNCTION() returns: (model, batch, loss_fn, optimizer), or a dict with
    those keys."""
    path, sep, fn_name = spec.rpartition(":")
    if not sep or not path or not fn_name:
        fail(f"--script takes FILE.py:FUNCTION, got '{spec}'")
    if not os.path.isfile(path):
        fail(f"script '{path}' does not exist")
    module_spec = importlib.util.spec_from_file_location("memwall_user_model", path)
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:
        fail(f"script '{path}' failed to load: {type(e).__name__}: {first_line(e)}")
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        fail(f"script '{path}' has no function '{fn_name}'")
    try:
        result = fn()
    except TraceError:
        raise
    except Exception as e:
        fail(f"{path}: {fn_name}() failed: {type(e).__name__}: {first_line(e)}")
    if isinstance(result, dict):
        try:
            result = (result["model"], result["batch"], result["loss_fn"], result["optimizer"])
        except KeyError as e:
            fail(f"{fn_name}() returned a dict without {e}")
    if not isinstance(result, (tuple, list)) or len(result) != 4:
        fail(f"{fn_name}() must return (model, batch, loss_fn, optimizer)")
    return tuple(result)
