"""``shaper circuit run``: a Bristol Fashion circuit evaluated in three-party replicated sharing,
by three local processes over loopback TLS 1.3 (``--local 3``), by three hosts (``--parties FILE
--me NAME``, one process per host), or in the clear with ``--plain``.

Who gives which input: with ``--local 3`` party 0 holds every input value (it read them from the
command line) and shares them. On real hosts input value k of the circuit (counting from 0, in
the circuit's order) is given by party k mod 3 of the parties file, each party passing only its
own values: for AES-128, the first party gives the key, the second the plaintext and the third no
input. The three parties first check that they run the same circuit (a SHA-256 fingerprint of
its gates), evaluate it on replicated shares (Araki et al.; semi-honest, honest majority: no
single party learns another's input) and open the outputs to everyone. Throughput is measured by
``benchmarks/replicated.py``, outside the package.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

from ..circuits import bristol
from ..errors import ConfigError
from ..protocols import replicated

PARTIES = 3  # replicated sharing: exactly three computing parties


def bundled_aes() -> Path:
    """The AES-128 Bristol Fashion circuit shipped with shaper."""
    return Path(str(resources.files("shaper") / "circuits" / "aes_128.txt"))


def parse_hex_inputs(circuit: bristol.Circuit, values: Sequence[str]) -> list[int]:
    """Big-endian hex strings, one per input value, checked against the value widths."""
    if len(values) != len(circuit.inputs):
        raise ValueError(f"{circuit.name} takes {len(circuit.inputs)} input values "
                         f"(widths {', '.join(map(str, circuit.inputs))} bits), got {len(values)}")
    return [_hex_value(text, width, k) for k, (text, width) in enumerate(zip(values, circuit.inputs))]


def _hex_value(text: str, width: int, k: int) -> int:
    """Input value k (from 0) of ``width`` bits from big-endian hex."""
    clean = text.lower().removeprefix("0x")
    try:
        v = int(clean, 16)
    except ValueError:
        raise ValueError(f"input {k + 1} is not hexadecimal: {text!r}") from None
    if v >> width:
        raise ValueError(f"input {k + 1} = 0x{clean} does not fit in {width} bits")
    return v


def owner(k: int) -> int:
    """The party (its index in the parties file) that gives input value k on real hosts."""
    return k % PARTIES


def parse_party_inputs(circuit: bristol.Circuit, index: int, values: Sequence[str]) -> dict[int, int]:
    """{input value k: its value} for the values party ``index`` gives (those with
    ``owner(k) == index``, in the circuit's order), from its big-endian hex strings."""
    mine = [k for k in range(len(circuit.inputs)) if owner(k) == index]
    if len(values) != len(mine):
        wanted = (f"input value{'s' if len(mine) > 1 else ''} {', '.join(str(k + 1) for k in mine)} of "
                  f"{len(circuit.inputs)} (widths {', '.join(str(circuit.inputs[k]) for k in mine)} bits)"
                  if mine else "no input value")
        raise ValueError(f"party {index + 1} of the parties file gives {wanted} of {circuit.name} "
                         f"(input value k comes from party k mod 3), got {len(values)} --inputs")
    return {k: _hex_value(text, circuit.inputs[k], k) for k, text in zip(mine, values)}


def fingerprint(circuit: bristol.Circuit) -> str:
    """SHA-256 of a circuit's shape and gates: the parties compare it before evaluating."""
    h = hashlib.sha256(repr((circuit.wires, circuit.inputs, circuit.outputs)).encode())
    for column in (circuit.op, circuit.a, circuit.b, circuit.out):
        h.update(column.tobytes())
    return h.hexdigest()


def _hex(value: int, width: int) -> str:
    return f"{value:0{-(-width // 4)}x}"


def _circuit_job(session: Any, circuit: bristol.Circuit, values: list[int]) -> list[str]:
    # party 0 holds every input value (it read them from the command line)
    inputs = [[v] if session.index == 0 else 1 for v in values]
    return _evaluate(session, circuit, inputs, [0] * len(values))


def _evaluate(session: Any, circuit: bristol.Circuit, inputs: list, owners: list[int]) -> list[str]:
    eng = replicated.Replicated3PC(session)
    outs = replicated.evaluate(session, circuit, inputs, owners=owners, engine=eng)
    opened = [eng.reveal_wires(o) for o in outs]
    return [_hex(bristol.from_bitsliced(rows, 1)[0], w) for rows, w in zip(opened, circuit.outputs)]


def prepare_party(path: str | Path, inputs: Sequence[str], parties: str | Path,
                  me: str) -> tuple[bristol.Circuit, dict[int, int]]:
    """What party ``me`` of the parties file checks before it joins: the circuit (a file or a
    bundled name) and its own input values. Raises ``FileNotFoundError``, :class:`ConfigError`
    (a parties file without exactly three parties, or without ``me``) or ``ValueError`` (inputs
    that are not this party's count, not hexadecimal, or too wide)."""
    from ..net import load_parties

    listed = load_parties(parties)
    if len(listed.parties) != PARTIES:
        raise ConfigError(f"replicated sharing runs with exactly 3 parties; {parties} lists {len(listed.parties)}")
    circuit = bristol.load(path)
    return circuit, parse_party_inputs(circuit, listed.index(me), inputs)


def run_party(parties: str | Path, me: str, circuit: bristol.Circuit, mine: dict[int, int], *,
              key: str | Path | None = None) -> list[str]:
    """Joins the job of the parties file as ``me``, checks that the three parties run the same
    circuit, evaluates it with this party's input values ``mine`` (:func:`prepare_party`), and
    returns the outputs, opened to every party, as big-endian hex."""
    from ..net import Session

    with Session.from_config(parties, me=me, key=key) as session:
        ours = fingerprint(circuit)
        session.broadcast(ours, "circuit")
        for peer, theirs in session.gather("circuit").items():
            if theirs != ours:
                raise ConfigError(f"party {peer!r} runs a different circuit than {circuit.name} here: every party "
                                  "must pass the same circuit file")
        inputs = [[mine[k]] if k in mine else 1 for k in range(len(circuit.inputs))]
        return _evaluate(session, circuit, inputs, [owner(k) for k in range(len(circuit.inputs))])


def run_circuit(path: str | Path, inputs: Sequence[str], *, plain: bool = False, parties: int = 3) -> list[str]:
    """Evaluates a Bristol Fashion file (or a bundled circuit by name, e.g. ``"aes_128.txt"``) on
    hex inputs, in 3PC (three local processes over TLS) or in the clear; returns the outputs as
    big-endian hex. Raises ``FileNotFoundError`` for an unknown circuit and ``ValueError`` for a
    malformed one or for inputs that do not match its input widths."""
    from ..net import launch

    circuit = bristol.load(path)
    values = parse_hex_inputs(circuit, inputs)
    if plain:
        outs = bristol.evaluate_plain(circuit, [[v] for v in values])
        return [_hex(o[0], w) for o, w in zip(outs, circuit.outputs)]
    if parties != 3:
        raise ValueError("replicated sharing runs with exactly 3 parties (--local 3)")
    results = launch(3, _circuit_job, circuit, values, timeout=600)
    if any(r != results[0] for r in results[1:]):
        raise RuntimeError("the parties opened different outputs")
    return results[0]
