"""Agreed evaluations: deterministic circuits every party runs itself on accounted inputs, so
that each can account for the outputs it is later asked to decrypt.

CKKS evaluation is deterministic (products, relinearisation, rotation and rescaling use no
randomness), so parties that run the same circuit on the same ciphertexts get byte-identical
outputs. A party never decrypts what another party says it computed: it computes it. The price
is that every party evaluates (in parallel, on its own machine); the gain is that the circuit,
and so the worst-case error of its outputs, is one the party chose.

A :class:`Circuit` is a name (with every parameter that changes its result), the evaluation
itself and its bound: the outputs' worst-case :class:`~shaper.crypto.ckks.bounds.Bound` from
the inputs' (:class:`~shaper.crypto.ckks.bounds.NoiseModel`). :func:`evaluate` refuses inputs the
party's ledger does not hold (joint inputs, or outputs of earlier evaluations), runs the circuit
and records the outputs with their bounds. Parties that ran different circuits, or the same one
on different inputs, hold different output digests, and their decryption requests do not match:
nothing is decrypted.

The circuits here: :func:`identity`, :func:`chain` ("square", "rotate:R", "conjugate", in
order), and :func:`parse` for the command line. The CNN's plan is one too
(:func:`shaper.ml.cnn.inference.cnn_circuit`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...crypto import ckks
from ...crypto.ckks.bounds import Bound, NoiseModel
from ...errors import ConfigError, DecryptionRefused
from .inputs import noise_model

__all__ = ["Circuit", "chain", "evaluate", "identity", "parse"]


@dataclass(frozen=True)
class Circuit:
    """A deterministic evaluation: ``run(evaluator, inputs) -> outputs`` and
    ``bound(noise_model, input bounds) -> output bounds``; ``name`` identifies it with every
    parameter that changes its result."""

    name: str
    run: Callable[[ckks.Evaluator, list[ckks.Ciphertext]], list[ckks.Ciphertext]]
    bound: Callable[[NoiseModel, list[Bound]], list[Bound]]


def evaluate(keys: Any, circuit: Circuit, inputs: Sequence[ckks.Ciphertext]) -> list[ckks.Ciphertext]:
    """Runs ``circuit`` on ``inputs`` with the opened keys and records its outputs, with their
    worst-case bounds, in this party's ledger. Raises :class:`~shaper.errors.DecryptionRefused`
    for an input the ledger does not hold."""
    inputs = list(inputs)
    if not inputs:
        raise ConfigError(f"the circuit {circuit.name!r} needs at least one input")
    try:
        entries = keys.ledger.accounted(inputs)
    except DecryptionRefused as exc:
        raise DecryptionRefused(f"{exc} (as an input of {circuit.name!r}); inputs must be joint inputs or outputs "
                                "of evaluations this party ran") from None
    bounds = [Bound(level=e.level, scale=e.scale, message=e.message, error=e.error) for e in entries]
    outputs = circuit.run(keys.evaluator(), inputs)
    out_bounds = circuit.bound(noise_model(keys), bounds)
    keys.ledger.record(outputs, out_bounds, kind="output", source=circuit.name)
    return outputs


def identity() -> Circuit:
    """The inputs themselves (decrypting a joint input shows its owner's values, flooded)."""
    return Circuit("identity", lambda ev, xs: list(xs), lambda nm, bs: list(bs))


def chain(ops: Sequence[str]) -> Circuit:
    """Each input through the operations in order: "square" (x * x, relinearised, rescaled),
    "rotate:R" (slots left by R), "conjugate"."""
    steps = [_op(op) for op in ops]
    if not steps:
        raise ConfigError("a circuit needs at least one operation")

    def run(ev: ckks.Evaluator, xs: list[ckks.Ciphertext]) -> list[ckks.Ciphertext]:
        out = []
        for x in xs:
            for kind, arg in steps:
                if kind == "square":
                    x = ev.rescale(ev.square(x))
                elif kind == "rotate":
                    x = ev.rotate(x, arg)
                else:
                    x = ev.conjugate(x)
            out.append(x)
        return out

    def bound(nm: NoiseModel, bs: list[Bound]) -> list[Bound]:
        out = []
        for b in bs:
            for kind, _ in steps:
                if kind == "square":
                    b = nm.rescale(nm.relinearize(nm.square(b)))
                elif kind == "rotate":
                    b = nm.rotate(b)
                else:
                    b = nm.conjugate(b)
            out.append(b)
        return out

    return Circuit(",".join(f"{k}:{a}" if k == "rotate" else k for k, a in steps), run, bound)


def _op(op: str) -> tuple[str, int]:
    op = op.strip()
    if op in ("square", "conjugate"):
        return op, 0
    if op.startswith("rotate:"):
        try:
            return "rotate", int(op.split(":", 1)[1])
        except ValueError:
            pass
    raise ConfigError(f"unknown circuit operation {op!r}: use square, rotate:R or conjugate")


def parse(spec: str) -> Circuit:
    """The circuit of a command-line spec: "identity", or operations separated by commas
    ("square,rotate:1")."""
    spec = spec.strip()
    if spec == "identity":
        return identity()
    return chain([s for s in spec.split(",") if s.strip()])
