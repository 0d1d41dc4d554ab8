"""Threshold GHS (GMPFHE §5.2 with the GHS-style BGV of :mod:`shaper.crypto.bgv`): n parties hold
the BGV secret in additive shares. This package holds, for now, the joint decryption to bits
(:func:`decrypt_bits`); key generation in the MPC, the key store and the consent rules of
threshold CKKS (docs/threshold-ckks.md) are still to come, so nothing here is wired to a command
line yet.
"""

from .decrypt import decrypt_bits

__all__ = ["decrypt_bits"]
