# A step that drops each gradient as soon as it has used it (SGD that sets
# p.grad = None after p's update, as fused-backward optimizers do to save
# memory): gradients die mid-step, so a meta trace that set them aside as
# steady (Note [Steady storages], python/memwall/tracer/recorder.py) must
# trace again with every storage checked (tests/importers/eager_test.cc).
import torch


class FreeingSgd(torch.optim.Optimizer):
    def __init__(self, params, lr):
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])
                    p.grad = None


def build():
    nn = torch.nn
    model = nn.Sequential(nn.Linear(64, 64, bias=False), nn.ReLU(), nn.Linear(64, 64, bias=False))
    return model, (torch.randn(8, 64), torch.randn(8, 64)), nn.functional.mse_loss, \
        FreeingSgd(model.parameters(), lr=0.1)
