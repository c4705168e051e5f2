"""The handwritten digits, a real dataset that ships with hetune (no download), in the CIFAR format.

``real/data/digits.csv.gz`` is scikit-learn 1.9.1's copy (``sklearn/datasets/data/digits.csv.gz``,
57 KB; its source and licence: real/data/DIGITS.md): 1,797 8x8 images of the digits 0-9, pixels 0-16,
from the UCI "Optical Recognition of Handwritten Digits" test set. ``write_digits`` converts it once
into the CIFAR-10 python-pickle layout (``DIR/digits-batches-py/data_batch_1``, ``test_batch``:
32x32 RGB uint8, each pixel a 4x4 block, grey), so that trials read it with the CIFAR loader and no
process imports scikit-learn.

Why label noise. As shipped the task is too easy to show what PBT is for: a ResNet-18 at batch 8
reaches 0.96 at a constant lr by iteration 300, as high as an lr drop gives (issue "The learning model
fitted and checked"). A share of the training labels is replaced by random digits (the test labels
stay clean): the gradient noise at a constant lr then holds the network below what an lr drop reaches,
the noise floor of the noisy quadratic model, as label noise does in real training. The measured gap
is in results/digits/.
"""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).resolve().parent / "data" / "digits.csv.gz"
FOLDER = "digits-batches-py"
IMAGES = 1797


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """(images (1797, 32, 32, 3) uint8, labels (1797,) int64) in the file's order."""
    with gzip.open(SOURCE, "rt") as fh:
        raw = np.loadtxt(fh, delimiter=",")
    x8 = raw[:, :64].reshape(-1, 8, 8) / 16.0
    x32 = np.kron(x8, np.ones((4, 4)))  # each pixel a 4x4 block: the 32x32 input the CIFAR networks take
    images = (np.repeat(x32[:, :, :, None], 3, axis=3) * 255).round().astype(np.uint8)
    return images, raw[:, 64].astype(np.int64)


def write_digits(data_dir: str | Path, test: int = 500, label_noise: float = 0.4, seed: int = 0) -> Path:
    """Write the digits as a CIFAR-format folder; return ``data_dir``.

    Args:
        data_dir: where to create ``digits-batches-py``.
        test: images held out as the test set (clean labels); the rest train.
        label_noise: share of training labels replaced by a uniformly drawn digit (which may be the
            true one), in [0, 1).
        seed: seed of the split and of the noise.
    """
    if not 0 < test < IMAGES:
        raise ValueError(f"test must be in (0, {IMAGES}), got {test}")
    if not 0 <= label_noise < 1:
        raise ValueError(f"label_noise must be in [0, 1), got {label_noise}")
    x, y = load_digits()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    x, y = x[order], y[order].copy()
    xte, yte, xtr, ytr = x[:test], y[:test], x[test:], y[test:]
    flip = rng.random(len(ytr)) < label_noise
    ytr[flip] = rng.integers(0, 10, int(flip.sum()))
    root = Path(data_dir) / FOLDER
    root.mkdir(parents=True, exist_ok=True)
    for name, xs, ys in (("data_batch_1", xtr, ytr), ("test_batch", xte, yte)):
        with (root / name).open("wb") as fh:
            pickle.dump({b"data": xs.transpose(0, 3, 1, 2).reshape(len(ys), -1), b"labels": ys.tolist()}, fh)
    return Path(data_dir)
