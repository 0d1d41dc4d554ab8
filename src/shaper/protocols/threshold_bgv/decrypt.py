"""Joint BGV decryption to bits (GMPFHE's "CircuitEval", with a public modulus switch first):
the parties' shares of a level-0 phase v = μ + 2e (mod q_0) are converted to XOR shares of v's
bits inside the MPC, and only the plaintext bit of each coefficient, the parity of v's centred
value, LSB(v) ⊕ [v > (q_0 − 1)/2], is opened to the recipient(s). Nobody learns v, so the
noise is never revealed and no flooding is needed.

Security model (the engine's): passive MPC, dishonest majority. What the recipient learns is the
plaintext polynomial's coefficients mod 2, hence the slots. This function decrypts what it is
given: the consent and provenance rules that stop a recipient from asking for crafted
ciphertexts (whose bits near q_0/2 would depend on s) belong to the protocol that calls it, as in
:mod:`shaper.protocols.threshold_ckks.decrypt`, and are not built yet.

Cost: one Z_q → Z_2 conversion of φ coefficients of log2 q_0 bits ((n − 1) ripple-carry modular
adders, :func:`shaper.protocols.additive.convert.mod_to_bits`) and one more adder for the
comparison with (q_0 − 1)/2; the public switch to q_0 first keeps the circuit at q_0's 40 bits
instead of the whole chain's (the recommendation of our research notes, ghs.md §5).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...crypto.bgv import scheme
from ...crypto.bgv.multiparty import decryption_share
from ..additive.convert import add_public
from ..api import ModShares, XorShares

__all__ = ["decrypt_bits"]


def decrypt_bits(engine: Any, s_share: np.ndarray, ct: scheme.Ciphertext, to: int | None = None) -> np.ndarray | None:
    """The plaintext polynomial's coefficients (uint8 (φ,)) at ``to`` (None: every party), from
    this party's secret share ``s_share`` (evaluation form over the parameters' whole basis, or
    at least limb 0). Every party calls it with the same ciphertext (switched publicly to level 0
    here). Decode the slots with ``scheme.algebra(m).decode``."""
    params = ct.params
    ring = scheme._ring(params)
    low = scheme.switch_to(ct, 0)
    q0 = int(params.primes[0])
    v = decryption_share(ring, np.ascontiguousarray(s_share[:1]), low.parts, engine.me == 0)
    bits = engine.mod_to_bits(ModShares(engine, v[:, None], (q0,)))   # (w, W): v's bits, v in [0, q0)
    w = q0.bit_length()
    _, above = add_public(engine, bits, (1 << w) - (q0 + 1) // 2)     # carry: v + 2^w − (q0+1)/2 ≥ 2^w
    plain = XorShares(engine, bits.words[0] ^ above.words, bits.bits)  # LSB(v) XOR [v > (q0 − 1)/2]
    opened = engine.reveal_bits(plain, to=to)
    return None if opened is None else np.asarray(opened, dtype=np.uint8)
