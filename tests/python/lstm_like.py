# An LSTM unrolled over time in plain torch (one cell, its weights shared by
# every step), the recurrent shape Chen et al. 2016 evaluate besides
# feed-forward nets: each step's gates are a matmul of [x_t, h_{t-1}],
# gradient contributions to the shared weights accumulate over the steps.
#
#   memwall trace --script tests/python/lstm_like.py:build --out lstm.json
import torch
import torch.nn as nn
import torch.nn.functional as F

STEPS, INPUT, HIDDEN = 32, 256, 512


class Unrolled(nn.Module):
    def __init__(self):
        super().__init__()
        self.gates = nn.Linear(INPUT + HIDDEN, 4 * HIDDEN)
        self.head = nn.Linear(HIDDEN, 10)

    def forward(self, x):
        b = x.shape[0]
        h = x.new_zeros(b, HIDDEN)
        c = x.new_zeros(b, HIDDEN)
        for t in range(STEPS):
            i, f, g, o = self.gates(torch.cat([x[:, t], h], dim=1)).chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return self.head(h)


def build(batch=64):
    model = Unrolled()
    x = torch.randn(batch, STEPS, INPUT)
    target = torch.randint(0, 10, (batch,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=False)
    return model, (x, target), F.cross_entropy, optimizer
