"""torchvision ResNets for CIFAR, with the original or a CIFAR stem."""

from __future__ import annotations

import torch
import torchvision

MODELS = ("resnet18", "resnet50")


def build_model(name: str, num_classes: int, stem: str = "cifar") -> torch.nn.Module:
    """A torchvision ResNet trained from scratch.

    Args:
        name: "resnet18" or "resnet50".
        num_classes: 10 (CIFAR-10) or 100 (CIFAR-100).
        stem: "cifar" uses a 3x3/1 conv and no pool, the usual network for 32x32 images (the one
            Gavel's ResNet-18 rows measured); "imagenet" keeps torchvision's 7x7/2 conv and max pool
            (as HRFS did), some 15x less work per image.
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r} (known: {', '.join(MODELS)})")
    model = getattr(torchvision.models, name)(weights=None, num_classes=num_classes)
    if stem == "cifar":
        model.conv1 = torch.nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
        model.maxpool = torch.nn.Identity()
    elif stem != "imagenet":
        raise ValueError(f"unknown stem {stem!r} (known: imagenet, cifar)")
    return model
