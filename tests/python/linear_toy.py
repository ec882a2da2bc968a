# Two bias-free Linear(2000, 2000) layers, batch 16, Adam (foreach=False):
# the toy of issue 20 on which memwall's estimate was 10% low. torch's
# single-tensor Adam keeps the previous parameter's `denom` (16 MB here)
# alive while it allocates the next one's (tests/importers/eager_test.cc).
# The model is memwall.sources.builtin.linear_toy
# (python/memwall/sources/builtin.py), `memwall bench fidelity`'s case of
# the same name; the tracer's package is importable from a traced script.
from memwall.sources.builtin import linear_toy


def build():
    return linear_toy()
