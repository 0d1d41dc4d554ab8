"""The MNIST CNN of the CryptoNets/E2DM/GMPFHE benchmark, in plain numpy: forward pass,
training, and the weights file format.

Architecture (E2DM, reused by CDKS and GMPFHE §6.2.1; research notes ``ckks.md`` §1.1):

==========  ===========================================================================
input       28×28 image, pixel values / 255 (floats in [0, 1])
conv        5 kernels 4×4, stride 2, no padding, **no bias** → 5×13×13 = 845 values
act 1       x²
FC-1        845 → 64, plus bias; input index of conv output (channel c, row i, column j)
            is ``c + 5·(13·i + j)`` (channel-fastest flatten, as in the CKKS packing)
act 2       x²
FC-2        64 → 10, plus bias; the class is the argmax of the 10 logits
==========  ===========================================================================

This module is the plaintext reference of the encrypted evaluation: everything is computed in
float64, and nothing here is secret-dependent or encrypted. The convolution is an im2col matrix
product (patches of all images at once), so neither inference nor training loops over images.

Weights file (``.npz`` written with ``np.savez_compressed``, read with ``allow_pickle=False``):

============  =========================================================================
key           content
============  =========================================================================
``format``    0-d string array ``"shaper-mnist-cnn/1"`` (the format and its version)
``conv``      (5, 4, 4) kernels: ``conv[c, u, v]`` multiplies pixel (2i + u, 2j + v)
``fc1_w``     (64, 845), column ``c + 5·(13·i + j)`` reads conv output (c, i, j)
``fc1_b``     (64,)
``fc2_w``     (10, 64)
``fc2_b``     (10,)
``training``  optional 0-d string: JSON of the training settings (seed, epochs, shift,
              learning rate, data file and its sha256, numpy version, wall time)
``test_accuracy``  optional 0-d float64: accuracy on the 10,000-image test set
============  =========================================================================

The weight arrays are float64, or float32 for a smaller file (``save(..., dtype=np.float32)``);
a loaded model always computes in float64 with the stored values. The bundled weights
(``data/mnist-cnn.npz``, :func:`bundled`) are float32 and were made by
``shaper cnn train --out PATH`` (see ``data/README.md``: command, accuracy, value ranges).
"""

from __future__ import annotations

import json
import math
import os
import time
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ...errors import DivergenceError, SerializationError
from ...files import atomic_file, remove_stale

FORMAT = "shaper-mnist-cnn/1"
SIDE = 28
KERNELS = 5
KERNEL = 4
STRIDE = 2
OUT_SIDE = (SIDE - KERNEL) // STRIDE + 1  # 13
CONV_OUT = KERNELS * OUT_SIDE * OUT_SIDE  # 845
HIDDEN = 64
CLASSES = 10
BUNDLED_FILE = Path(__file__).resolve().parent / "data" / "mnist-cnn.npz"

SHAPES: dict[str, tuple[int, ...]] = {
    "conv": (KERNELS, KERNEL, KERNEL),
    "fc1_w": (HIDDEN, CONV_OUT),
    "fc1_b": (HIDDEN,),
    "fc2_w": (CLASSES, HIDDEN),
    "fc2_b": (CLASSES,),
}

# Training defaults, fixed after tuning on the 5,000-image subset (data/README.md).
EPOCHS = 60
BATCH_SIZE = 64
LEARNING_RATE = 4e-3
SHIFT = 2

Progress = Callable[[int, int, float, float], None]


