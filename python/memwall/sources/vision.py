"""torchvision's classification models as model sources (--torchvision)."""
from __future__ import annotations

import warnings

import torch

from memwall.errors import fail, first_line
from memwall.sources import Built
from memwall.sources.optimizers import make_optimizer


def torchvision_models() -> list[str]:
    """torchvision's classification builders (models registered in the
    top-level torchvision.models package, not detection/segmentation/video/
    quantization/optical_flow)."""
    import torchvision.models as tm
    return tm.list_models(module=tm)


def default_image(name: str) -> int:
    """The image side a torchvision classifier takes by default.

    torchvision documents N x 3 x 299 x 299 inputs for Inception v3 (its
    auxiliary classifier's 5x5 convolution needs at least 17x17 features
    there, about 270 pixels); every other classifier takes 224."""
    return 299 if name == "inception_v3" else 224


def build_torchvision(name: str, batch: int, image: int, optimizer: str) -> Built:
    """torchvision's classifier `name` (no weights), a batch of `batch`
    random images of `image` x `image` pixels with labels of 1000 classes,
    cross-entropy and the optimizer `optimizer`."""
    import torchvision.models as tm
    known = torchvision_models()
    if name not in known:
        fail(f"unknown torchvision classification model '{name}' (known: {', '.join(known)})")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # GoogLeNet/Inception's init-change notice
        try:
            model = tm.get_model(name, weights=None)
        except Exception as e:
            fail(f"{name}: building the model failed: {type(e).__name__}: {first_line(e)}")
    images = torch.randn(batch, 3, image, image)
    labels = torch.randint(0, 1000, (batch,))
    return Built(model, (images, labels), torch.nn.CrossEntropyLoss(),
                 make_optimizer(optimizer, model.parameters()))
