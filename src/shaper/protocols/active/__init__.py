"""The active n-party engine: authenticated (SPDZ-style MAC'd) shares over odd prime moduli and
authenticated bits, with preprocessing from OT extension, checks before every output, and abort
on any deviation (see ``docs/mpc.md``, "Active security").

* :class:`ActiveEngine` (:mod:`.engine`): input, open, add, Beaver multiplication, outputs to
  all or to one party, behind the engine interface's prime-field domain;
* :class:`AuthShares` (:mod:`.shares`): a share and K MAC shares per modulus, and how many keys
  a modulus needs;
* :mod:`.check`: the batched MAC check and the comparison of views;
* :mod:`.preprocessing`: authentication (COPE), input masks and triples (combining, sacrifice);
* :mod:`.bits`: authenticated bits (TinyOT-style pairwise MACs), AND triples (WRK17's leaky
  AND, checked and bucketed), hashed-MAC openings.
"""

from .bits import AuthBits
from .engine import ActiveEngine
from .shares import SOUNDNESS, AuthShares

__all__ = ["SOUNDNESS", "ActiveEngine", "AuthBits", "AuthShares"]
