"""CIFAR-10/100 from the standard python-pickle folders in a local directory (no download).

Expected layout (the archives from https://www.cs.toronto.edu/~kriz/cifar.html, unpacked):
    DIR/cifar-10-batches-py/data_batch_1 .. data_batch_5, test_batch
    DIR/cifar-100-python/train, test
``write_synthetic`` writes a small folder in the same format with a learnable
signal (the class shifts one colour channel and draws a class-specific stripe), for tests and smoke runs.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from hetune.sim.errors import ConfigError

# "digits": the handwritten digits hetune ships, written in this layout by real/digits.py
FOLDERS = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python", "digits": "digits-batches-py"}
FILES = {"cifar10": (["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5"], ["test_batch"]),
         "cifar100": (["train"], ["test"]), "digits": (["data_batch_1"], ["test_batch"])}
LABEL_KEY = {"cifar10": b"labels", "cifar100": b"fine_labels", "digits": b"labels"}
URL = {"cifar10": "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
       "cifar100": "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
       "digits": "(none: hetune writes it, real/digits.py)"}


def _read(path: Path, dataset: str) -> tuple[np.ndarray, np.ndarray]:
    try:
        with path.open("rb") as fh:
            d = pickle.load(fh, encoding="bytes")
        data = np.asarray(d[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        labels = np.asarray(d[LABEL_KEY[dataset]], dtype=np.int64)
    except (OSError, pickle.UnpicklingError, KeyError, ValueError, EOFError) as exc:
        raise ConfigError(str(path), "", f"not a CIFAR python batch ({type(exc).__name__})") from None
    return data, labels


def load_cifar(data_dir: str | Path, dataset: str, split: str = "train",
               limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 32, 32, 3) uint8 and labels (N,) of one split.

    Args:
        data_dir: the directory holding the CIFAR python folder.
        dataset: "cifar10" or "cifar100".
        split: "train" or "test".
        limit: keep only the first ``limit`` samples.
    """
    root = Path(data_dir).expanduser() / FOLDERS[dataset]
    train, test = FILES[dataset]
    names = train if split == "train" else test
    missing = [n for n in names if not (root / n).is_file()]
    if missing:
        raise ConfigError("--data-dir", "", f"no {dataset} python folder at {root} (missing {missing[0]}); "
                          f"download {URL[dataset]} and unpack it into {Path(data_dir).expanduser()}")
    parts = [_read(root / n, dataset) for n in names]
    x = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    return (x[:limit], y[:limit]) if limit else (x, y)


def write_synthetic(data_dir: str | Path, dataset: str = "cifar10", train: int = 2000, test: int = 500,
                    seed: int = 0, signal: float = 1.0) -> Path:
    """Write a small CIFAR-format folder with a learnable signal; return the data directory.

    Args:
        data_dir: where to create the folder.
        dataset: "cifar10" or "cifar100".
        train: training samples.
        test: test samples.
        seed: seed of the images.
        signal: strength of the class signal (1 = easy; smaller is harder to learn).
    """
    rng = np.random.default_rng(seed)
    classes = 10 if dataset == "cifar10" else 100
    root = Path(data_dir) / FOLDERS[dataset]
    root.mkdir(parents=True, exist_ok=True)

    def make(n: int) -> dict:
        labels = rng.integers(0, classes, n)
        x: np.ndarray = rng.integers(0, 96, (n, 3, 32, 32)).astype(np.int64)
        for c in range(classes):
            m = labels == c
            x[m, c % 3] += int(signal * (80 + 10 * (c // 3)))  # class-dependent colour
            x[m, :, (c * 3) % 32, :] += int(signal * 100)  # class-dependent stripe
        x = np.clip(x, 0, 255).astype(np.uint8).reshape(n, -1)
        return {b"data": x, LABEL_KEY[dataset]: labels.tolist()}

    train_files, test_files = FILES[dataset]
    per = max(1, train // len(train_files))
    for name in train_files:
        with (root / name).open("wb") as fh:
            pickle.dump(make(per), fh)
    for name in test_files:
        with (root / name).open("wb") as fh:
            pickle.dump(make(test), fh)
    return Path(data_dir)
