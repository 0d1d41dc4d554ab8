"""Joint decryption under a threshold CKKS key, with consent and jointly sampled smudging.

First every party sends the request it is answering (the ciphertexts' digests, the recipient,
the smudging width) and whether it consents; unless all requests agree and all consent, nothing
is opened. Then the smudging noise r (uniform in [-2^(k-1), 2^(k-1)) per coefficient) is sampled
jointly with edaBits, and each party sends its share of c_0 + c_1 s + r on limb q_0
(:func:`shaper.crypto.ckks.multiparty.decryption_share`), opened to the recipient.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...crypto import ckks
from ...crypto.ckks.multiparty import (
    SMUDGE_BITS,
    decode_opened,
    decryption_request,
    decryption_share,
    validate_ciphertexts,
)
from ...errors import ConfigError, DecryptionRefused
from .polys import open_rows

__all__ = ["SMUDGE_CHUNK", "decrypt", "decrypt_many"]

#: coefficients whose smudging noise is sampled per edaBits call in a batch decryption
SMUDGE_CHUNK = 1 << 16


def decrypt(engine: Any, share: ckks.SecretKeyShare, ct: ckks.Ciphertext, *, to: int | None = None,
            smudge_bits: int = SMUDGE_BITS, approve: Callable[[dict], bool] | None = None) -> np.ndarray | None:
    """Joint decryption of ``ct`` to party ``to`` (every party when None): the decoded slots
    there, None elsewhere. Every party calls it with its own copy of the ciphertext.

    First every party sends the request it is answering (the ciphertext's digest, the
    recipient, the smudging width) and whether it consents (``approve(request)``, default yes);
    unless all requests agree and all consent, every party raises
    :class:`~shaper.errors.DecryptionRefused` and nothing is opened. Then the smudging noise is
    sampled jointly and each party sends its share of c_0 + c_1 s + r on limb q_0."""
    out = decrypt_many(engine, share, [ct], to=to, smudge_bits=smudge_bits, approve=approve)
    return None if out is None else out[0]


def decrypt_many(engine: Any, share: ckks.SecretKeyShare, cts: Sequence[ckks.Ciphertext], *, to: int | None = None,
                 smudge_bits: int = SMUDGE_BITS, approve: Callable[[dict], bool] | None = None) -> np.ndarray | None:
    """:func:`decrypt` of many ciphertexts in one consent round, one smudging draw and one
    opening: (len(cts), slots) decoded values at party ``to`` (every party when None), None
    elsewhere. The request names every ciphertext's digest, in order."""
    params = share.params
    cts = validate_ciphertexts(params, cts, smudge_bits)
    session = engine.session
    if to is not None and not 0 <= to < session.n:
        raise ConfigError(f"decryption recipient {to} is not a party index 0..{session.n - 1}")
    request = decryption_request(cts, to, smudge_bits)
    _agree(session, request, approve, len(cts))

    q0, n, m = params.moduli[0], params.n, len(cts)
    # r < 2^k jointly (minus 2^(k-1) centres it), in chunks of SMUDGE_CHUNK coefficients: the
    # bit planes of one chunk stay in cache (one call for a batch of 20 ciphertexts took 2.2x the
    # CPU per ciphertext of a single decryption)
    total = m * n
    parts = [engine.edabits(min(SMUDGE_CHUNK, total - at), smudge_bits, (q0,))[1].share
             for at in range(0, total, SMUDGE_CHUNK)]
    smudge = np.ascontiguousarray(np.concatenate(parts).T).reshape(m, 1, n)
    opened = open_rows(engine, decryption_share(share, cts, smudge, smudge_bits), (q0,), to)
    return None if opened is None else decode_opened(params, opened, cts)


def _agree(session: Any, request: dict, approve: Callable[[dict], bool] | None, count: int) -> None:
    """The consent round: every party's request and consent to every other; raises
    :class:`~shaper.errors.DecryptionRefused` at every party unless all agree and consent."""
    consent = bool(approve(dict(request))) if approve is not None else True
    session.broadcast({"request": request, "consent": consent}, tag="tckks-decrypt")
    answers = session.gather(tag="tckks-decrypt")
    for name, a in answers.items():
        if not isinstance(a, dict) or a.get("request") != request:
            theirs = a.get("request") if isinstance(a, dict) else a
            raise DecryptionRefused(f"party {name!r} answered a different decryption request "
                                    f"({_short(theirs)}; ours {_short(request)})")
    refused = sorted(name for name, a in answers.items() if a.get("consent") is not True)
    if not consent:
        refused.insert(0, session.name)
    if refused:
        digest = request["digest"]
        what = f"ciphertext {digest[:16]}..." if count == 1 else f"{count} ciphertexts"
        raise DecryptionRefused(f"decryption of {what} refused by {', '.join(refused)}")


def _short(request: Any) -> Any:
    """A request for an error message: a list of digests shortened to its length and first one."""
    if isinstance(request, dict) and isinstance(request.get("digest"), list):
        d = request["digest"]
        return {**request, "digest": f"[{len(d)} digests, first {str(d[0])[:16] if d else ''}...]"}
    return request
