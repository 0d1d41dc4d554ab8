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

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...crypto import ckks
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
    trace = trace or P.trace(params)
    encoder = ckks.Encoder(params)
    out = {}
    for name, v in P.pack_model(model).items():
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


__all__ = ["ENCRYPT_CHOICES", "Result", "check_encrypt", "confusion", "encode_model", "encrypt_images",
           "encrypt_model", "evaluate", "predictions", "single_key"]
