# A model the meta-device tracer cannot follow: torch.nonzero's output shape
# depends on the values, which meta tensors do not have. memwall trace must
# name the operator (aten::nonzero) in its one-line error.
import torch
import torch.nn as nn


class Untraceable(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        y = self.fc(x)
        return y[torch.nonzero(y > 0, as_tuple=True)].sum()


def build():
    model = Untraceable()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return model, (torch.randn(2, 4), None), lambda out: out, optimizer
