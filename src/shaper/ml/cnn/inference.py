"""Encrypted inference with the packing plan: encrypt images and/or the model, evaluate, decrypt.

These are the local steps, the same under a single-key CKKS key and under the threshold key of
``shaper fhe keygen`` (only the decryption differs; :mod:`.jobs` runs it jointly):

* :func:`encrypt_images` — the client packs and encrypts each image at the top level;
* :func:`encrypt_model` / :func:`encode_model` — the model owner packs the weights and encrypts
  (or only encodes) each vector at the level and scale the plan consumes it at;
* :func:`evaluate` — anyone holding the evaluation keys runs the plan on every image;
* :func:`single_key` — all of it in one process under a fresh single-key key (tests, benchmarks,
  ``shaper cnn demo --single-key``).

Which combination is encrypted is the caller's choice: image and model (nobody but the
decryptors can learn either), image only (the evaluator is the model owner), model only (the
evaluator is the client). Both in the clear is refused.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...crypto import ckks
from ...crypto.ckks.bounds import Bound
from ...errors import ConfigError
from . import plan as P
from .params import cnn_parameters

Progress = Callable[[dict], None]
ENCRYPT_CHOICES = ("image", "model")


def check_encrypt(encrypt: Iterable[str]) -> tuple[str, ...]:
    """The set of encrypted inputs, validated: a subset of ("image", "model"), not empty."""
    chosen = tuple(dict.fromkeys(encrypt))
    bad = [e for e in chosen if e not in ENCRYPT_CHOICES]
    if bad:
        raise ConfigError(f"encrypt takes 'image' and/or 'model', got {', '.join(map(repr, bad))}")
    if not chosen:
        raise ConfigError("encrypt the image, the model or both: with neither, nothing would be private")
    return chosen


def _spec(trace: P.Trace, name: str) -> tuple[int, float]:
    return trace.specs[name]


def encode_model(model: Any, params: ckks.Parameters, trace: P.Trace | None = None) -> dict[str, ckks.Plaintext]:
    """The model's packed vectors as plaintexts at their levels and scales (model in the clear)."""
    return encode_model_packed(P.pack_model(model), params, trace)


def encode_model_packed(packed: dict[str, np.ndarray], params: ckks.Parameters,
                        trace: P.Trace | None = None) -> dict[str, ckks.Plaintext]:
    """:func:`encode_model` of already packed weights (:func:`~.plan.pack_model`)."""
    trace = trace or P.trace(params)
    encoder = ckks.Encoder(params)
    out = {}
    for name, v in packed.items():
        level, scale = _spec(trace, name)
        out[name] = encoder.encode(v, level=level, scale=scale)
    return out


def encrypt_model(key: ckks.PublicKey | ckks.SecretKey, model: Any, params: ckks.Parameters | None = None,
                  trace: P.Trace | None = None) -> dict[str, ckks.Ciphertext]:
    """The model's 25 packed vectors encrypted at the levels and scales the plan consumes them at."""
    params = params or key.params
    return {name: ckks.encrypt(key, pt) for name, pt in encode_model(model, params, trace).items()}


def encrypt_images(key: ckks.PublicKey | ckks.SecretKey, images: Any, params: ckks.Parameters | None = None, *,
                   progress: Progress | None = None) -> list[ckks.Ciphertext]:
    """One ciphertext per image, at the plan's input level (:data:`~.plan.DEPTH`) and the
    parameters' scale."""
    params = params or key.params
    level, scale = P.trace(params).specs["image"]
    packed = P.pack_images(images)
    encoder = ckks.Encoder(params)
    out = []
    for k, x in enumerate(packed):
        out.append(ckks.encrypt(key, encoder.encode(x, level=level, scale=scale)))
        if progress is not None:
            progress({"phase": "encrypt images", "done": k + 1, "total": len(packed)})
    return out


