"""Threshold CKKS by MPC key generation (GMPFHE): n parties generate the keys of ordinary
single-key RNS-CKKS inside the n-party MPC engine, encrypt inputs jointly, each evaluate agreed
circuits, and decrypt jointly only what every party can account for.

The pieces (Lattigo's split: local steps apart from the protocol that moves them):

* :mod:`shaper.crypto.ckks.multiparty` — the local steps on one party's share, no I/O;
* :mod:`shaper.crypto.ckks.bounds` — worst-case error bounds of every CKKS operation;
* :mod:`.commit` — commit-before-open for key material, joint seeds and joint inputs;
* :mod:`.keygen` — :func:`keygen` over the n-party engine, with its joint test decryption;
* :mod:`.inputs` — :func:`encrypt_jointly`: inputs whose error no party chose;
* :mod:`.evaluation` — :func:`evaluate`: agreed circuits every party runs itself;
* :mod:`.decrypt` — :func:`decrypt` / :func:`decrypt_many`: accounting, consent, budget,
  per-party flooding by the worst case, the opening;
* :mod:`.argmax` — :func:`decrypt_argmax`: decryption to a label (the argmax of slots)
  computed inside the MPC, nothing but the label opened, no flood;
* :mod:`.ledger` — what each party accounts for, and the key's decryption budget, on disk;
* :mod:`.keystore` — :class:`PublicKeys`, :class:`JointKeys` and the key directory;
* :mod:`.polys` — shared polynomials on the engine (kernel rows, openings, joint seeds).

Threat model (docs/threshold-ckks.md has the argument). Any n - 1 parties may collude. Inside
shaper's sub-protocols (MPC key generation, joint encryption, joint decryption) parties send the
messages the protocol says (the engine is passive), except that they may send them last, which
the commitments neutralise. Outside them a party may do anything: choose circuits, craft
ciphertexts, encrypt alone with any error, ask for any decryption any number of times.

What each party learns:

* the public, relinearisation and rotation keys, opened. With ``method="exact"`` (the paper's)
  the secret s is uniform ternary and every error a discrete Gaussian of width ``params.sigma``,
  all sampled *inside* the MPC: the keys have exactly the single-key distribution;
  ``method="local"`` lets every party add its own error (sigma sqrt(n) in all);
* its own additive share s_i of the secret (NTT form, every limb): uniform on its own, never
  sent, stored 0600;
* joint inputs (c_0 = sum_i (e_i - a s_i) + the owner's message, c_1 = a from a joint seed):
  RLWE under s;
* per joint decryption, the recipient(s) learn m + e + sum_i f_i on limb q_0, f_i party i's own
  Gaussian flood, sized from the ciphertext's worst-case error bound E, the key's budget Q and
  lambda = 40 so that no coalition recovers s with probability above 2^-40 over the whole budget
  (or, in ``statistical`` mode, its view is 2^-40 close to the results alone). The bound holds
  because a party consents only to ciphertexts in its own ledger: joint inputs and outputs of
  evaluations it ran itself. Anything else is refused before anything is opened.

What remains on the passive engine: a party that deviates inside the joint encryption can add a
message beyond the declared bound; a party that deviates inside the MPC engine can make keys or
results wrong, not choose them; any party can abort.

**On the active engine** (:class:`~shaper.protocols.active.ActiveEngine`; the key then carries
this party's MAC shares of s, :class:`.keystore.AuthenticatedShare`, and encryption and
decryption run on that engine too): any n - 1 parties may deviate arbitrarily. Every opening of
key generation, joint encryption and decryption is MAC-checked, and every contributed term is a
range-checked input before anything depends on it: local key errors and joint-input errors
within +-floor(6 sigma), the owner's encoded coefficients within floor(scale B) + 1, each flood
within +-ceil(8.6 sigma_f). The honest parties abort (naming the owner of a failed range proof)
or the output is right; the ledger records the enforced bounds (the message's at W times the
coefficient bound), and :func:`plan_flood` reports the precision n - 1 deviating floods leave
at worst. docs/threshold-ckks.md, "On the active engine", has the table and the costs.
"""

from ...crypto.ckks.multiparty import (
    DEFAULT_BUDGET,
    FLOOD_MODES,
    SECURITY_LAMBDA,
    ciphertext_digest,
    decryption_precision,
    flood_sigma,
)
from ...net.phases import Phase
from .argmax import ArgmaxPlan, argmax_plan, decrypt_argmax
from .decrypt import Flood, FloodPolicy, decrypt, decrypt_many, plan_flood, prepare_floods, prepared_floods
from .evaluation import Circuit, chain, evaluate, identity, parse
from .inputs import Packing, encrypt_jointly, noise_model
from .keygen import METHODS, check_joint_keys, keygen
from .keystore import SHARE_FILE, JointKeys, PublicKeys
from .ledger import LEDGER_FILE, Ledger

__all__ = ["ArgmaxPlan", "Circuit", "DEFAULT_BUDGET", "FLOOD_MODES", "Flood", "FloodPolicy", "JointKeys",
           "LEDGER_FILE", "Ledger", "METHODS", "Packing", "Phase", "PublicKeys", "SECURITY_LAMBDA", "SHARE_FILE",
           "argmax_plan", "chain", "check_joint_keys", "ciphertext_digest", "decrypt", "decrypt_argmax",
           "decrypt_many", "decryption_precision", "encrypt_jointly", "evaluate", "flood_sigma", "identity",
           "keygen", "noise_model", "parse", "plan_flood", "prepare_floods", "prepared_floods"]
