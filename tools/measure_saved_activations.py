#!/usr/bin/env python3
"""Measures the bytes PyTorch autograd saves for backward in one training step.

Runs a torchvision model forward + cross-entropy on CPU with
torch.autograd.graph.saved_tensors_hooks and sums the unique storages
(deduplicated by storage data_ptr) packed for backward, leaving out the
parameters, buffers (BN running stats), the input images and the labels:
what remains are the activations, the BN statistics and the max-pool indices,
which is what memwall's memory_summary().saved_activation_bytes counts.

Model names are torchvision's, plus "unet": the U-Net of
milesial/Pytorch-UNet with bilinear=False (3 input channels, 2 classes,
per-pixel labels), rebuilt below from its structure.

Used to cross-check tests/models/cnn_test.cc. Needs torch and torchvision;
run with the system interpreter, e.g.

    $(scripts/install-deps.sh --print-python) tools/measure_saved_activations.py resnet50 --batch 2 --image 224
"""
import argparse

import torch
import torchvision
from torch import nn


def double_conv(cin: int, cout: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(True),
        nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(True))


class UNet(nn.Module):
    """milesial/Pytorch-UNet UNet(n_channels=3, n_classes=2, bilinear=False)."""

    def __init__(self, channels=(64, 128, 256, 512, 1024), classes=2):
        super().__init__()
        self.inc = double_conv(3, channels[0])
        self.downs = nn.ModuleList(
            nn.Sequential(nn.MaxPool2d(2), double_conv(a, b))
            for a, b in zip(channels[:-1], channels[1:]))
        self.ups = nn.ModuleList(
            nn.ConvTranspose2d(c, c // 2, 2, stride=2) for c in reversed(channels[1:]))
        self.convs = nn.ModuleList(
            double_conv(c, c // 2) for c in reversed(channels[1:]))
        self.outc = nn.Conv2d(channels[0], classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for down in self.downs:
            skips.append(down(skips[-1]))
        x = skips.pop()
        for up, conv in zip(self.ups, self.convs):
            x = conv(torch.cat([skips.pop(), up(x)], dim=1))
        return self.outc(x)


def measure(model_name: str, batch: int, image: int) -> dict:
    torch.manual_seed(0)
    if model_name == "unet":
        model = UNet()
        labels = torch.randint(0, 2, (batch, image, image))
    else:
        model = getattr(torchvision.models, model_name)(num_classes=1000)
        labels = torch.randint(0, 1000, (batch,))
    model.train()
    images = torch.randn(batch, 3, image, image)

    def storage_key(t: torch.Tensor):
        s = t.untyped_storage()
        return s.data_ptr(), s.nbytes()

    excluded = {storage_key(t)[0] for t in list(model.parameters()) + list(model.buffers())}
    excluded |= {storage_key(images)[0], storage_key(labels)[0]}

    saved = {}  # storage data_ptr -> bytes

    def pack(t: torch.Tensor):
        ptr, nbytes = storage_key(t)
        if ptr not in excluded:
            saved[ptr] = max(saved.get(ptr, 0), nbytes)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    return {"model": model_name, "batch": batch, "image": image,
            "saved_bytes": sum(saved.values()), "storages": len(saved)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="resnet50")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--image", type=int, default=224)
    args = parser.parse_args()
    r = measure(args.model, args.batch, args.image)
    print(f"torch {torch.__version__} torchvision {torchvision.__version__}")
    print(f"{r['model']} batch {r['batch']} image {r['image']} fp32: "
          f"{r['saved_bytes']} bytes saved for backward in {r['storages']} storages")


if __name__ == "__main__":
    main()
