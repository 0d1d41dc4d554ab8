"""The deviating-party harness: one party of a real run (in-memory channels, threads) deviates
at a chosen step, and the test sees what every party ended with.

A :class:`Deviation` names the messages it touches (a regular expression on the message tag and
which of the matching messages: the first, the k-th, or every one) and what it does to them:

* ``offset``: add ``delta`` to one entry of a uint64 array (mod the entry's modulus where the
  deviation is given the basis, so the message stays well-formed: the *share* is wrong, not
  the frame);
* ``equivocate``: the same, towards one peer only (different values to different peers);
* ``drop``: send nothing (the peers time out: skipping a step, a check, or stalling);
* ``flip``: flip one byte of a bytes payload (a commitment or its opening);
* ``rush``: in a commit-then-open round, read every peer's opening before sending its own, then
  open a forged value chosen to cancel the honest ones (not the one it committed to).

:class:`DeviatingSession` wraps a real :class:`~shaper.net.Session` and applies the deviations
to what this party sends; everything else passes through. :func:`run` executes a program on
every party with one deviating and returns each party's outcome, ``("ok", result)`` or
``("error", exception class name, message)``, so a test asserts that every honest party
stopped (and how) or that the output is right.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from shaper.net import NetConfig, run_in_memory
from shaper.net.session import Session

DROP = object()


@dataclass
class Deviation:
    tag: str                       # regular expression matched against the whole tag
    action: str                    # offset | equivocate | drop | flip | rush
    nth: int | None = 0            # which matching message (by distinct tag): 0 = the first, None = every
    delta: int = 1
    index: int | None = 0          # flat entry (array) or byte (bytes) to change; None: every entry
    moduli: tuple[int, ...] = ()   # for offsets that keep residues in range
    peers: tuple[str, ...] = ()    # only towards these peers (default: every peer)
    seen: list[str] = field(default_factory=list)
    fired: int = 0

    def _selected(self, tag: str) -> bool:
        if not re.fullmatch(self.tag, tag):
            return False
        if tag not in self.seen:
            self.seen.append(tag)
        return self.nth is None or self.seen.index(tag) == self.nth

    def apply(self, value: Any, peer: str, peers: list[str]) -> Any:
        if self.peers and peer not in self.peers:
            return value
        if self.action == "drop":
            self.fired += 1
            return DROP
        if self.action == "equivocate" and peer != peers[0]:
            return value
        if self.action in ("offset", "equivocate"):
            self.fired += 1
            return _offset(value, self.delta, self.index, self.moduli)
        if self.action == "flip":
            self.fired += 1
            data = bytearray(value)
            data[self.index % len(data)] ^= 0x01
            return bytes(data)
        raise ValueError(self.action)


def _offset(value: Any, delta: int, index: int, moduli: tuple[int, ...]) -> Any:
    if isinstance(value, bytes):
        data = bytearray(value)
        data[index % len(data)] = (data[index % len(data)] + delta) % 256
        return bytes(data)
    arr = np.array(value, copy=True)
    if arr.dtype.kind != "u":
        arr = arr.astype(np.uint64)
    flat = arr.reshape(-1)
    width = 8 * arr.dtype.itemsize  # uint8 rows stay uint8: the frame stays well-formed
    if index is None:
        flat += arr.dtype.type(delta % (1 << width))
        return arr
    i = index % flat.size
    if moduli:
        q = moduli[i % len(moduli)] if arr.ndim and arr.shape[-1] == len(moduli) else moduli[0]
        flat[i] = np.uint64((int(flat[i]) + delta) % q)
    else:
        flat[i] = arr.dtype.type((int(flat[i]) + delta) % (1 << width))
    return arr


class DeviatingSession:
    """A session whose sends go through the deviations (see the module notes)."""

    def __init__(self, session: Session, deviations: list[Deviation], rush: Callable | None = None) -> None:
        self._session = session
        self._deviations = deviations
        self._rush = rush
        self._stash: dict[tuple[str, str], Any] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def send(self, peer: Any, value: Any, tag: str = "") -> int:
        name = self._session.peer_name(peer)
        for d in self._deviations:
            if d._selected(tag):
                if d.action == "rush":
                    value = self._rushed(d, tag, value)
                    continue
                value = d.apply(value, name, self._session.peers)
                if value is DROP:
                    return 0
        return self._session.send(peer, value, tag)

    def _rushed(self, d: Deviation, tag: str, mine: bytes) -> bytes:
        """Read every peer's opening under ``tag`` first (stashed for the later receives), then
        send the forged opening ``rush`` computes from them."""
        for p in self._session.peers:
            if (p, tag) not in self._stash:
                self._stash[(p, tag)] = self._session.recv_bytes(p, tag)
        d.fired += 1
        return self._rush(mine, [self._stash[(p, tag)] for p in self._session.peers])

    def recv_bytes(self, peer: Any, tag: str = "", **kw: Any) -> bytes:
        key = (self._session.peer_name(peer), tag)
        if key in self._stash:
            return self._stash.pop(key)
        return self._session.recv_bytes(peer, tag, **kw)

    def broadcast(self, value: Any, tag: str = "") -> None:
        for peer in self._session.peers:
            self.send(peer, value, tag)

    def shared_prg(self, group: Any, tag: str = "shared-prg") -> Any:
        return Session.shared_prg(self, group, tag)  # its messages go through this wrapper too

    def barrier(self, tag: str = "barrier") -> None:
        return Session.barrier(self, tag)


def _job(session: Session, program: Callable, plan: dict, rush: Callable | None, args: tuple) -> tuple:
    mine = plan.get(session.index)
    ses = DeviatingSession(session, mine, rush) if mine is not None else session
    try:
        return ("ok", program(ses, *args))
    except Exception as exc:  # noqa: BLE001 - the outcome is what the test inspects
        session.abort(exc)
        return ("error", type(exc).__name__, str(exc))


def run(parties: int, program: Callable, *args: Any, deviant: Any = None, deviations: Any = (),
        rush: Callable | None = None, timeout: float = 4.0) -> list[tuple]:
    """``program(session, *args)`` at every party, party ``deviant`` (default: none; a list of
    parties: a coalition, every member applying ``deviations``, or each its own list when
    ``deviations`` maps a party to one) deviating;
    every party's outcome in party order. ``timeout``: each receive's limit (a dropped message
    surfaces as a timeout within it)."""
    if deviant is None:
        plan: dict = {}
    else:
        coalition = [deviant] if isinstance(deviant, int) else list(deviant)
        if isinstance(deviations, dict):
            plan = {i % parties: list(deviations.get(i, ())) for i in coalition}
        else:
            plan = {i % parties: list(deviations) for i in coalition}
    config = NetConfig(timeout=timeout)
    return run_in_memory(parties, _job, program, plan, rush, args, config=config, timeout=120 + 10 * timeout)


_ADDING = __import__("threading").local()


def adding_to_open_sum(parties: int, program: Callable, *args: Any, prefix: str = "", index: int = 0,
                       nth: int | None = None, deviant: int = -1, timeout: float = 60.0) -> list[tuple]:
    """:func:`run` with party ``deviant`` (default the last) adding 1 to entry ``index`` of the
    residues it sends in every (or the ``nth``) opening of a share that carries its own terms
    (:meth:`~shaper.protocols.active.ActiveEngine.open_sum`, phases starting with ``prefix``).
    Unlike an offset on the wire, the party's own view agrees with what it sent, so only the
    protocol's check of the carried terms can catch it. Asserts that such an opening happened."""
    import unittest.mock

    from shaper.protocols.active import ActiveEngine

    real = ActiveEngine.open_sum
    seen: list[str] = []
    bad = deviant % parties

    def shifted(self: Any, residues: np.ndarray, moduli: Any, phase: str) -> np.ndarray:
        if getattr(_ADDING, "on", False) and phase.startswith(prefix):
            seen.append(phase)
            if nth is None or len(seen) - 1 == nth:
                residues = residues.copy()
                flat = residues.reshape(-1)
                flat[index] = (int(flat[index]) + 1) % int(moduli[index % residues.shape[-1]])
        return real(self, residues, moduli, phase)

    def job(session: Any, *a: Any) -> Any:
        _ADDING.on = session.index == bad
        return program(session, *a)

    with unittest.mock.patch.object(ActiveEngine, "open_sum", shifted):
        res = run(parties, job, *args, timeout=timeout)
    assert seen, "the deviating party never opened a share that carries its own terms"
    return res
