"""Agreed evaluations under a threshold BGV key: deterministic circuits every party runs itself
on accounted inputs, so that each can account for the outputs it is later asked to decrypt.

BGV evaluation is deterministic (products, relinearisation, key and modulus switching use no
randomness; the level decisions follow the noise estimate, which every party computes the same
way from the same inputs), so parties that run the same circuit on the same ciphertexts get
byte-identical outputs. A party never decrypts what another says it computed: it computes it.
Parties that ran different circuits, or the same one on other inputs, hold different digests and
their decryption requests do not match; nothing is decrypted.

Each input's noise estimate is the party's own (its ledger's), not the one a file carries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...crypto.bgv import scheme
from ...errors import ConfigError, DecryptionRefused
from .inputs import entry

__all__ = ["Circuit", "aes128", "evaluate"]


@dataclass(frozen=True)
class Circuit:
    """A deterministic evaluation ``run(evaluator, inputs) -> outputs`` taking ``inputs``
    ciphertexts; ``name`` identifies it with every parameter that changes its result."""

    name: str
    inputs: int
    run: Callable[[scheme.Evaluator, list[scheme.Ciphertext]], list[scheme.Ciphertext]]


def evaluate(keys: Any, circuit: Circuit, inputs: Sequence[scheme.Ciphertext]) -> list[scheme.Ciphertext]:
    """Runs ``circuit`` on ``inputs`` with the opened keys and records its outputs, with this
    party's noise estimates, in its ledger. Raises :class:`~shaper.errors.DecryptionRefused` for
    an input the ledger does not hold."""
    inputs = list(inputs)
    if len(inputs) != circuit.inputs:
        raise ConfigError(f"the circuit {circuit.name!r} takes {circuit.inputs} ciphertexts, got {len(inputs)}")
    try:
        entries = keys.ledger.accounted(inputs)
    except DecryptionRefused as exc:
        raise DecryptionRefused(f"{exc} (as an input of {circuit.name!r}); inputs must be joint inputs or outputs "
                                "of evaluations this party ran") from None
    own = [scheme.Ciphertext(ct.parts, ct.level, e.error, ct.params) for ct, e in zip(inputs, entries, strict=True)]
    outputs = circuit.run(keys.evaluator(), own)
    keys.ledger.record_entries([entry(ct, "output", circuit.name) for ct in outputs])
    return outputs


def aes128() -> Circuit:
    """AES-128 in GHS's packed layout (:class:`~shaper.crypto.bgv.aes.AesCircuit`): inputs the
    packed state and the 11 packed round keys, output the packed ciphertext blocks."""
    from ...crypto.bgv import aes

    def run(ev: scheme.Evaluator, xs: list[scheme.Ciphertext]) -> list[scheme.Ciphertext]:
        return [aes.AesCircuit(ev).encrypt(xs[0], xs[1:])]

    return Circuit("aes-128", 12, run)
