# Two Linear layers with dropout 0.5 between them, for the tests of
# `memwall trace --kernels`: what dropout saves for backward depends on
# whose kernels run it (tests/importers/trace_test.cc).
#
#   memwall trace --script tests/python/dropout_mlp.py:build --kernels cpu --out mlp.json
import torch
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(F.dropout(F.relu(self.fc1(x)), 0.5, self.training))


def build(batch=8):
    model = Mlp()
    x = torch.randn(batch, 64)
    target = torch.randint(0, 10, (batch,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)
    return model, (x, target), F.cross_entropy, optimizer
