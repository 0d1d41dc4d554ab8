"""The packing plan: one MNIST image per CKKS ciphertext (8,192 slots, N = 2^14), the network as
slot products, rotations and rotate-and-add steps.

The plan is written once, as :func:`forward` over a *backend*, and run by four of them:

* :class:`SlotBackend` — numpy on slot vectors (many images at once): the packed evaluation in
  the clear, checked against the direct forward pass of :class:`~shaper.ml.cnn.model.CnnModel`;
* :class:`Tracer` — levels and scales only: which level and scale every weight must be
  encoded/encrypted at, the rotation steps (so the rotation keys are *derived* from the plan),
  and the cost (ciphertext products, rotations, relinearisations, depth);
* :class:`CkksBackend` — the homomorphic evaluation (``shaper.crypto.ckks``), with the image
  and the model each encrypted or in the clear (not both in the clear);
* :class:`BoundBackend` — worst-case error bounds (``shaper.crypto.ckks.bounds``) of that
  evaluation, operation for operation: :func:`output_bound` is what the output's threshold
  decryption floods by.

Slot layout (rot(v, k) moves slot k to slot 0; a *segment* is 1,024 slots, a *block* 128):

* **image** — pixel (2i + a, 2j + b) of the 28×28 image goes to segment 2a + b at offset
  14i + j; that 196-slot picture is written at offsets 196c for c = 0..4 (one copy per output
  channel), and slots 0..4095 are repeated in 4096..8191 so that rotations wrap consistently;
* **conv** — a 4×4 kernel at stride 2 covers 2×2 pixel blocks, i.e. rotations 0, 1, 14, 15 of
  the image. Weight vector m holds kernel_c[2 m_row + a][2 m_col + b] at segment 2a + b, slot
  196c + 14i + j (i, j < 13; zero elsewhere, which masks the 14th row and column). The four
  products summed, then rotate-and-add by 2048 and 1024, leave output (c, i, j) at slot
  196c + 14i + j of every segment;
* **FC-1** (845 → 64) — neuron n owns block n. Weight vector r (r = 0..7) holds, in block n,
  chunk (n + r) mod 8 of neuron n's weights laid out like the conv output; rot(x, 128 r) brings
  chunk (n + r) mod 8 of x to block n, so Σ_r rot(x, 128 r) ⊙ F_r followed by rotate-and-add
  by 1, 2, …, 64 leaves neuron n's pre-activation in slot 128 n (hoisted rotations: the seven
  rotations of x share one decomposition). Bias b_n at slot 128 n;
* **FC-2** (64 → 10) — h_n sits in slot 128 n with partial sums around it. Weight vector k
  (k = 0..9) holds FC2[k][n] at slot 128 n + k and zeros elsewhere, so Σ_k rot(h, −k) ⊙ V_k
  (the nine rotations hoisted) puts FC2[k][n] h_n at 128 n + k and clears everything else: the
  weights are the mask, and no level is spent on one. Rotate-and-add by 128, 256, …, 4096 sums
  the 64 blocks. Logit k is then in slot k *and* in slot 128 n + k of every block (the bias is
  written in every block too, so the 64 copies are equal and the decrypted slots carry the
  logits and nothing else of the model).

Cost (from :func:`trace`): 24 ciphertext products, 34 rotations (19 of them hoisted), 5
relinearisations with lazy relinearisation (products summed as 3-component ciphertexts,
relinearised once per layer), depth 5, 28 distinct rotation steps. The E2DM/KKLSS packing
spends a sixth level on a plaintext mask before FC-2 (15 products, 29 rotations, depth 6);
folding the mask into the FC-2 weights lets the whole network run one level lower, where every
key switch is cheaper (about 20 % less time per image here). The image is encrypted at level 5
(the plan's depth), whatever the chain's top; every weight at the level where it is consumed
and at the scale q_level of the prime the following rescale drops, so the data's scale survives
each linear layer unchanged; biases at the exact scale of the running ciphertext.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...crypto import ckks
from ...crypto.ckks import bounds as ckks_bounds
from ...errors import ConfigError, ScaleError
from .params import cnn_parameters

SLOTS = 8192
SEGMENT = 1024
BLOCK = 128
CHANNELS, KERNEL, OUT_SIDE, HIDDEN, CLASSES = 5, 4, 13, 64, 10
CONV_STEPS = (1, 14, 15)
FC1_STEPS = tuple(BLOCK * r for r in range(1, 8))
CONV_SUM = (2048, 1024)
BLOCK_SUM = (1, 2, 4, 8, 16, 32, 64)
FC2_STEPS = tuple(-k for k in range(1, 10))
HEAD_SUM = (128, 256, 512, 1024, 2048, 4096)

#: the names of the packed model's vectors, in the order the plan consumes them
WEIGHT_NAMES = (*(f"conv{m}" for m in range(4)), *(f"fc1_{r}" for r in range(8)), "fc1_bias",
                *(f"fc2_{k}" for k in range(10)), "fc2_bias")


# -- layout ------------------------------------------------------------------------------------

def _image_layout() -> tuple[np.ndarray, np.ndarray]:
    """(slot, pixel) index pairs: where each pixel of a flattened 28x28 image is written."""
    i, j, a, b, c = np.meshgrid(np.arange(14), np.arange(14), np.arange(2), np.arange(2), np.arange(CHANNELS),
                                indexing="ij")
    slot = SEGMENT * (2 * a + b) + 196 * c + 14 * i + j
    pixel = 28 * (2 * i + a) + (2 * j + b)
    slot, pixel = slot.ravel(), pixel.ravel()
    return np.concatenate([slot, slot + SLOTS // 2]), np.concatenate([pixel, pixel])


IMAGE_SLOTS, IMAGE_PIXELS = _image_layout()
# conv output (c, i, j) sits at offset 196c + 14i + j of a segment; FC-1 input index c + 5(13i + j)
_C, _I, _J = np.meshgrid(np.arange(CHANNELS), np.arange(OUT_SIDE), np.arange(OUT_SIDE), indexing="ij")
CONV_OFFSETS = (196 * _C + 14 * _I + _J).ravel()
FC1_INPUTS = (_C + CHANNELS * (OUT_SIDE * _I + _J)).ravel()


def pack_images(images: Any) -> np.ndarray:
    """(m, 28, 28) pixels in [0, 1] (or one (28, 28) image) -> (m, 8192) slot vectors."""
    x = np.asarray(images, dtype=np.float64)
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3 or x.shape[1:] != (28, 28):
        raise ValueError(f"images must have shape (m, 28, 28) or (28, 28), got {np.shape(images)}")
    if not np.all(np.isfinite(x)) or x.min(initial=0) < 0 or x.max(initial=0) > 1:
        raise ValueError("pixel values must be finite and in [0, 1] (divide uint8 images by 255)")
    out = np.zeros((x.shape[0], SLOTS))
    out[:, IMAGE_SLOTS] = x.reshape(len(x), -1)[:, IMAGE_PIXELS]
    return out


def _spread(segment: np.ndarray) -> np.ndarray:
    """A 1,024-slot segment pattern -> 8192 slots (every segment)."""
    return np.tile(segment, SLOTS // SEGMENT)


def pack_model(model: Any) -> dict[str, np.ndarray]:
    """The model's weights as slot vectors, by name (:data:`WEIGHT_NAMES`)."""
    out: dict[str, np.ndarray] = {}
    conv = np.asarray(model.conv, dtype=np.float64)
    for m, (mr, mc) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
        v = np.zeros(SLOTS)
        for a in range(2):
            for b in range(2):
                # kernel_c[2 mr + a][2 mc + b] for every (c, i, j) of segment 2a + b
                values = np.repeat(conv[:, 2 * mr + a, 2 * mc + b], OUT_SIDE * OUT_SIDE)
                for half in (0, SLOTS // 2):
                    v[half + SEGMENT * (2 * a + b) + CONV_OFFSETS] = values
        out[f"conv{m}"] = v
    rows = np.zeros((HIDDEN, SEGMENT))  # neuron n's weight row laid out like the conv output
    rows[:, CONV_OFFSETS] = np.asarray(model.fc1_w, dtype=np.float64)[:, FC1_INPUTS]
    chunks = rows.reshape(HIDDEN, 8, BLOCK)
    n = np.arange(HIDDEN)
    for r in range(8):
        out[f"fc1_{r}"] = chunks[n, (n + r) % 8].ravel()
    bias = np.zeros((HIDDEN, BLOCK))
    bias[:, 0] = model.fc1_b
    out["fc1_bias"] = bias.ravel()
    fc2 = np.asarray(model.fc2_w, dtype=np.float64)
    for k in range(CLASSES):
        head = np.zeros((HIDDEN, BLOCK))
        head[:, k] = fc2[k]
        out[f"fc2_{k}"] = head.ravel()
    out["fc2_bias"] = np.tile(np.pad(np.asarray(model.fc2_b, dtype=np.float64), (0, BLOCK - CLASSES)), HIDDEN)
    return out


def logits(slots: Any) -> np.ndarray:
    """The ten logits from decrypted output slots ((8192,) or (m, 8192); real parts)."""
    return np.real(np.asarray(slots))[..., :CLASSES]


# -- the plan ----------------------------------------------------------------------------------

#: rotate-and-add steps that fold the logits' 128-slot blocks into 16-slot ones: the output slots
#: are then periodic with period :data:`LABEL_PERIOD` (logit k at every 16 t + k, zeros at
#: 16 t + 10 .. 16 t + 15), so a decryption to a label reads 32 coefficients instead of 256
#: (:func:`shaper.protocols.threshold_ckks.decrypt_argmax`). Rotation keys the plan already has.
LABEL_FOLD = (16, 32, 64)
LABEL_PERIOD = 16


def fold_for_label(be: Any, y: Any) -> Any:
    """The plan's output folded by :data:`LABEL_FOLD` (no level spent: rotations and additions)."""
    for s in LABEL_FOLD:
        y = be.add(y, be.rotate(y, s))
    return y


def forward(be: Any, x: Any) -> Any:
    """The network on one packed input ``x`` with backend ``be`` (see the module docstring)."""
    def rotate_add(y: Any, steps: Iterable[int]) -> Any:
        for s in steps:
            y = be.add(y, be.rotate(y, s))
        return y

    def linear(y: Any, steps: tuple[int, ...], names: list[str]) -> Any:
        """y * W_0 + sum_i rot(y, steps[i]) * W_(i+1): hoisted rotations, one relinearisation."""
        rotated = be.rotate_many(y, steps)
        acc = be.mul(y, names[0])
        for s, name in zip(steps, names[1:], strict=True):
            acc = be.add(acc, be.mul(rotated[s], name))
        return be.finish(acc)

    y = linear(x, CONV_STEPS, [f"conv{m}" for m in range(4)])
    y = be.square(rotate_add(y, CONV_SUM))
    y = linear(y, FC1_STEPS, [f"fc1_{r}" for r in range(8)])
    y = be.square(be.add_weight(rotate_add(y, BLOCK_SUM), "fc1_bias"))
    y = linear(y, FC2_STEPS, [f"fc2_{k}" for k in range(10)])
    y = rotate_add(y, HEAD_SUM)
    return be.add_weight(y, "fc2_bias")


class SlotBackend:
    """The plan in the clear on (m, 8192) slot vectors."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.weights = dict(weights)

    def rotate(self, x: np.ndarray, step: int) -> np.ndarray:
        return np.roll(x, -step, axis=-1)

    def rotate_many(self, x: np.ndarray, steps: Iterable[int]) -> dict[int, np.ndarray]:
        return {s: self.rotate(x, s) for s in steps}

    def mul(self, x: np.ndarray, name: str) -> np.ndarray:
        return x * self.weights[name]

    def add(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return x + y

    def add_weight(self, x: np.ndarray, name: str) -> np.ndarray:
        return x + self.weights[name]

    def finish(self, x: np.ndarray) -> np.ndarray:
        return x

    def square(self, x: np.ndarray) -> np.ndarray:
        return x * x


def packed_forward(model: Any, images: Any) -> np.ndarray:
    """The packed plan evaluated in the clear: (m, 8192) output slots (logits in slots 0..9)."""
    return forward(SlotBackend(pack_model(model)), pack_images(images))


# -- tracing: levels, scales, rotation keys, cost ------------------------------------------------

@dataclass(frozen=True)
class _Sym:
    level: int
    scale: float
    size: int = 2


@dataclass
class Trace:
    """What the plan needs and costs under one parameter set."""

    params: ckks.Parameters
    #: name -> (level, scale) at which the image and each weight must be encoded or encrypted
    specs: dict[str, tuple[int, float]] = field(default_factory=dict)
    rotations: list[int] = field(default_factory=list)  # every rotation in order (hoisted ones too)
    hoisted: int = 0
    products: int = 0  # ciphertext x ciphertext (image and model encrypted)
    relinearizations: int = 0
    rescales: int = 0
    output_level: int = 0
    output_scale: float = 0.0

    @property
    def rotation_steps(self) -> tuple[int, ...]:
        """The distinct rotation steps: exactly the rotation keys the evaluation needs."""
        return tuple(sorted(set(self.rotations), key=lambda s: (s < 0, abs(s))))

    @property
    def depth(self) -> int:
        return self.specs["image"][0] - self.output_level

    def cost(self) -> dict[str, int]:
        return {"ct_ct_products": self.products, "rotations": len(self.rotations), "hoisted_rotations": self.hoisted,
                "rotation_keys": len(self.rotation_steps), "relinearizations": self.relinearizations,
                "rescales": self.rescales, "depth": self.depth}


class Tracer:
    """Runs the plan on levels and scales only (a ciphertext of each level is a :class:`_Sym`)."""

    def __init__(self, params: ckks.Parameters) -> None:
        self.trace = Trace(params)
        self.q = params.moduli

    def _spec(self, name: str, level: int, scale: float) -> None:
        if self.trace.specs.setdefault(name, (level, scale)) != (level, scale):
            raise ScaleError(f"the plan uses weight {name!r} at two levels or scales")

    def rotate(self, x: _Sym, step: int) -> _Sym:
        self.trace.rotations.append(int(step))
        return x

    def rotate_many(self, x: _Sym, steps: Iterable[int]) -> dict[int, _Sym]:
        steps = list(steps)
        self.trace.hoisted += len(steps)
        return {s: self.rotate(x, s) for s in steps}

    def mul(self, x: _Sym, name: str) -> _Sym:
        if x.level == 0:
            raise ScaleError(f"the plan multiplies by {name!r} at level 0: the chain is too short for it")
        scale = float(self.q[x.level])
        self._spec(name, x.level, scale)
        self.trace.products += 1
        return _Sym(x.level, x.scale * scale, 3)

    def add(self, x: _Sym, y: _Sym) -> _Sym:
        if x.level != y.level or not math.isclose(x.scale, y.scale, rel_tol=2 ** -40):
            raise ScaleError(f"the plan adds operands at (level {x.level}, 2^{math.log2(x.scale):.3f}) and "
                             f"(level {y.level}, 2^{math.log2(y.scale):.3f})")
        return _Sym(x.level, x.scale, max(x.size, y.size))

    def add_weight(self, x: _Sym, name: str) -> _Sym:
        self._spec(name, x.level, x.scale)
        return x

    def finish(self, x: _Sym) -> _Sym:
        if x.size == 3:
            self.trace.relinearizations += 1
        self.trace.rescales += 1
        return _Sym(x.level - 1, x.scale / float(self.q[x.level]))

    def square(self, x: _Sym) -> _Sym:
        if x.level == 0:
            raise ScaleError("the plan squares at level 0: the chain is too short for it")
        self.trace.products += 1
        return self.finish(_Sym(x.level, x.scale * x.scale, 3))


#: levels the plan consumes (checked by :func:`trace`)
DEPTH = 5


def trace(params: ckks.Parameters) -> Trace:
    """Levels, scales, rotation keys and cost of the plan under ``params`` (8,192 slots, at least
    :data:`DEPTH` + 1 ciphertext primes). The image enters at level :data:`DEPTH`, so that the
    output lands at level 0 whatever the chain's length (cheaper key switches below the top)."""
    if params.slots != SLOTS:
        raise ConfigError(f"the CNN plan packs one image into {SLOTS} slots (N = 2^14); these parameters have "
                          f"{params.slots}")
    if params.max_level < DEPTH:
        raise ConfigError(f"the CNN needs depth {DEPTH} ({DEPTH + 1} ciphertext primes); these parameters have "
                          f"{params.max_level + 1}")
    t = Tracer(params)
    image = _Sym(DEPTH, float(params.scale))
    t.trace.specs["image"] = (image.level, image.scale)
    out = forward(t, image)
    if out.level != 0:
        raise ScaleError(f"the plan ends at level {out.level}, not 0: DEPTH is out of date")
    t.trace.output_level, t.trace.output_scale = out.level, out.scale
    return t.trace


def rotation_steps(params: ckks.Parameters | None = None) -> tuple[int, ...]:
    """The rotation keys the plan uses (default: the CNN parameters of threshold CKKS)."""
    if params is None:
        params = cnn_parameters()
    return trace(params).rotation_steps


# -- homomorphic evaluation ----------------------------------------------------------------------

class CkksBackend:
    """The plan on CKKS ciphertexts. ``weights`` maps every name of :data:`WEIGHT_NAMES` to a
    ciphertext (model encrypted) or plaintext (model in the clear) at its traced level and scale;
    the input is a ciphertext (image encrypted) or a packed slot vector (image in the clear, the
    model then encrypted). Products are summed unrelinearised and relinearised once per layer."""

    def __init__(self, evaluator: ckks.Evaluator, weights: dict[str, Any], plan: Trace | None = None) -> None:
        self.ev = evaluator
        self.plan = plan or trace(evaluator.params)
        self.weights = dict(weights)
        missing = [n for n in WEIGHT_NAMES if n not in self.weights]
        if missing:
            raise ConfigError(f"the model lacks packed weights {', '.join(missing)}")
        for name in WEIGHT_NAMES:
            w = self.weights[name]
            if not isinstance(w, (ckks.Ciphertext, ckks.Plaintext)):
                raise TypeError(f"weight {name!r} must be a ckks Ciphertext or Plaintext, got {type(w).__name__}")
            level, scale = self.plan.specs[name]
            if w.level != level or not math.isclose(w.scale, scale, rel_tol=2 ** -40):
                raise ScaleError(f"weight {name!r} is at level {w.level}, scale 2^{math.log2(w.scale):.3f}; the plan "
                                 f"needs level {level}, scale 2^{math.log2(scale):.3f} (encrypt it with the CNN's "
                                 "encrypt_model)")

    def rotate(self, x: Any, step: int) -> Any:
        if isinstance(x, np.ndarray):
            return np.roll(x, -step)
        return self.ev.rotate(x, step)

    def rotate_many(self, x: Any, steps: Iterable[int]) -> dict[int, Any]:
        if isinstance(x, np.ndarray):
            return {s: np.roll(x, -s) for s in steps}
        return self.ev.rotate_many(x, steps)

    def mul(self, x: Any, name: str) -> Any:
        w = self.weights[name]
        if isinstance(x, np.ndarray):  # the image in the clear times an encrypted weight
            if not isinstance(w, ckks.Ciphertext):
                raise ConfigError("the image and the model are both in the clear: nothing would be encrypted")
            level, scale = self.plan.specs["image"]
            return self.ev.mul_plain(w, self.ev.encoder.encode(x, level=w.level, scale=scale))
        if isinstance(w, ckks.Plaintext):
            return self.ev.mul_plain(x, w)
        return self.ev.mul(x, w, relinearize=False)

    def add(self, x: Any, y: Any) -> Any:
        if isinstance(x, np.ndarray):
            return x + y
        return self.ev.add(x, y)

    def add_weight(self, x: Any, name: str) -> Any:
        w = self.weights[name]
        return self.ev.add(x, w) if isinstance(w, ckks.Ciphertext) else self.ev.add_plain(x, w)

    def finish(self, x: Any) -> Any:
        return self.ev.rescale(self.ev.relinearize(x))

    def square(self, x: Any) -> Any:
        return self.ev.rescale(self.ev.square(x))


# -- worst-case error bounds --------------------------------------------------------------------

class BoundBackend:
    """The plan on worst-case bounds (:mod:`shaper.crypto.ckks.bounds`), operation for operation
    as :class:`CkksBackend` evaluates it: what the output's error can be at most, to size the
    flooding of its threshold decryption.

    ``model_bound`` declares the weights: one number (every entry of every packed weight vector
    within it in absolute value: max |packed weight|), or a mapping from each name of
    :data:`WEIGHT_NAMES` to a number or a per-slot array of bounds (e.g.
    :func:`slot_bounds`), which the bounds then track slot by slot (:class:`~shaper.crypto.ckks.
    bounds.SlotBound`). ``noise_model`` is the key's :class:`~shaper.crypto.ckks.bounds.
    NoiseModel`. ``encrypt`` names what is encrypted ("image", "model", or both, as
    :class:`CkksBackend`); an encrypted weight is a fresh ciphertext at its traced level and
    scale (``encryption="joint"``: the joint input encryption, or ``"public"``: public-key
    encryption), a weight in the clear a plaintext at that scale. The image is given to
    :func:`forward` as its value bound (a number or per slot; ``image_bound`` is kept as the
    caller's default, :func:`output_bound` passes it): a fresh ciphertext at the plan's image
    level and scale, or a plaintext when in the clear.

    ``activations`` (:func:`activation_bounds`) declares a bound on the values of every
    operation's result: the message bound there is min(propagated, scale x declared). Such a
    bound holds for inputs like the data it was computed from, not for adversarial images: the
    flood it sizes is sound only while the declaration holds. Without it the bound is a worst
    case over every image within ``image_bound`` and every model within ``model_bound``."""

    def __init__(self, model_bound: Any, noise_model: Any, encrypt: Iterable[str] = ("image", "model"),
                 image_bound: Any = 1.0, *, encryption: str = "joint", plan: Trace | None = None,
                 activations: Activations | None = None) -> None:
        self.nm = noise_model
        self.activations = activations
        self._step = 0
        self.plan = plan or trace(noise_model.params)
        self.encrypt = tuple(dict.fromkeys(encrypt))
        bad = [e for e in self.encrypt if e not in ("image", "model")]
        if bad or not self.encrypt:
            raise ConfigError(f"encrypt takes 'image' and/or 'model' (at least one), got {list(encrypt)!r}")
        self.encryption = encryption
        self.image_bound = image_bound
        values = model_bound if isinstance(model_bound, dict) else {name: model_bound for name in WEIGHT_NAMES}
        missing = [n for n in WEIGHT_NAMES if n not in values]
        if missing:
            raise ConfigError(f"the model bound lacks {', '.join(missing)}")
        self.weights: dict[str, Any] = {}
        for name in WEIGHT_NAMES:
            if "model" in self.encrypt:
                level, scale = self.plan.specs[name]
                self.weights[name] = noise_model.fresh(level, scale, values[name], encryption)
            else:
                self.weights[name] = values[name]

    def _bound(self, x: Any) -> bool:
        return isinstance(x, (ckks_bounds.Bound, ckks_bounds.SlotBound))

    def _declare(self, op: str, x: Any) -> Any:
        """The declared activation bound of the plan's next operation (``op``) applied to its
        result: message = min(propagated, scale x declared), slot by slot where either is."""
        if self.activations is None:
            return x
        if self._step >= len(self.activations.ops) or self.activations.ops[self._step] != op:
            raise ConfigError(f"the activation bounds do not follow the plan (operation {self._step}: {op})")
        declared = self.activations.values[self._step]
        self._step += 1
        if not self._bound(x):
            return x
        message = np.minimum(x.message, x.scale * np.asarray(declared, dtype=np.float64))
        return ckks_bounds._make(x.level, x.scale, message, x.error, x.size, self.nm.slots,
                                 ckks_bounds._is_slotwise(x) or np.ndim(declared) > 0)

    def _lift(self, x: Any) -> Any:
        """The image as forward receives it (its value bound) -> its ciphertext bound when the
        image is encrypted; a clear image stays its value bound."""
        if self._bound(x) or "image" not in self.encrypt:
            return x
        level, scale = self.plan.specs["image"]
        return self.nm.fresh(level, scale, x, self.encryption)

    def _rotate(self, x: Any, step: int) -> Any:
        return (np.roll(x, -step) if np.ndim(x) else x) if not self._bound(x) else self.nm.rotate(x, step)

    def rotate(self, x: Any, step: int) -> Any:
        return self._declare("rotate", self._rotate(self._lift(x), step))

    def rotate_many(self, x: Any, steps: Iterable[int]) -> dict[int, Any]:
        x = self._lift(x)
        steps = list(steps)
        out = {s: self._rotate(x, s) for s in steps} if not self._bound(x) else self.nm.rotate_many(x, steps)
        return {s: self._declare("rotate", out[s]) for s in steps}

    def mul(self, x: Any, name: str) -> Any:
        x, w = self._lift(x), self.weights[name]
        if not self._bound(x):  # the image in the clear times an encrypted weight
            if not self._bound(w):
                raise ConfigError("the image and the model are both in the clear: nothing would be encrypted")
            out = self.nm.mul_plain(w, x, self.plan.specs["image"][1])
        elif not self._bound(w):
            out = self.nm.mul_plain(x, w, self.plan.specs[name][1])
        else:
            out = self.nm.mul(x, w)
        return self._declare("mul", out)

    def add(self, x: Any, y: Any) -> Any:
        return self._declare("add", self.nm.add(self._lift(x), self._lift(y)))

    def add_weight(self, x: Any, name: str) -> Any:
        w = self.weights[name]
        out = self.nm.add(x, w) if self._bound(w) else self.nm.add_plain(x, w, self.plan.specs[name][1])
        return self._declare("add_weight", out)

    def finish(self, x: Any) -> Any:
        return self._declare("finish", self.nm.rescale(self.nm.relinearize(x)))

    def square(self, x: Any) -> Any:
        return self._declare("square", self.nm.rescale(self.nm.relinearize(self.nm.square(x))))


def output_bound(params: ckks.Parameters, parties: Any, model_bound: Any, encrypt: Iterable[str] = ("image", "model"),
                 key_method: str = "exact", *, image_bound: Any = 1.0, encryption: str = "joint",
                 tail_bits: float = 64, rounding: str = "worst", activations: Activations | None = None) -> Any:
    """The worst-case :class:`~shaper.crypto.ckks.bounds.Bound` of the plan's output ciphertext
    (every slot, logits and the rest): :func:`forward` on :class:`BoundBackend`. ``parties`` is
    the number of key holders (with ``key_method`` "exact" or "local") or a ready
    :class:`~shaper.crypto.ckks.bounds.NoiseModel`; ``model_bound`` and ``image_bound`` as
    :class:`BoundBackend` (one number: max |packed weight|, and pixels within 1). ``rounding``
    is the :class:`~shaper.crypto.ckks.bounds.NoiseModel`'s rule ("worst", the default, a
    proof; "tail", the independent-uniform heuristic) when one is built here; ``activations``
    the declared bounds of the intermediate values (:func:`activation_bounds`; not a worst case
    over adversarial images)."""
    if isinstance(parties, ckks_bounds.NoiseModel):
        nm = parties
    else:
        nm = ckks_bounds.NoiseModel(params, int(parties), key_method, tail_bits, rounding=rounding)
    if nm.params != params:
        raise ConfigError("the noise model belongs to other parameters")
    be = BoundBackend(model_bound, nm, encrypt, image_bound, encryption=encryption, activations=activations)
    return forward(be, image_bound).bound()


def slot_bounds(model: Any) -> dict[str, np.ndarray]:
    """Per-slot bounds of the packed model: |packed weight| of each vector (a declaration that
    tracks the packing's zeros and each weight's own size; :func:`output_bound` accepts it as
    ``model_bound``)."""
    return {name: np.abs(v) for name, v in pack_model(model).items()}


@dataclass(frozen=True, eq=False)
class Activations:
    """Declared bounds of the plan's intermediate values, one per operation of :func:`forward`
    in order (``ops[i]`` its backend method, ``values[i]`` a bound on |slot value| of its
    result: a number, or per slot), from :func:`activation_bounds`."""

    ops: tuple[str, ...]
    values: tuple[Any, ...]
    margin: float
    images: int
    per_slot: bool

    def __len__(self) -> int:
        return len(self.ops)


class _Recorder(SlotBackend):
    """:class:`SlotBackend` recording max |value| of every operation's result (over the batch)."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        super().__init__(weights)
        self.ops: list[str] = []
        self.peaks: list[np.ndarray] = []

    def _rec(self, op: str, x: np.ndarray) -> np.ndarray:
        self.ops.append(op)
        self.peaks.append(np.max(np.abs(x), axis=0))
        return x

    def rotate(self, x: np.ndarray, step: int) -> np.ndarray:
        return self._rec("rotate", super().rotate(x, step))

    def rotate_many(self, x: np.ndarray, steps: Iterable[int]) -> dict[int, np.ndarray]:
        return {s: self.rotate(x, s) for s in steps}

    def mul(self, x: np.ndarray, name: str) -> np.ndarray:
        return self._rec("mul", super().mul(x, name))

    def add(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self._rec("add", super().add(x, y))

    def add_weight(self, x: np.ndarray, name: str) -> np.ndarray:
        return self._rec("add_weight", super().add_weight(x, name))

    def finish(self, x: np.ndarray) -> np.ndarray:
        return self._rec("finish", x)

    def square(self, x: np.ndarray) -> np.ndarray:
        return self._rec("square", x * x)


def activation_bounds(model: Any, images: Any, margin: float = 4.0, *, per_slot: bool = False) -> Activations:
    """Declared bounds of every intermediate value of the plan, from the model owner's data:
    the plan in the clear on ``images`` ((m, 28, 28) in [0, 1]), and for each operation of
    :func:`forward` ``margin`` times the largest |slot value| seen, over all slots (a number
    per operation, ``per_slot=False``) or slot by slot (``per_slot=True``: a slot that is zero
    on every image, e.g. one the weights mask, is declared zero).

    **Not a worst case.** These hold for inputs like the owner's data, not for every image in
    [0, 1]^784 (a crafted image can exceed them; through two squares the worst case is far
    larger: :func:`output_bound` without them). A bound computed with them
    (``activations=`` of :func:`output_bound` / :class:`BoundBackend`, which take for each
    intermediate min(propagated, declared)) sizes a flood that is sound only while the
    declaration holds; an evaluation whose inputs break it is outside the guarantee (the
    design's documented residual for messages beyond the declared bounds)."""
    if not (math.isfinite(margin) and margin >= 1.0):
        raise ConfigError(f"the activation margin must be >= 1, got {margin!r}")
    rec = _Recorder(pack_model(model))
    forward(rec, pack_images(images))
    m = len(pack_images(images)) if np.ndim(images) == 3 else 1
    values = tuple((margin * p) if per_slot else float(margin * np.max(p)) for p in rec.peaks)
    for v in values:
        if isinstance(v, np.ndarray):
            v.flags.writeable = False
    return Activations(tuple(rec.ops), values, float(margin), m, bool(per_slot))


#: per-slot bound of a packed image with pixels in [0, 1]: 1 where the layout writes a pixel, 0 elsewhere
IMAGE_SUPPORT = np.zeros(SLOTS)
IMAGE_SUPPORT[IMAGE_SLOTS] = 1.0
IMAGE_SUPPORT.flags.writeable = False


__all__ = [
    "BLOCK",
    "CLASSES",
    "DEPTH",
    "IMAGE_SUPPORT",
    "LABEL_FOLD",
    "LABEL_PERIOD",
    "SEGMENT",
    "SLOTS",
    "WEIGHT_NAMES",
    "Activations",
    "BoundBackend",
    "CkksBackend",
    "SlotBackend",
    "Trace",
    "Tracer",
    "activation_bounds",
    "fold_for_label",
    "forward",
    "logits",
    "output_bound",
    "pack_images",
    "pack_model",
    "packed_forward",
    "rotation_steps",
    "slot_bounds",
    "trace",
]
