"""Additive secret sharing over Z_2^64: shares (:class:`SharedArray`, exact
:class:`IntegerShares`), the common engine base (:class:`AdditiveEngine`), Beaver
multiplication (:mod:`.beaver`) and local SecureML truncation (:func:`truncate_share`)."""

from .shares import AdditiveEngine, IntegerShares, SharedArray, truncate_share

__all__ = ["AdditiveEngine", "IntegerShares", "SharedArray", "truncate_share"]
