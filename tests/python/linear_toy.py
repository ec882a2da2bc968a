# Two bias-free Linear(2000, 2000) layers, batch 16, Adam (foreach=False):
# the toy of issue 20 on which memwall's estimate was 10% low. torch's
# single-tensor Adam keeps the previous parameter's `denom` (16 MB here)
# alive while it allocates the next one's (tests/importers/eager_test.cc).
# The model is memwall_fidelity.linear_toy (python/memwall_fidelity.py),
# `memwall bench fidelity`'s case of the same name.
from memwall_fidelity import linear_toy


def build():
    return linear_toy()
