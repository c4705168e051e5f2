"""Net2Net deepening preserves the function, grows the model, and training continues."""

from __future__ import annotations

import pytest
import torch
import torchvision

from hetune.adapt.net2net import NOTHING, SMALL_MODELS, count_parameters, deepen


def _trained(model, x, steps=3):
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    y = torch.arange(len(x)) % 10
    for _ in range(steps):  # non-trivial weights and batch-norm statistics
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return model


@pytest.mark.parametrize("name", sorted(SMALL_MODELS))
@pytest.mark.parametrize("block", [0, 1, 2])
def test_small_cnn_deepening_preserves_function(name, block):
    torch.manual_seed(0)
    x = torch.rand(16, 3, 32, 32)
    model = _trained(SMALL_MODELS[name](), x)
    model.eval()
    before = model(x)
    n0 = count_parameters(model)
    deepen(model, block, data=[torch.rand(16, 3, 32, 32) for _ in range(2)])
    model.eval()
    assert count_parameters(model) > n0
    assert torch.allclose(model(x), before, atol=1e-5)
    # training continues: loss goes down on a fixed batch
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    y = torch.arange(16) % 10
    losses = []
    for _ in range(15):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_repeated_deepening_and_nothing():
    torch.manual_seed(1)
    x = torch.rand(8, 3, 32, 32)
    model = _trained(SMALL_MODELS["convnet2"](), x).eval()
    before = model(x)
    for b in (0, 0, 1, 2, NOTHING):
        deepen(model, b)
    model.eval()
    assert torch.allclose(model(x), before, atol=1e-5)
    assert len(model.g0) == 3 and len(model.g1) == 2 and len(model.g2) == 2


@pytest.mark.parametrize("stage", [0, 3])
def test_resnet18_deepening_preserves_function(stage):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    x = torch.rand(4, 3, 32, 32)
    model = _trained(model, x, steps=1).eval()
    before = model(x)
    n0 = count_parameters(model)
    deepen(model, stage)
    model.eval()
    assert count_parameters(model) > n0
    assert torch.allclose(model(x), before, atol=1e-5)


def test_bad_blocks_are_refused():
    with pytest.raises(ValueError):
        deepen(SMALL_MODELS["convnet3"](), 7)
    with pytest.raises(ValueError):
        deepen(torchvision.models.resnet18(), 4)
