# Models for the executor's tests (tests/exec, issue 22): each function
# returns (model, batch, loss_fn, optimizer) for `memwall trace --script
# tests/exec/models.py:NAME`. Small enough that a CPU step takes well under
# a second, with activations large next to the model states, so that every
# rematerialization and swap planner has something to do.
import torch
from torch import nn
import torch.nn.functional as F


def cnn_bn():
    """Conv, batch norm and ReLU blocks (in-place ReLU, running statistics),
    Adam: the CNN with batch norm."""
    layers = []
    channels = 3
    for width in (16, 16, 32, 32):
        layers += [nn.Conv2d(channels, width, 3, padding=1, bias=False), nn.BatchNorm2d(width),
                   nn.ReLU(inplace=True)]
        channels = width
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
    batch = (torch.randn(32, 3, 64, 64), torch.randint(0, 10, (32,)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    return model, batch, nn.CrossEntropyLoss(), optimizer


class _Block(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)

    def forward(self, x):
        return F.relu(self.conv2(F.relu(self.conv1(x))))


class UNet(nn.Module):
    """Two levels down and up, skip connections concatenated (Ronneberger
    et al. 2015, at a toy width)."""

    def __init__(self, width=8):
        super().__init__()
        self.down1 = _Block(1, width)
        self.down2 = _Block(width, 2 * width)
        self.bottom = _Block(2 * width, 4 * width)
        self.up2 = nn.ConvTranspose2d(4 * width, 2 * width, 2, stride=2)
        self.dec2 = _Block(4 * width, 2 * width)
        self.up1 = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
        self.dec1 = _Block(2 * width, width)
        self.head = nn.Conv2d(width, 1, 1)

    def forward(self, x):
        d1 = self.down1(x)
        d2 = self.down2(F.max_pool2d(d1, 2))
        b = self.bottom(F.max_pool2d(d2, 2))
        u2 = self.dec2(torch.cat([self.up2(b), d2], dim=1))
        u1 = self.dec1(torch.cat([self.up1(u2), d1], dim=1))
        return self.head(u1)


def depthwise_2x2():
    """A depthwise 3x3 convolution over a 2x2 image (MobileNetV2's last
    blocks at 64x64), after a 1x1 one so that it needs its input gradient:
    oneDNN computes its weight gradient by GEMM on AVX2 CPUs."""
    model = nn.Sequential(nn.Conv2d(16, 960, 1), nn.Conv2d(960, 960, 3, padding=1, groups=960,
                                                           bias=False),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(960, 10))
    batch = (torch.randn(8, 16, 2, 2), torch.randint(0, 10, (8,)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, foreach=False)
    return model, batch, nn.CrossEntropyLoss(), optimizer


def grouped_conv():
    """regnet_y_400mf's block4 grouped 3x3 convolution (440 channels in 55
    groups of 8, stride 2, over a 6x6 input) between batch norms. Its
    backward allocates two scratch buffers of its input gradient's size
    before it, the second freed before the gradient is made in its place
    (Note [Scratch before its output] in src/exec/executor_compute.cc)."""
    model = nn.Sequential(nn.Conv2d(3, 440, 1, bias=False), nn.BatchNorm2d(440), nn.ReLU(),
                          nn.Conv2d(440, 440, 3, stride=2, padding=1, groups=55, bias=False),
                          nn.BatchNorm2d(440), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(440, 10))
    batch = (torch.randn(16, 3, 6, 6), torch.randint(0, 10, (16,)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    return model, batch, nn.CrossEntropyLoss(), optimizer


def strided_conv():
    """ResNet-18's layer4.0.conv1 (256 to 512 channels, 3x3, stride 2, over
    an 8x8 input, b16) between batch norms. Its backward makes blocked
    copies of its input gradient's and its weight gradient's sizes before
    each of them (Note [Scratch before its output] in
    src/exec/executor_compute.cc)."""
    model = nn.Sequential(nn.Conv2d(3, 256, 1, bias=False), nn.BatchNorm2d(256), nn.ReLU(),
                          nn.Conv2d(256, 512, 3, stride=2, padding=1, bias=False),
                          nn.BatchNorm2d(512), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10))
    batch = (torch.randn(16, 3, 8, 8), torch.randint(0, 10, (16,)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, foreach=False)
    return model, batch, nn.CrossEntropyLoss(), optimizer


def unet():
    model = UNet()
    batch = (torch.randn(16, 1, 96, 96), (torch.rand(16, 1, 96, 96) > 0.5).float())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, foreach=False)
    return model, batch, nn.BCEWithLogitsLoss(), optimizer


def gpt2_small():
    """GPT-2 small (Radford et al. 2019: 12 layers, 768 wide, 124M
    parameters) from transformers, at batch 1 and sequence 32, AdamW;
    transformers' default attention (SDPA) with its dropout."""
    from transformers import GPT2Config, GPT2LMHeadModel
    model = GPT2LMHeadModel(GPT2Config())
    ids = torch.randint(0, 50257, (1, 32))

    def loss_fn(logits, target):  # memwall's tracer passes a model output's .logits
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), target.view(-1))

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    return model, ((ids,), ids), loss_fn, optimizer


def gpt2_small_b8_s256():
    """GPT-2 small at batch 8, sequence 256: the executor's overhead case
    (issue 22: below 5% of a keep-all step)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    model = GPT2LMHeadModel(GPT2Config())
    ids = torch.randint(0, 50257, (8, 256))

    def loss_fn(logits, target):
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), target.view(-1))

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    return model, ((ids,), ids), loss_fn, optimizer
