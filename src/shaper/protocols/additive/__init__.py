"""The additive engine: additive secret sharing among any n >= 2 parties over Z_2^64 (fixed
point), odd moduli and RNS bases (Z_q) and Z_2 (bit-sliced), with Beaver multiplication from a
pluggable triple source, conversions between the domains and secure sampling (GMPFHE's MPC; the
two-party hybrid engine of SHAPER is this engine plus a Paillier boundary). See ``docs/mpc.md``.

* :class:`AdditiveEngine` (:mod:`.engine`, :mod:`.fields`): share, reveal, add, Beaver mul and
  matmul, truncation, over every domain;
* :mod:`.convert` (Z_2 <-> Z_q, Z_3 -> Z_q), :mod:`.sampling` (uniform, ternary, discrete
  Gaussian), :mod:`.costs` (rounds and bytes per step);
* :mod:`.shares`: :class:`SharedArray`, exact :class:`IntegerShares` (the HE boundary), the
  base :class:`AdditiveSharing` and local SecureML truncation (:func:`truncate_share`).
"""

from ..api import ModShares, XorShares
from .engine import AdditiveEngine
from .shares import AdditiveSharing, IntegerShares, SharedArray, truncate_share

__all__ = ["AdditiveEngine", "AdditiveSharing", "IntegerShares", "ModShares", "SharedArray", "XorShares",
           "truncate_share"]