@dataclass(frozen=True, eq=False)
class CnnModel:
    """Weights of the benchmark CNN (shapes in the module docstring; float64 copies are made).

    ``training`` (settings a model was trained with) and ``test_accuracy`` are optional notes
    that :meth:`save` stores and :meth:`load` returns; they take no part in the computation.
    Compare two models' weights with :meth:`same_weights` (``==`` is identity).
    """

    conv: np.ndarray
    fc1_w: np.ndarray
    fc1_b: np.ndarray
    fc2_w: np.ndarray
    fc2_b: np.ndarray
    training: Mapping[str, Any] | None = field(default=None, repr=False)
    test_accuracy: float | None = None

    def __post_init__(self) -> None:
        for name, shape in SHAPES.items():
            value = getattr(self, name)
            try:
                array = np.array(value, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{name}: cannot be read as float64 numbers ({exc})") from None
            if array.shape != shape:
                raise ValueError(f"{name}: shape {array.shape}, expected {shape}")
            if not np.isfinite(array).all():
                raise ValueError(f"{name}: contains NaN or infinite values")
            array.setflags(write=False)
            object.__setattr__(self, name, array)
        if self.test_accuracy is not None:
            object.__setattr__(self, "test_accuracy", float(self.test_accuracy))

    # -- inference ------------------------------------------------------------------------

    def layers(self, images: np.ndarray) -> dict[str, np.ndarray]:
        """Every layer's output for ``images`` ((m, 28, 28) or one (28, 28) image, floats in
        [0, 1]): ``"conv"`` (m, 5, 13, 13), ``"act1"`` (m, 5, 13, 13), ``"fc1"`` (m, 64),
        ``"act2"`` (m, 64), ``"logits"`` (m, 10); m = 1 for a single image."""
        x = _check_images(images)
        conv, act1, fc1, act2, logits = _forward(self._weights(), _patches(x))
        as_maps = lambda a: a.reshape(-1, OUT_SIDE, OUT_SIDE, KERNELS).transpose(0, 3, 1, 2)  # noqa: E731
        return {
            "conv": as_maps(conv),
            "act1": as_maps(act1),
            "fc1": fc1,
            "act2": act2,
            "logits": logits,
        }

    def forward(self, images: np.ndarray) -> np.ndarray:
        """Logits (m, 10) for ``images`` ((m, 28, 28) or (28, 28), floats in [0, 1])."""
        return _forward(self._weights(), _patches(_check_images(images)))[-1]

    def predict(self, images: np.ndarray) -> np.ndarray:
        """Predicted digits (m,) ``int64``: the argmax of the logits."""
        return np.argmax(self.forward(images), axis=1)

    def accuracy(self, images: np.ndarray, labels: np.ndarray) -> float:
        """Fraction of ``images`` whose predicted digit equals ``labels`` (ints 0..9)."""
        x = _check_images(images)
        y = _check_labels(labels, len(x))
        return float(np.mean(self.predict(x) == y))

    def rounded(self, dtype: type | np.dtype) -> CnnModel:
        """The model with its weights rounded to ``dtype`` (what a file of that dtype holds)."""
        return replace(self, **{k: getattr(self, k).astype(dtype).astype(np.float64) for k in SHAPES})

    def same_weights(self, other: CnnModel) -> bool:
        """True when both models have bit-identical weights (notes are not compared)."""
        return all(np.array_equal(getattr(self, k), getattr(other, k)) for k in SHAPES)

    def _weights(self) -> dict[str, np.ndarray]:
        return {k: getattr(self, k) for k in SHAPES}

    # -- storage --------------------------------------------------------------------------

    def save(
        self,
        path: str | os.PathLike,
        *,
        overwrite: bool = False,
        dtype: type | np.dtype = np.float64,
    ) -> Path:
        """Write the weights file described in the module docstring and return its path.

        ``dtype`` float64 (exact round trip) or float32 (half the size; values rounded).
        Refuses to replace an existing file unless ``overwrite=True``.
        """
        target = Path(path)
        dt = np.dtype(dtype)
        if dt not in (np.dtype(np.float64), np.dtype(np.float32)):
            raise ValueError(f"dtype must be float64 or float32, not {dt}")
        if target.exists() and not overwrite:
            raise FileExistsError(f"{str(target)!r} exists; pass overwrite=True to replace it")
        arrays: dict[str, np.ndarray] = {"format": np.array(FORMAT)}
        arrays.update({k: getattr(self, k).astype(dt) for k in SHAPES})
        if self.training is not None:
            arrays["training"] = np.array(json.dumps(dict(self.training), sort_keys=True))
        if self.test_accuracy is not None:
            arrays["test_accuracy"] = np.array(self.test_accuracy, dtype=np.float64)
        # np.savez_compressed appends ".npz" to names without it; write through a handle so
        # the file is exactly ``target``. The handle is a temporary sibling, fsynced and renamed
        # over ``target``: a crash or a full disk leaves the previous file whole.
        with atomic_file(target, private=False) as handle:
            np.savez_compressed(handle, **arrays)  # type: ignore[arg-type]
        return target

    @classmethod
    def load(cls, path: str | os.PathLike) -> CnnModel:
        """Read a weights file written by :meth:`save`. Raises ``SerializationError`` naming
        the problem: not an npz file, wrong or missing ``format``, a missing key, a wrong shape
        or dtype, non-finite values, unreadable ``training`` JSON; and, before anything large is
        allocated, a file or member larger than a weights file can be (a zip bomb), too many
        members, or an array header announcing an object dtype or a shape other than expected
        (checked from the zip directory and the array headers, never unpickled)."""
        source = Path(path)
        name = str(source)
        remove_stale(source.parent, source.name)  # a temporary of a save that was killed
        npz = _read_npz(source, name)
        keys = set(npz)
        if "format" not in keys:
            raise SerializationError(f"{name!r}: missing key 'format' (expected {FORMAT!r})")
        fmt = npz["format"]
        if fmt.shape != () or fmt.dtype.kind != "U" or str(fmt) != FORMAT:
            raise SerializationError(f"{name!r}: format is {_short(fmt)}, expected {FORMAT!r}")
        weights: dict[str, np.ndarray] = {}
        for key in SHAPES:
            if key not in keys:
                raise SerializationError(f"{name!r}: missing key {key!r}")
            array = npz[key]
            if not np.isfinite(array).all():
                raise SerializationError(f"{name!r}: {key} contains NaN or infinite values")
            weights[key] = array.astype(np.float64)
        training = None
        if "training" in keys:
            try:
                training = json.loads(str(npz["training"]))
            except (ValueError, TypeError) as exc:
                raise SerializationError(f"{name!r}: 'training' is not a JSON string ({exc})") from None
            if not isinstance(training, dict):
                raise SerializationError(f"{name!r}: 'training' is not a JSON object")
        test_accuracy = None
        if "test_accuracy" in keys:
            value = npz["test_accuracy"]
            if value.shape != () or value.dtype.kind != "f" or not 0 <= value <= 1:
                raise SerializationError(
                    f"{name!r}: test_accuracy is {_short(value)}, expected a number in [0, 1]"
                )
            test_accuracy = float(value)
        return cls(**weights, training=training, test_accuracy=test_accuracy)


# -- reading a weights file without trusting it ---------------------------------------------

#: a weights file is ~0.5 MB (float64); anything much larger is not one
MAX_FILE_BYTES = 64 << 20
#: the keys of the format plus a little room for keys a later version may add
MAX_MEMBERS = 16
#: room for a .npy header (numpy writes 128 bytes for these arrays)
NPY_HEADER_ROOM = 4096
#: characters of the ``training`` note and of ``format``
MAX_NOTE_CHARS = 1 << 18
_FLOATS = (np.dtype(np.float64), np.dtype(np.float32))


def _member_limit(key: str) -> int | None:
    """The largest uncompressed size member ``key`` may have (None: a key this version ignores)."""
    if key in SHAPES:
        return NPY_HEADER_ROOM + math.prod(SHAPES[key]) * 8
    if key in ("format", "training"):
        return NPY_HEADER_ROOM + MAX_NOTE_CHARS * 4
    if key == "test_accuracy":
        return NPY_HEADER_ROOM + 16
    return None


def _check_header(name: str, key: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise SerializationError(f"{name!r}: {key} has dtype {dtype.str!r}; only plain numbers and strings are read")
    if key in SHAPES:
        if dtype not in _FLOATS:
            raise SerializationError(f"{name!r}: {key} has dtype {dtype}, expected float64 or float32")
        if tuple(shape) != SHAPES[key]:
            raise SerializationError(f"{name!r}: {key} has shape {tuple(shape)}, expected {SHAPES[key]}")
    elif shape != ():
        raise SerializationError(f"{name!r}: {key} has shape {tuple(shape)}, expected a single value")
    nbytes = math.prod(shape) * dtype.itemsize
    limit = _member_limit(key)
    if limit is not None and nbytes > limit:
        raise SerializationError(f"{name!r}: {key} announces {nbytes:,} bytes, at most {limit:,} expected")


def _zip_entries(fh: Any, size: int) -> int | None:
    """The entry count a zip's end record declares (None when there is no record to read)."""
    tail_len = min(size, 22 + 0xFFFF)
    fh.seek(size - tail_len)
    tail = fh.read(tail_len)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        return None
    total = int.from_bytes(tail[at + 10:at + 12], "little")
    if total != 0xFFFF or at < 20 or tail[at - 20:at - 16] != b"PK\x06\x07":
        return total
    offset = int.from_bytes(tail[at - 12:at - 4], "little")  # of the zip64 end record
    if offset + 56 > size:
        return None
    fh.seek(offset)
    record = fh.read(56)
    if record[:4] != b"PK\x06\x06":
        return None
    return int.from_bytes(record[32:40], "little")


def _read_npz(source: Path, name: str) -> dict[str, np.ndarray]:
    """The arrays of the keys this format reads, each checked by its zip entry and its .npy
    header before its data is decompressed (module docstring: the keys)."""
    size = source.stat().st_size  # FileNotFoundError as it is
    if size > MAX_FILE_BYTES:
        raise SerializationError(f"{name!r} is {size:,} bytes; a CNN weights file is at most {MAX_FILE_BYTES:,}")
    with open(source, "rb") as fh:
        magic = fh.read(6)
        if magic == b"\x93NUMPY":
            raise SerializationError(f"{name!r} holds a single array, not a CNN weights .npz")
        entries = _zip_entries(fh, size)
        if entries is not None and entries > MAX_MEMBERS:
            raise SerializationError(f"{name!r} has {entries:,} members; a CNN weights file has at most {MAX_MEMBERS}")
        fh.seek(0)
        try:
            archive = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise SerializationError(f"{name!r} is not a readable .npz file ({exc})") from None
        with archive:
            infos = archive.infolist()
            if len(infos) > MAX_MEMBERS:
                raise SerializationError(f"{name!r} has {len(infos):,} members; a CNN weights file has at most "
                                         f"{MAX_MEMBERS}")
            members: dict[str, zipfile.ZipInfo] = {}
            for info in infos:
                key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                limit = _member_limit(key)
                if limit is None:
                    continue  # not read
                if key in members:
                    raise SerializationError(f"{name!r}: key {key!r} appears twice")
                if info.file_size > limit:
                    raise SerializationError(
                        f"{name!r}: member {info.filename!r} declares {info.file_size:,} bytes uncompressed, at most "
                        f"{limit:,} expected (a zip bomb or not a CNN weights file)")
                members[key] = info
            return {key: _read_member(archive, info, name, key) for key, info in members.items()}


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str, key: str) -> np.ndarray:
    try:
        with archive.open(info) as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f, max_header_size=NPY_HEADER_ROOM)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f, max_header_size=NPY_HEADER_ROOM)
            else:
                raise ValueError(f".npy version {version} is not read")
            _check_header(name, key, shape, dtype)
            nbytes = math.prod(shape) * dtype.itemsize
            data = f.read(nbytes)
    except SerializationError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error, SyntaxError) as exc:
        raise SerializationError(f"{name!r}: key {key!r} unreadable ({exc})") from None
    if len(data) != nbytes:
        raise SerializationError(f"{name!r}: key {key!r} is truncated ({len(data):,} of {nbytes:,} bytes)")
    array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return array.copy()


