"""RNS-CKKS: approximate homomorphic encryption of complex vectors (local math, no I/O).

The pieces, each in its own module:

* :mod:`.params` — :class:`Parameters` (``from_literal``: N, prime bit sizes, special prime,
  scale; checked against the HE Standard's 128-bit table);
* :mod:`.encoder` — :class:`Encoder` (canonical embedding) and :class:`Plaintext`;
* :mod:`.keys` — secret, public, relinearisation and Galois keys, generated locally or from
  given polynomials (what the multiparty key generation supplies), and their RNS layout;
* :mod:`.scheme` — :func:`encrypt`, :func:`decrypt`, :class:`Ciphertext`, :class:`Evaluator`
  (add, plaintext multiply, multiply + relinearise, rescale, rotate, conjugate, hoisted
  rotations, baby-step giant-step matrix-vector products);
* :mod:`.serial` — versioned binary serialisation (``to_bytes``/``from_bytes``, ``save``/``load``).
* :mod:`.multiparty` — threshold CKKS's local steps on one party's share (key-generation shares,
  joint-input shares, flooded decryption shares, digests); the protocol is
  :mod:`shaper.protocols.threshold_ckks`.
* :mod:`.bounds` — worst-case error bounds of every operation (what the flood is sized by).

The polynomial arithmetic runs on the RNS kernels of :mod:`shaper.kernels.rns` (native Rust
where built, the numpy reference otherwise). ``docs/ckks.md`` has the parameters, precision and
cost tables.

Example::

    from shaper.crypto import ckks
    params = ckks.Parameters.from_literal(2**14, [60] + [53] * 6, 60, 53)
    keys = ckks.KeySet(params, rotations=[1])
    enc, ev = ckks.Encoder(params), ckks.Evaluator(params, keys.relin, keys.galois)
    x = ckks.encrypt(keys.public, enc.encode([1.0, 2.0, 3.0]))
    y = ev.rotate(ev.mul_rescale(x, x), 1)
    enc.decode(ckks.decrypt(keys.secret, y))[:2]   # ~ [4.0, 9.0]
"""

from .encoder import Encoder, Plaintext
from .keys import (
                   KeySet,
                   PublicKey,
                   SecretKey,
                   SecretKeyShare,
                   SwitchingKey,
                   conjugation_element,
                   galois_element,
                   galois_key,
                   public_key,
                   relin_key,
                   sample_gaussian,
                   sample_ternary,
                   switching_key,
)
from .params import HE_STANDARD_128, Parameters, chain_primes
from .scheme import Ciphertext, Evaluator, decrypt, encrypt
from .serial import from_bytes, load, save, to_bytes

__all__ = [
                   "HE_STANDARD_128",
                   "Ciphertext",
                   "Encoder",
                   "Evaluator",
                   "KeySet",
                   "Parameters",
                   "Plaintext",
                   "PublicKey",
                   "SecretKey",
                   "SecretKeyShare",
                   "SwitchingKey",
                   "chain_primes",
                   "conjugation_element",
                   "decrypt",
                   "encrypt",
                   "from_bytes",
                   "galois_element",
                   "galois_key",
                   "load",
                   "public_key",
                   "relin_key",
                   "sample_gaussian",
                   "sample_ternary",
                   "save",
                   "switching_key",
                   "to_bytes",
]
