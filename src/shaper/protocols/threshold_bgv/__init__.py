"""Threshold GHS (GMPFHE §5.2 with the GHS-style BGV of :mod:`shaper.crypto.bgv`): n parties hold
the BGV secret in additive shares. This package holds, for now, key generation inside the MPC
(:func:`keygen`, :class:`JointKeys`) and the joint decryption to bits (:func:`decrypt_bits`); the
key store, the decryption budget and the consent rules of threshold CKKS (docs/threshold-ckks.md)
are still to come, so nothing here is wired to a command line yet.
"""

from .decrypt import decrypt_bits
from .keygen import JointKeys, keygen

__all__ = ["JointKeys", "decrypt_bits", "keygen"]
