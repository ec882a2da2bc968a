# Two bias-free Linear(2000, 2000) layers, batch 16, Adam (foreach=False):
# the toy of issue 20 on which memwall's estimate was 10% low. torch's
# single-tensor Adam keeps the previous parameter's `denom` (16 MB here)
# alive while it allocates the next one's (tests/importers/eager_test.cc).
import torch
import torch.nn as nn
import torch.nn.functional as F


def build(batch=16):
    model = nn.Sequential(nn.Linear(2000, 2000, bias=False), nn.Linear(2000, 2000, bias=False))
    x = torch.randn(batch, 2000)
    target = torch.randn(batch, 2000)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    return model, (x, target), F.mse_loss, optimizer