def evaluate(evaluator: ckks.Evaluator, inputs: Sequence[Any], weights: dict[str, Any], *,
             trace: P.Trace | None = None, progress: Progress | None = None) -> list[ckks.Ciphertext]:
    """The network on every input: ciphertexts (images encrypted) or the (m, 8192) packed images
    (in the clear; the model must then be encrypted). Returns one level-0 ciphertext per image
    whose slots 0..9 (and 128 n .. 128 n + 9) hold the logits."""
    backend = P.CkksBackend(evaluator, weights, trace)
    out = []
    for k, x in enumerate(inputs):
        if isinstance(x, ckks.Ciphertext) and (x.level, x.scale) != backend.plan.specs["image"]:
            raise ConfigError(f"image ciphertext {k} is at level {x.level}; encrypt images at level "
                              f"{backend.plan.specs['image'][0]} with the parameters' scale (encrypt_images)")
        out.append(P.forward(backend, x))
        if progress is not None:
            progress({"phase": "evaluate", "done": k + 1, "total": len(inputs)})
    return out


def predictions(logits: np.ndarray) -> np.ndarray:
    return np.argmax(logits, axis=-1)


def confusion(labels: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """10 x 10 counts: row = true label, column = predicted."""
    out = np.zeros((P.CLASSES, P.CLASSES), dtype=np.int64)
    np.add.at(out, (np.asarray(labels, dtype=np.int64), np.asarray(predicted, dtype=np.int64)), 1)
    return out


@dataclass
class Result:
    """Logits from the encrypted run beside the plaintext model's, with the time of each phase."""

    logits: np.ndarray
    plain_logits: np.ndarray
    seconds: dict[str, float] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def predicted(self) -> np.ndarray:
        return predictions(self.logits)

    @property
    def agree(self) -> float:
        """Fraction of images whose encrypted prediction equals the plaintext model's."""
        return float(np.mean(self.predicted == predictions(self.plain_logits)))

    @property
    def max_error(self) -> float:
        return float(np.max(np.abs(self.logits - self.plain_logits)))


def single_key(model: Any, images: Any, *, encrypt: Iterable[str] = ENCRYPT_CHOICES,
               params: ckks.Parameters | None = None, keys: ckks.KeySet | None = None,
               progress: Progress | None = None) -> Result:
    """Encrypted inference under one single-key CKKS key (made here unless ``keys`` is given):
    keys, encryption, evaluation and decryption in this process, timed per phase."""
    encrypt = check_encrypt(encrypt)
    params = params or (keys.params if keys is not None else cnn_parameters())
    trace = P.trace(params)
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    if keys is None:
        keys = ckks.KeySet(params, rotations=trace.rotation_steps)
        seconds["keys"] = time.perf_counter() - t
    ev = ckks.Evaluator(params, keys.relin, keys.galois)
    t = time.perf_counter()
    weights = encrypt_model(keys.public, model, params, trace) if "model" in encrypt else \
        encode_model(model, params, trace)
    seconds["model"] = time.perf_counter() - t
    t = time.perf_counter()
    inputs: Sequence[Any] = encrypt_images(keys.public, images, params, progress=progress) if "image" in encrypt \
        else P.pack_images(images)
    seconds["encrypt images"] = time.perf_counter() - t
    t = time.perf_counter()
    outputs = evaluate(ev, inputs, weights, trace=trace, progress=progress)
    seconds["evaluate"] = time.perf_counter() - t
    t = time.perf_counter()
    slots = np.stack([ev.encoder.decode(ckks.decrypt(keys.secret, ct)) for ct in outputs])
    seconds["decrypt"] = time.perf_counter() - t
    sizes = {"image_ciphertext": len(ckks.to_bytes(inputs[0])) if "image" in encrypt else 0,
             "model": sum(len(ckks.to_bytes(w)) for w in weights.values()) if "model" in encrypt else 0,
             "output_ciphertext": len(ckks.to_bytes(outputs[0]))}
    return Result(P.logits(slots), np.asarray(model.forward(np.asarray(images, dtype=np.float64))), seconds, sizes)


def model_bound(model: Any) -> float:
    """The value bound a model owner declares for its packed weights: the largest |weight|
    rounded up to a power of two (what the decryption's flood is sized by; it reveals no more
    than that power of two)."""
    peak = max(float(np.max(np.abs(v))) for v in P.pack_model(model).values())
    return float(2.0 ** np.ceil(np.log2(max(peak, 2.0 ** -20))))


#: the model owner's margin over the largest intermediate values its calibration images reach
ACTIVATION_MARGIN = 2.0
#: calibration images the model owner declares its activation bounds from (the bundled sample's first)
CALIBRATION_IMAGES = 100


def declared_output_bound(model: Any, params: ckks.Parameters, parties: int, key_method: str = "exact",
                          encrypt: Iterable[str] = ENCRYPT_CHOICES, *, images: Any = None,
                          margin: float = ACTIVATION_MARGIN) -> tuple[float, float]:
    """The model owner's bound on the error (and message) of every output ciphertext of the
    plan: the plan run on bounds (:func:`~.plan.output_bound`) with the owner's weights slot by
    slot, every intermediate value declared within ``margin`` times the largest its calibration
    ``images`` reach (default: the first 100 bundled MNIST test images;
    :func:`~.plan.activation_bounds`), and rounding and key-switching digits by their tail
    bound (``rounding="tail"``). Only the owner can compute it (it needs the weights); it
    announces the two numbers, which reveal no more of the model than its outputs' size.

    This is worst case over the noise (up to the tail rule) and over images whose intermediate
    values stay within the declared bounds, which images like the owner's data do (the other 900
    bundled images reach at most 1.43 times the first 100's). An image crafted to drive the
    network's squares beyond them is not covered: docs/threshold-ckks.md, "What remains"."""
    from ...crypto.ckks.bounds import NoiseModel

    if images is None:
        from .mnist import sample

        raw, _ = sample()
        images = raw[:CALIBRATION_IMAGES] / 255.0
    nm = NoiseModel(params, int(parties), key_method, rounding="tail")
    b = P.output_bound(params, nm, P.slot_bounds(model), check_encrypt(encrypt),
                       activations=P.activation_bounds(model, images, margin=margin)).bound()
    return float(b.error), float(b.message)


def derived_output_bound(nm: Any, encrypt: Iterable[str], bound: float, weights: dict[str, Any] | None = None,
                         image: Any = 1.0) -> Any:
    """The outputs' worst-case bound derived from the inputs' own bounds, nothing declared: the
    plan on :class:`~.plan.BoundBackend` with each encrypted weight at its recorded (enforced)
    bound ``weights`` (by name; a weight in the clear within ``bound``), and the image at its
    recorded bound ``image`` (a :class:`~shaper.crypto.ckks.bounds.Bound`; a number for images
    in the clear or for the fresh joint input of that value bound). A worst case over every
    image and model the inputs' bounds allow: through the two squares it is far wider than what
    real images reach (docs/cnn.md gives the figures)."""
    encrypt = check_encrypt(encrypt)
    be = P.BoundBackend(bound, nm, encrypt)
    if weights is not None:
        be.weights.update(weights)
    return P.forward(be, image).bound()


def cnn_circuit(params: ckks.Parameters, *, encrypt: Iterable[str], model_digest: str, bound: float,
                declared: tuple[float, float] | None, weights: dict[str, ckks.Plaintext] | None = None,
                images: np.ndarray | None = None, images_digest: str = "", fold: bool = False) -> Any:
    """The CNN plan as an agreed evaluation (:class:`shaper.protocols.threshold_ckks.Circuit`):
    its inputs are the 25 jointly encrypted weight vectors in :data:`~.plan.WEIGHT_NAMES` order
    (model encrypted), then the jointly encrypted images (images encrypted); a part in the clear
    is part of the circuit (``weights`` plaintexts, or ``images`` packed) and so of its name,
    with the model's digest and the declared weight bound. Its outputs' bound is either
    ``declared`` (the model owner's :func:`declared_output_bound`, after checking every input's
    recorded bound is within what that assumes: the passive keys' rule), or, with ``declared``
    None, *derived*: the plan run on the bounds each party's own ledger holds for the inputs
    (:func:`derived_output_bound`; on a key made on the active engine those are the bounds its
    range checks enforced), a worst case over every input they allow. With ``fold`` each output
    is folded for a decryption to a label (:func:`~.plan.fold_for_label`: logit k in every slot
    16 t + k)."""
    from ...protocols.threshold_ckks import Circuit

    encrypt = check_encrypt(encrypt)
    trace = P.trace(params)
    n_weights = len(P.WEIGHT_NAMES) if "model" in encrypt else 0
    if "model" not in encrypt and weights is None:
        raise ConfigError("with the model in the clear the circuit holds its encoded weights")
    if "image" not in encrypt and images is None:
        raise ConfigError("with the images in the clear the circuit holds them")
    error, message = (float(v) for v in declared) if declared is not None else (math.nan, math.nan)
    name = (f"cnn plan {params.fingerprint.hex()[:16]} model {model_digest[:32]} bound {bound!r} "
            + (f"output error {error!r}" if declared is not None else "output bound derived")
            + f" encrypt {'+'.join(encrypt)}" + (" folded for labels" if fold else "")
            + (f" images {images_digest[:32]}" if images is not None else ""))

    def run(ev: ckks.Evaluator, inputs: list[ckks.Ciphertext]) -> list[ckks.Ciphertext]:
        w = dict(zip(P.WEIGHT_NAMES, inputs[:n_weights], strict=True)) if n_weights else dict(weights)
        xs: Sequence[Any] = inputs[n_weights:] if "image" in encrypt else images
        if "image" in encrypt and not xs:
            raise ConfigError("the CNN circuit got no image ciphertexts")
        out = evaluate(ev, xs, w, trace=trace)
        if fold:
            be = P.CkksBackend(ev, w, trace)
            out = [P.fold_for_label(be, y) for y in out]
        return out

    def folded(nm: Any, out: Any) -> Any:
        if not fold:
            return out
        for s in P.LABEL_FOLD:
            out = nm.add(out, nm.rotate(out, s))
        return out

    def bounds(nm: Any, given: list[Any]) -> list[Any]:
        count = len(given) - n_weights if "image" in encrypt else len(images)
        if declared is None:
            weight_bounds = dict(zip(P.WEIGHT_NAMES, given[:n_weights], strict=True)) if n_weights else None
            image = given[n_weights] if "image" in encrypt else 1.0
            if "image" in encrypt:  # every image within one bound, component by component
                if any(b.level != image.level or b.scale != image.scale for b in given[n_weights:]):
                    raise ConfigError("the CNN circuit's images are not all at one level and scale")
                image = Bound(level=image.level, scale=image.scale, message=max(b.message for b in given[n_weights:]),
                              error=max(b.error for b in given[n_weights:]))
            return [folded(nm, derived_output_bound(nm, encrypt, bound, weight_bounds, image))] * count
        for k, b in enumerate(given):
            if k < n_weights:
                level, scale = trace.specs[P.WEIGHT_NAMES[k]]
                want, what = nm.joint_input(level, scale, bound), f"weight {P.WEIGHT_NAMES[k]}"
            else:
                level, scale = trace.specs["image"]
                want, what = nm.joint_input(level, scale, 1.0), f"image {k - n_weights}"
            if b.level != level or b.error > want.error or b.message > want.message:
                raise ConfigError(f"the CNN circuit's {what} was not encrypted jointly at the plan's level and "
                                  f"bound (level {b.level}, error 2^{np.log2(b.error):.1f}, message "
                                  f"2^{np.log2(max(b.message, 1)):.1f})")
        out = Bound(level=trace.output_level, scale=trace.output_scale, message=message, error=error)
        return [folded(nm, out)] * count

    return Circuit(name, run, bounds)


__all__ = ["ENCRYPT_CHOICES", "Result", "check_encrypt", "cnn_circuit", "confusion", "encode_model",
           "declared_output_bound", "derived_output_bound", "encode_model_packed", "encrypt_images", "encrypt_model", "evaluate", "model_bound", "predictions", "single_key"]
