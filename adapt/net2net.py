"""Net2Net deepening: insert identity layers after a block, leaving the network's function unchanged.

Works on the two small CNNs of the adaptation scenarios and on torchvision ResNets.

- A conv block (Conv k x k, same padding -> BatchNorm -> ReLU) gets a new conv block
  after it: the conv is a Dirac (identity) kernel, and the batch norm is set so it is
  the identity in eval mode: its running statistics are re-estimated on real inputs
  (``calibrate_bn``) and then weight = sqrt(var + eps), bias = mean. The input of the
  new block is a ReLU output (>= 0), so its ReLU is the identity too.
- The classifier block gets a new Linear(d, d) = I followed by ReLU in front of it; its input
  is a global-average-pooled ReLU output (>= 0), so that is the identity as well.
- A ResNet stage gets a new BasicBlock whose output branch starts at zero (bn2 weight
  and bias 0), so the block computes relu(x + 0) = x for the stage's (non-negative) output.
"""

from __future__ import annotations

import itertools
from typing import Iterable, cast

import torch
from torch import nn
from torchvision.models.resnet import BasicBlock, ResNet

NOTHING = 3  # action 3: do not deepen


class ConvBlock(nn.Sequential):
    """Conv (same padding) -> BatchNorm -> ReLU."""

    def __init__(self, cin: int, cout: int, k: int = 3) -> None:
        if k % 2 == 0:
            raise ValueError(f"kernel size must be odd for same padding, got {k}")
        super().__init__(nn.Conv2d(cin, cout, k, padding=k // 2, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class SmallCNN(nn.Module):
    """A CNN in three deepenable groups: conv group 0, conv group 1, classifier group 2.

    Args:
        groups: (group 0 modules, between-0-and-1 modules, group 1 modules).
        features: channels entering the classifier.
        classes: output classes.
    """

    def __init__(self, g0: list[nn.Module], between: list[nn.Module], g1: list[nn.Module], features: int,
                 classes: int = 10) -> None:
        super().__init__()
        self.g0 = nn.Sequential(*g0)
        self.between = nn.Sequential(*between)
        self.g1 = nn.Sequential(*g1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.g2 = nn.Sequential()  # inserted Linear+ReLU layers live here, in front of the classifier
        self.classifier = nn.Linear(features, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.g1(self.between(self.g0(x)))
        x = self.pool(x).flatten(1)
        return self.classifier(self.g2(x))


def convnet2(classes: int = 10) -> SmallCNN:
    """[Conv 3->32 k3, BN, ReLU] -> AvgPool 2 -> [Conv 32->32 k3, BN, ReLU] -> GAP -> [Linear 32->10]."""
    return SmallCNN([ConvBlock(3, 32)], [nn.AvgPool2d(2)], [ConvBlock(32, 32)], 32, classes)


def convnet3(classes: int = 10) -> SmallCNN:
    """[Conv 3->64 k3, BN, ReLU] -> [Conv 64->32 k3, BN, ReLU] -> GAP -> [Linear 32->10]."""
    return SmallCNN([ConvBlock(3, 64)], [], [ConvBlock(64, 32)], 32, classes)


SMALL_MODELS = {"convnet2": convnet2, "convnet3": convnet3}


def _identity_conv_block(channels: int, k: int = 3) -> ConvBlock:
    block = ConvBlock(channels, channels, k)
    conv, bn = cast(nn.Conv2d, block[0]), cast(nn.BatchNorm2d, block[1])
    with torch.no_grad():
        conv.weight.zero_()
        for c in range(channels):
            conv.weight[c, c, k // 2, k // 2] = 1.0  # Dirac kernel: output = input
        assert bn.running_mean is not None and bn.running_var is not None  # track_running_stats is on
        bn.running_mean.zero_()
        bn.running_var.fill_(1.0)
        bn.weight.fill_((1.0 + bn.eps) ** 0.5)
        bn.bias.zero_()
    return block


def _last_channels(group: nn.Sequential) -> int:
    for m in reversed(list(group.modules())):
        if isinstance(m, nn.Conv2d):
            return m.out_channels
    raise ValueError("group has no conv layer")


def deepen(model: nn.Module, block: int, data: Iterable[torch.Tensor] | None = None) -> nn.Module:
    """Insert an identity layer after ``block`` (0, 1, 2 on SmallCNN; 0-3 = layer1-layer4 on a ResNet).

    Args:
        model: a SmallCNN or a torchvision ResNet (changed in place and returned).
        block: the block to deepen; NOTHING (3) on a SmallCNN leaves the model as is.
        data: batches of inputs to re-estimate the new batch norm's statistics (optional).
    """
    if isinstance(model, ResNet):
        return _deepen_resnet(model, block)
    if not isinstance(model, SmallCNN):
        raise TypeError(f"cannot deepen a {type(model).__name__}")
    if block == NOTHING:
        return model
    if block in (0, 1):
        group = model.g0 if block == 0 else model.g1
        new = _identity_conv_block(_last_channels(group))
        new.to(next(model.parameters()).device)
        group.append(new)
        if data is not None:
            calibrate_bn(model, new, data)
    elif block == 2:
        d = model.classifier.in_features
        lin = nn.Linear(d, d)
        with torch.no_grad():
            lin.weight.copy_(torch.eye(d))
            lin.bias.zero_()
        model.g2.append(lin)
        model.g2.append(nn.ReLU())
    else:
        raise ValueError(f"block must be 0, 1, 2 or {NOTHING} (nothing), got {block}")
    return model


@torch.no_grad()
def calibrate_bn(model: nn.Module, block: ConvBlock, data: Iterable[torch.Tensor]) -> None:
    """Re-estimate the new block's batch-norm statistics on ``data``, then keep it the identity in eval mode."""
    bn = cast(nn.BatchNorm2d, block[1])
    bn.reset_running_stats()
    bn.momentum = None  # cumulative average over the batches
    was_training = model.training
    model.eval()  # every other batch norm keeps its statistics
    bn.train()
    for x in data:
        model(x)
    model.train(was_training)
    bn.momentum = 0.1
    assert bn.running_mean is not None and bn.running_var is not None  # track_running_stats is on
    bn.weight.copy_(torch.sqrt(bn.running_var + bn.eps))
    bn.bias.copy_(bn.running_mean)


def _deepen_resnet(model: ResNet, stage: int) -> ResNet:
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"ResNet stage must be 0-3 (layer1-layer4), got {stage}")
    layer: nn.Sequential = getattr(model, f"layer{stage + 1}")
    last = layer[-1]
    if not isinstance(last, BasicBlock):
        raise TypeError("only BasicBlock ResNets (resnet18/34) are supported")
    planes = last.conv2.out_channels
    block = BasicBlock(planes, planes)
    with torch.no_grad():
        block.bn2.weight.zero_()  # the output branch starts at zero: relu(x + 0) = x
        block.bn2.bias.zero_()
    block.to(next(model.parameters()).device)
    layer.append(block)
    return model


def deepened(name: str, actions: Iterable[int]) -> SmallCNN:
    """A fresh small CNN ``name`` deepened by ``actions`` in order (no batch-norm re-estimation)."""
    model = SMALL_MODELS[name]()
    for a in actions:
        deepen(model, int(a))
    return model


def prefixes(depth: int) -> list[tuple[int, ...]]:
    """Every sequence of ``depth`` actions (0-3), in table order: 4 ** depth of them."""
    return list(itertools.product(range(4), repeat=depth))


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
