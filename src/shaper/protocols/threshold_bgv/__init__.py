"""Threshold GHS (GMPFHE §5.2 with the GHS-style BGV of :mod:`shaper.crypto.bgv`): n parties
generate single-key BGV keys inside the n-party MPC and hold the secret in additive shares;
inputs are encrypted jointly, every party evaluates agreed circuits itself, and a joint
decryption opens only plaintext bits of what every party can account for.

The pieces (threshold CKKS's structure, :mod:`shaper.protocols.threshold_ckks`, whose commitments,
joint seeds, ledger, consent round and key directory they use):

* :mod:`shaper.crypto.bgv.multiparty` — the local steps on one party's share, no I/O;
* :mod:`.keygen` — :func:`keygen` over the n-party engine, with its joint test decryption;
* :mod:`.inputs` — :func:`encrypt_jointly`: inputs whose c_1 and error no party chose;
* :mod:`.evaluation` — :func:`evaluate`: agreed circuits (:func:`aes128`) every party runs;
* :mod:`.decrypt` — :func:`decrypt_many`: accounting, consent, budget, an in-MPC range check and
  the conversion of the phase to its plaintext bits; :func:`decrypt_bits` is its bare core;
  ``method="flood"`` floods the phase instead (:func:`plan_flood`) and opens it: the parity of
  the centred opening is the bit;
* :mod:`.keystore` — :class:`PublicKeys`, :class:`JointKeys` and the key directory.

Threat model (docs/bgv.md has the table). Any n − 1 parties may collude. Inside the
sub-protocols (key generation, joint encryption, joint decryption) parties send what the protocol
says (the engine is passive), except that they may send last, which the commitments neutralise.
Outside them a party may do anything: choose circuits, craft ciphertexts, encrypt alone, ask for
any decryption any number of times. What each learns: the opened keys; its own share; joint
inputs; per joint decryption, the recipient(s) the plaintext bits (every slot) and every party
one bit (whether a phase may have wrapped). Nothing of the noise is opened, so no flooding is
needed; the accounting is what stops a plaintext that depends on s. The flooded decryption opens
the error plus every party's flood to the recipient(s) instead (threshold CKKS's key-recovery
argument, docs/bgv.md).

On the active engine (:class:`~shaper.protocols.active.ActiveEngine`; every function here
follows the engine it is given) any n − 1 parties may deviate arbitrarily inside the
sub-protocols too: every share carries MACs, every opening is MAC-checked, every key error,
input error, plaintext coefficient and flood is a range-checked input, and the decryption
converts to authenticated bits (or opens the flooded phase MAC-checked); the honest parties abort (naming the owner of a failed range proof) or the
output is right. The key directory then holds the party's MAC keys and MAC shares of s
(``secret-macs.npz``, 0600).
"""

from .decrypt import METHODS, Flood, decrypt_bits, decrypt_many, plan, plan_flood
from .evaluation import Circuit, aes128, evaluate
from .inputs import encrypt_jointly
from .keygen import check_joint_keys, keygen
from .keystore import JointKeys, PublicKeys

__all__ = ["METHODS", "Circuit", "Flood", "JointKeys", "PublicKeys", "aes128", "check_joint_keys", "decrypt_bits",
           "decrypt_many", "encrypt_jointly", "evaluate", "keygen", "plan", "plan_flood"]
