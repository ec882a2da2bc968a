# Scripts that end the tracer's process (issue 45: reported as "the
# tracer's graph is invalid (a tracer bug)"); tests/cli/trace_test.cc.
import os
import sys

import torch


def os_exit():
    os._exit(0)


def os_exit_3():
    os._exit(3)


class ExitInForward(torch.nn.Module):
    def forward(self, x):
        sys.exit("done")


def sys_exit_in_step():
    model = ExitInForward()
    model.p = torch.nn.Parameter(torch.zeros(2))
    return (model, (torch.zeros(2, 2), torch.zeros(2)), torch.nn.MSELoss(),
            torch.optim.SGD(model.parameters(), lr=0.1))