def bundled() -> CnnModel:
    """The weights shipped with the package (``data/mnist-cnn.npz``; trained on the 5,000-image
    MNIST subset with ±2-pixel shifts; accuracy and value ranges in ``data/README.md``)."""
    return CnnModel.load(BUNDLED_FILE)


# -- the computation ----------------------------------------------------------------------


def _check_images(images: np.ndarray) -> np.ndarray:
    x = np.asarray(images)
    if x.dtype.kind not in "fiub":
        raise ValueError(f"images must be numbers, not dtype {x.dtype}")
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3 or x.shape[1:] != (SIDE, SIDE):
        raise ValueError(
            f"images must have shape (m, {SIDE}, {SIDE}) or ({SIDE}, {SIDE}), not {np.shape(images)}"
        )
    if len(x) == 0:
        raise ValueError("images is empty (m = 0)")
    x = x.astype(np.float64, copy=False)
    if not np.isfinite(x).all():
        raise ValueError("images contain NaN or infinite values")
    if x.min() < 0 or x.max() > 1:
        raise ValueError(
            f"pixel values must be in [0, 1] (divide uint8 images by 255); found "
            f"[{x.min():g}, {x.max():g}]"
        )
    return x


def _check_labels(labels: np.ndarray, m: int) -> np.ndarray:
    y = np.asarray(labels)
    if y.ndim != 1:
        raise ValueError(f"labels must be a 1-d array, not shape {y.shape}")
    if len(y) != m:
        raise ValueError(f"{len(y)} labels for {m} images")
    if y.dtype.kind == "f":
        if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
            raise ValueError("labels must be integers 0..9")
    elif y.dtype.kind not in "iub":
        raise ValueError(f"labels must be integers 0..9, not dtype {y.dtype}")
    y = y.astype(np.int64)
    if m and (y.min() < 0 or y.max() >= CLASSES):
        raise ValueError(f"labels must be digits 0..9; found {y.min()}..{y.max()}")
    return y


