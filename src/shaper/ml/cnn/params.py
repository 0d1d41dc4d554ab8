"""The CNN's CKKS parameters and the rotation keys its packing plan uses (issue 19, GMPFHE).

``shaper fhe keygen --params cnn --rotations cnn`` and ``shaper cnn demo`` generate exactly these
keys; :func:`shaper.ml.cnn.plan.rotation_steps` derives :data:`CNN_ROTATIONS` from the plan and
the tests hold the two equal.
"""

from __future__ import annotations

from ...crypto import ckks

__all__ = ["CNN_BUDGET", "CNN_CHAIN", "CNN_ROTATIONS", "cnn_parameters"]

#: the benchmark CNN's parameters (issue 19, GMPFHE): N = 2^14, q = 60 + 6 x 53 bits, p 60 bits, scale 2^53
CNN_CHAIN = (1 << 14, (60, 53, 53, 53, 53, 53, 53), 60, 53)
#: the rotation steps of the CNN's packing plan (docs/cnn.md; ``shaper.ml.cnn.plan.rotation_steps``
#: derives the same 28 from the plan, which the tests check). The E2DM packing of the research
#: notes needs 23 of them; folding its FC-2 mask into the weights adds -3, -5, -6, -7, -9.
CNN_ROTATIONS = (1, 2, 4, 8, 14, 15, 16, 32, 64, 128, 256, 384, 512, 640, 768, 896, 1024, 2048, 4096,
                 -1, -2, -3, -4, -5, -6, -7, -8, -9)


def cnn_parameters() -> ckks.Parameters:
    """The CNN's CKKS parameters (128-bit secure by the HE standard)."""
    n, q, p, scale = CNN_CHAIN
    return ckks.Parameters.from_literal(n, list(q), p, scale)

#: the default decryption budget of a CNN key (``shaper fhe keygen --rotations cnn``, ``shaper cnn
#: demo``): one job of up to 126 images and the key check; re-key per job (the flood grows with
#: the budget's square root, docs/threshold-ckks.md)
CNN_BUDGET = 128
