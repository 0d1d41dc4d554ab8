"""Commit before opening: how threshold CKKS opens key material and joint seeds to every party
so that no party can choose what is opened after seeing the others' shares.

**What a rushing party could do before.** An opening to every party (``ModShares.reveal()``,
:meth:`~shaper.protocols.additive.fields.FieldOps.reveal_mod`) broadcasts this party's share and
then gathers the others'. The network lets any party send last: a party that *rushes* reads every
honest share first and then sends whatever makes the opened total a value of its choosing. In key
generation that is a public key b = -a s' + e under a secret s' it knows (it alone then decrypts
everything encrypted under the "joint" key), a relinearisation or rotation key of its choosing,
the masked difference d = s - alpha (and so the s^2 its switching key is made for), the check
decryption's opened total (so a substituted key passes the check), and every "joint" seed (the
uniform ``a`` polynomials, the check vector): it fixes the opened total r exactly, and with it
the seed H(what, r).

**Why it cannot now.** Every such opening is committed first (:func:`open_committed`): each party
draws a fresh 32-byte nonce from ``os.urandom`` and broadcasts
c_i = SHA-256(domain, tag, i, nonce, payload) for the bytes it is about to open; only once it
holds every party's commitment does it broadcast (nonce, payload); every party then checks every
opening against its commitment *before* any opened value is used, and a mismatch raises
:class:`~shaper.errors.KeyValidationError` naming the party and the tag at every honest party
(the value is discarded; no key is returned). The commitment binds (SHA-256 collision
resistance): what a party opens was fixed before it saw anything of the honest shares. It hides
(a 256-bit nonce; SHA-256 as a random oracle): the commitments a rushing party waits for tell it
nothing to adapt to. It names the committer's index and the opening's tag, so a party can
neither copy another's commitment as its own (it would open to the other's index) nor replay
one from another opening. So the opened total is the honest parties' shares, which the rushing
party does not know when it commits, plus a contribution fixed independently of them: a joint
seed is uniform if one party's share is, and a key is a key under a secret whose honest part no
coalition of the others knows.

**What remains.** A party can still abort after seeing the openings (every party raises; no key,
the same denial of service as a party that stops). The n-party engine itself is passive: a party
that deviates otherwise inside it (commits to a share that is not the protocol's, e.g. b_i plus
an offset, or runs the sampler's circuit wrongly) can still make the keys wrong, and the check
decryption of :func:`~shaper.protocols.threshold_ckks.keygen.check_joint_keys` catches keys that
do not work, but it cannot choose them: whatever it commits to is fixed before it has seen the
honest shares. Openings to one recipient (``to=``) are not committed: only the recipient learns
the total, and any sender could already shift it by what it adds to its own share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...crypto.ckks.multiparty import seed_from_opened
from ...errors import FrameError, KeyValidationError
from ..commit import DOMAIN, NONCE_BYTES, commitment, open_committed
from ...kernels.modq import add_mod

__all__ = ["DOMAIN", "NONCE_BYTES", "SEED_PRIME", "commitment", "committed_open_rows", "committed_seed",
           "committed_sum", "open_committed"]

#: the field the uniform shares of a joint seed live in (2^61 - 1)
SEED_PRIME = (1 << 61) - 1


def committed_sum(engine: Any, share: np.ndarray, moduli: np.ndarray, tag: str, *,
                  error: type[Exception] = KeyValidationError) -> np.ndarray:
    """The sum of every party's uint64 ``share`` modulo ``moduli`` (broadcastable to the share's
    shape, every share reduced), opened to every party with :func:`open_committed` under ``tag``;
    :class:`~shaper.errors.FrameError` for an opening of the wrong size or out of range."""
    share = np.ascontiguousarray(share, dtype=np.uint64)
    qs = np.asarray(moduli, dtype=np.uint64)
    opened = open_committed(engine.session, share.astype("<u8", copy=False).tobytes(), tag, error=error)
    total = share.copy()
    for index, blob in enumerate(opened):
        if index == engine.session.index:
            continue
        peer = engine.session.parties[index]
        if len(blob) != share.nbytes:
            raise FrameError(f"party {peer!r} opened {len(blob)} bytes under tag {tag!r}; expected {share.nbytes}")
        got = np.frombuffer(blob, dtype="<u8").astype(np.uint64, copy=False).reshape(share.shape)
        if np.any(got >= qs):
            raise FrameError(f"party {peer!r} opened residues out of range under tag {tag!r}")
        total = add_mod(total, got, qs)
    return total


def committed_open_rows(engine: Any, rows: np.ndarray, primes: Sequence[int], *, what: str = "rows",
                        error: type[Exception] = KeyValidationError) -> np.ndarray:
    """Opens shares held as kernel rows (..., R, N) over ``primes`` (one per row) to every party,
    committed first (:func:`open_committed`): the sum of the parties' rows mod each row's prime.
    ``what`` names the opening in its message tag (and so in any error)."""
    rows = np.ascontiguousarray(rows, dtype=np.uint64)
    qs = np.asarray([int(q) for q in primes], dtype=np.uint64)
    if rows.ndim < 2 or rows.shape[-2] != len(qs):
        raise ValueError(f"kernel rows of shape {rows.shape} do not have one row per prime ({len(qs)})")
    return committed_sum(engine, rows, qs[:, None], engine._tag(f"open-{what}"), error=error)


def committed_seed(engine: Any, what: str, *, error: type[Exception] = KeyValidationError) -> bytes:
    """A 32-byte seed no party chose: every party's uniform shares of four elements mod 2^61 - 1,
    opened with commit-before-open and hashed with ``what``
    (:func:`~shaper.crypto.ckks.multiparty.seed_from_opened`). Uniform if one party's shares are."""
    share = engine.random_mod((4,), (SEED_PRIME,)).share
    opened = committed_sum(engine, share, np.array([SEED_PRIME], np.uint64), engine._tag(f"seed-{what}"), error=error)
    return seed_from_opened(what, opened)
