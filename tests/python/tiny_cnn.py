# A tiny CNN whose traced graph tests/importers/trace_test.cc checks to the
# byte and the FLOP: conv 3->4 (3x3, bias) -> batch norm -> in-place ReLU ->
# flatten (a view) -> linear 256->10, cross-entropy, Adam; batch 2, 8x8.
import torch
import torch.nn as nn


class TinyCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=True)
        self.fc = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.relu(self.bn(self.conv(x))), 1))


def build():
    model = TinyCnn()
    batch = (torch.randn(2, 3, 8, 8), torch.randint(0, 10, (2,)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    return model, batch, nn.CrossEntropyLoss(), optimizer


def build_sgd():
    model, batch, loss_fn, _ = build()
    return model, batch, loss_fn, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9,
                                                  foreach=False)


def build_foreach():
    # torch 2.x's default multi-tensor Adam: one _foreach_* op over every
    # parameter, which memwall cannot split into per-parameter steps.
    model, batch, loss_fn, _ = build()
    return model, batch, loss_fn, torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
