"""BGV over Z[X]/Φ_m(X) for odd m with plaintext modulus 2, in Gentry–Halevi–Smart's style, and
homomorphic AES-128 (local math, no I/O). The GHS half of the fifth seed (GMPFHE, §5.2 and
Appendix C.1).

The pieces, in dependency order:

* :mod:`.gf2` — GF(2^d) arithmetic on numpy arrays;
* :mod:`.algebra` — the plaintext algebra GF(2)[X]/Φ_m: its slots (values at ζ^t in GF(2^d)),
  the hypercube of Z_m^*/⟨2⟩, encode/decode, automorphisms on slots, rotations, and the AES
  field GF(2^8) embedded in the slots;
* :mod:`.slots` — a plaintext slot simulator with the evaluator's method names (the oracle);
* :mod:`.params` — parameter sets (named: ``test-257``, ``test-4369``, ``ghs-53261``,
  ``aes-53261``) and their security estimate;
* :mod:`.ring` — double-CRT arithmetic over the general-m transform of
  :mod:`shaper.kernels.cyclo` (native Rust where built), rounding that keeps the plaintext,
  key-switching digits;
* :mod:`.multiparty` — the key material as local steps on one party's shares (what threshold
  GHS will open; single-key key generation is the one-party case);
* :mod:`.scheme` — keys, encryption, decryption, the evaluator (products, relinearisation,
  modulus and key switching, Frobenius maps and automorphisms) and its noise estimate;
* :mod:`.aes` — AES-128 in GHS's packed layout on any evaluator.

``docs/bgv.md`` explains the ring, the slots, the AES circuit and its levels.
"""