def _patches(x: np.ndarray) -> np.ndarray:
    """im2col: (m, 169, 16) float64, row 13·i + j holds the 4×4 patch at (2i, 2j) row-major."""
    windows = np.lib.stride_tricks.sliding_window_view(x, (KERNEL, KERNEL), axis=(1, 2))
    windows = windows[:, ::STRIDE, ::STRIDE]  # (m, 13, 13, 4, 4)
    return windows.reshape(len(x), OUT_SIDE * OUT_SIDE, KERNEL * KERNEL)


def _forward(w: Mapping[str, np.ndarray], patches: np.ndarray) -> tuple[np.ndarray, ...]:
    """Layer outputs in the flat layout: conv and act1 (m, 845) channel-fastest, fc1, act2
    (m, 64), logits (m, 10)."""
    m = len(patches)
    # (m, 169, 16) @ (16, 5) -> (m, 169, 5); flattening gives index 5·(13·i + j) + c.
    conv = (patches @ w["conv"].reshape(KERNELS, -1).T).reshape(m, CONV_OUT)
    act1 = conv * conv
    fc1 = act1 @ w["fc1_w"].T + w["fc1_b"]
    act2 = fc1 * fc1
    logits = act2 @ w["fc2_w"].T + w["fc2_b"]
    return conv, act1, fc1, act2, logits


