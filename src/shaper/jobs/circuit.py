"""``shaper circuit run``: a Bristol Fashion circuit evaluated in three-party replicated sharing
(three local processes over loopback TLS 1.3), or in the clear with ``--plain``.

Party 0 holds every input value (it read them from the command line) and shares them; the three
parties evaluate the circuit on replicated shares (Araki et al.; semi-honest, honest majority) and
open the outputs to everyone. Throughput is measured by
``benchmarks/replicated.py``, outside the package.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Sequence

from ..circuits import bristol
from ..protocols import replicated


def bundled_aes() -> Path:
    """The AES-128 Bristol Fashion circuit shipped with shaper."""
    return Path(str(resources.files("shaper") / "circuits" / "aes_128.txt"))


def parse_hex_inputs(circuit: bristol.Circuit, values: Sequence[str]) -> list[int]:
    """Big-endian hex strings, one per input value, checked against the value widths."""
    if len(values) != len(circuit.inputs):
        raise ValueError(f"{circuit.name} takes {len(circuit.inputs)} input values "
                         f"(widths {', '.join(map(str, circuit.inputs))} bits), got {len(values)}")
    out = []
    for k, (text, width) in enumerate(zip(values, circuit.inputs)):
        clean = text.lower().removeprefix("0x")
        try:
            v = int(clean, 16)
        except ValueError:
            raise ValueError(f"input {k + 1} is not hexadecimal: {text!r}") from None
        if v >> width:
            raise ValueError(f"input {k + 1} = 0x{clean} does not fit in {width} bits")
        out.append(v)
    return out


def _hex(value: int, width: int) -> str:
    return f"{value:0{-(-width // 4)}x}"


def _circuit_job(session: Any, circuit: bristol.Circuit, values: list[int]) -> list[str]:
    eng = replicated.Replicated3PC(session)
    # party 0 holds every input value (it read them from the command line)
    inputs = [[v] if session.index == 0 else 1 for v in values]
    outs = replicated.evaluate(session, circuit, inputs, owners=[0] * len(values), engine=eng)
    opened = [eng.reveal_bits(o) for o in outs]
    return [_hex(bristol.from_bitsliced(rows, 1)[0], w) for rows, w in zip(opened, circuit.outputs)]


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