def _loss_and_gradients(
    w: Mapping[str, np.ndarray], patches: np.ndarray, y: np.ndarray
) -> tuple[float, int, dict[str, np.ndarray]]:
    """Mean cross-entropy of softmax(logits), correct count, and gradients of the loss."""
    m = len(patches)
    conv, act1, fc1, act2, logits = _forward(w, patches)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_prob = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -float(log_prob[np.arange(m), y].mean())
    correct = int(np.count_nonzero(np.argmax(logits, axis=1) == y))

    d_logits = np.exp(log_prob)
    d_logits[np.arange(m), y] -= 1.0
    d_logits /= m
    grads = {"fc2_w": d_logits.T @ act2, "fc2_b": d_logits.sum(axis=0)}
    d_fc1 = 2.0 * fc1 * (d_logits @ w["fc2_w"])
    grads["fc1_w"] = d_fc1.T @ act1
    grads["fc1_b"] = d_fc1.sum(axis=0)
    d_conv = (2.0 * conv * (d_fc1 @ w["fc1_w"])).reshape(m, OUT_SIDE * OUT_SIDE, KERNELS)
    grads["conv"] = np.einsum("mpc,mpk->ck", d_conv, patches).reshape(SHAPES["conv"])
    return loss, correct, grads


def _shifted(x: np.ndarray, shift: int, rng: np.random.Generator) -> np.ndarray:
    """Each image moved by its own random (dy, dx) in [-shift, shift]², zero-filled at the
    edges (a crop of the zero-padded image, so ink never wraps around)."""
    if shift == 0:
        return x
    m = len(x)
    padded = np.pad(x, ((0, 0), (shift, shift), (shift, shift)))
    offsets = rng.integers(0, 2 * shift + 1, size=(m, 2))
    rows = offsets[:, 0, None] + np.arange(SIDE)  # (m, 28)
    cols = offsets[:, 1, None] + np.arange(SIDE)
    return padded[np.arange(m)[:, None, None], rows[:, :, None], cols[:, None, :]]


def _initial_weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Scaled normal (Glorot-style, std = sqrt(1 / fan_in)); biases zero."""
    fan_in = KERNEL * KERNEL
    return {
        "conv": rng.normal(0.0, np.sqrt(1.0 / fan_in), SHAPES["conv"]),
        "fc1_w": rng.normal(0.0, np.sqrt(1.0 / CONV_OUT), SHAPES["fc1_w"]),
        "fc1_b": np.zeros(HIDDEN),
        "fc2_w": rng.normal(0.0, np.sqrt(1.0 / HIDDEN), SHAPES["fc2_w"]),
        "fc2_b": np.zeros(CLASSES),
    }


def train(
    images: np.ndarray,
    labels: np.ndarray,
    *,
    epochs: int = EPOCHS,
    batch_size: int = BATCH_SIZE,
    learning_rate: float = LEARNING_RATE,
    shift: int = SHIFT,
    seed: int = 0,
    progress: Progress | None = None,
) -> CnnModel:
    """Train the CNN on ``images`` ((m, 28, 28) floats in [0, 1]) and ``labels`` (m,) 0..9.

    Mini-batch Adam (β = 0.9, 0.999) on the mean cross-entropy of softmax(logits); the learning
    rate follows a cosine from ``learning_rate`` down to 2 % of it over all steps. Each epoch
    shuffles the images and moves each one by a random (dy, dx) in [-shift, shift]² (zero-filled
    crop of the padded image). Everything random comes from ``np.random.default_rng(seed)``, so
    the same inputs and seed give bit-identical weights on the same machine and numpy.

    ``progress(epoch, epochs, loss, train_accuracy)`` is called after every epoch (epoch counts
    from 1; loss and accuracy are averaged over that epoch's shifted batches). Raises
    ``DivergenceError`` when the loss becomes NaN or infinite.
    """
    x = _check_images(images)
    y = _check_labels(labels, len(x))
    for name, value, low in (("epochs", epochs, 1), ("batch_size", batch_size, 1), ("shift", shift, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, not {value!r}")
    if not (np.isfinite(learning_rate) and learning_rate > 0):
        raise ValueError(f"learning_rate must be a positive number, not {learning_rate!r}")
    if shift >= SIDE:
        raise ValueError(f"shift must be below {SIDE}, not {shift}")

    rng = np.random.default_rng(seed)
    w = _initial_weights(rng)
    first = {k: np.zeros_like(v) for k, v in w.items()}
    second = {k: np.zeros_like(v) for k, v in w.items()}
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    m = len(x)
    steps_per_epoch = -(-m // batch_size)
    total_steps = epochs * steps_per_epoch
    step = 0
    started = time.perf_counter()
    for epoch in range(1, epochs + 1):
        order = rng.permutation(m)
        moved = _shifted(x[order], shift, rng)
        targets = y[order]
        loss_sum = 0.0
        correct = 0
        for start in range(0, m, batch_size):
            batch = slice(start, start + batch_size)
            # Overflow shows up as a non-finite loss, which is reported below.
            with np.errstate(over="ignore", invalid="ignore"):
                loss, hits, grads = _loss_and_gradients(w, _patches(moved[batch]), targets[batch])
            if not np.isfinite(loss):
                raise DivergenceError(
                    f"training diverged: loss is {loss} at epoch {epoch}, step {step + 1}; "
                    f"try a smaller learning_rate than {learning_rate:g}"
                )
            loss_sum += loss * len(targets[batch])
            correct += hits
            rate = learning_rate * (0.02 + 0.98 * 0.5 * (1 + np.cos(np.pi * step / total_steps)))
            step += 1
            correction1 = 1 - beta1**step
            correction2 = 1 - beta2**step
            for k, g in grads.items():
                first[k] = beta1 * first[k] + (1 - beta1) * g
                second[k] = beta2 * second[k] + (1 - beta2) * g * g
                w[k] = w[k] - rate * (first[k] / correction1) / (
                    np.sqrt(second[k] / correction2) + eps
                )
        if progress is not None:
            progress(epoch, epochs, loss_sum / m, correct / m)
    settings = {
        "seed": int(seed) if isinstance(seed, (int, np.integer)) else repr(seed),
        "epochs": int(epochs),
        "batch_size": int(batch_size),
        "learning_rate": float(learning_rate),
        "schedule": "cosine to 2% of learning_rate, Adam(0.9, 0.999, 1e-8)",
        "shift": int(shift),
        "images": int(m),
        "numpy": np.__version__,
        "seconds": round(time.perf_counter() - started, 1),
    }
    return CnnModel(**w, training=settings)


def _short(value: np.ndarray) -> str:
    text = repr(value.tolist()) if value.size <= 4 else f"an array of shape {value.shape}"
    return text if len(text) <= 80 else text[:77] + "..."


if __name__ == "__main__":  # the old spelling of ``shaper cnn train``, the one front door: run it there
    import subprocess
    import sys

    print("python -m shaper.ml.cnn.model: warning: this spelling is deprecated and goes in the next release; "
          "use shaper cnn train (same options)", file=sys.stderr)
    raise SystemExit(subprocess.call([sys.executable, "-m", "shaper", "cnn", "train", *sys.argv[1:]]))
