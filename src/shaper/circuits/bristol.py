"""Bristol Fashion boolean circuits: parser, plaintext evaluator, and the layered schedule the
three-party engine runs.

Format (Bristol Fashion, as published with the circuits in ``tests/data/circuits``): line 1 "gates wires", line 2 "n_inputs w_1 ... w_n",
line 3 "n_outputs v_1 ... v_m", then one gate per line: "n_in n_out in... out... OP" with OP in
XOR, AND, INV, EQW, EQ, MAND. Input values occupy the lowest wires in order, outputs the highest;
wire j of a value is bit j of the integer (least significant bit first). For AES-128 the first
value is the key and the second the plaintext, each a 16-byte string read as a big-endian
integer (:func:`block_to_int`).

Values are evaluated *bit-sliced*: each wire holds a row of uint64 words, bit k of word w being
instance 64·w + k, so one gate is one word-wide operation over many circuit instances.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import ShaperError
from ..kernels.bits import AND, EQ0, EQ1, EQW, INV, XOR, XOR3

_NAMES = {"XOR": XOR, "AND": AND, "INV": INV, "EQW": EQW}

MAX_WIRES = 1 << 30
MAX_INPUT_BITS = 1 << 24
_BUNDLED = Path(__file__).resolve().parent  # the .txt circuits shipped beside this module


class CircuitFormatError(ShaperError, ValueError):
    """A circuit file is malformed (the message names the line and the problem)."""


@dataclass(frozen=True)
class Circuit:
    """A parsed Bristol Fashion circuit. Gates are in file order (topological), as four
    int arrays: ``op`` (gate codes; MAND is expanded into ANDs, EQ into EQ0/EQ1), ``a``, ``b``
    (input wires; ``b`` = -1 for one-input gates) and ``out``."""

    name: str
    wires: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    op: np.ndarray
    a: np.ndarray
    b: np.ndarray
    out: np.ndarray
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def gates(self) -> int:
        return int(self.op.size)

    @property
    def and_gates(self) -> int:
        return int(np.count_nonzero(self.op == AND))

    @property
    def input_bits(self) -> int:
        return sum(self.inputs)

    @property
    def output_bits(self) -> int:
        return sum(self.outputs)

    def counts(self) -> dict[str, int]:
        """Gates per operation (MAND counted as its ANDs)."""
        count = lambda *codes: int(np.isin(self.op, codes).sum())  # noqa: E731
        return {"AND": count(AND), "XOR": count(XOR), "INV": count(INV), "EQW": count(EQW), "EQ": count(EQ0, EQ1)}

    @property
    def and_depth(self) -> int:
        return self.schedule().depth

    def schedule(self) -> "Schedule":
        """The layered, slot-allocated program of this circuit (computed once)."""
        if "schedule" not in self._cache:
            self._cache["schedule"] = _schedule(self)
        return self._cache["schedule"]

    def __repr__(self) -> str:
        return (f"Circuit({self.name!r}, gates={self.gates}, wires={self.wires}, inputs={self.inputs}, "
                f"outputs={self.outputs}, and={self.and_gates})")


def _ints(tokens: list[str], line_no: int, what: str) -> list[int]:
    try:
        values = [int(t) for t in tokens]
    except ValueError:
        raise CircuitFormatError(f"line {line_no}: {what} must be integers, got {' '.join(tokens)!r}") from None
    if any(v < 0 for v in values):
        raise CircuitFormatError(f"line {line_no}: {what} must not be negative")
    return values


def parse(text: str, name: str = "circuit") -> Circuit:
    """Parses and validates Bristol Fashion text; raises :class:`CircuitFormatError` naming the
    line and the problem (bad header, counts that disagree, wires out of range, a wire read
    before it is written or written twice, unknown operations). Declared sizes are checked
    against the text before any array of that size is made: more wires than the inputs and the
    gate lines can write (a 30-byte header declaring 2^30 wires) is refused up front."""
    lines = [(i + 1, ln.split()) for i, ln in enumerate(text.splitlines())]
    body = [(i, t) for i, t in lines if t]
    if len(body) < 3:
        raise CircuitFormatError(f"{name}: a Bristol Fashion file needs three header lines")
    (l1, h1), (l2, h2), (l3, h3) = body[:3]
    head = _ints(h1, l1, "the gate and wire counts")
    if len(head) != 2:
        raise CircuitFormatError(f"line {l1}: expected 'gates wires', got {' '.join(h1)!r}")
    n_gates, n_wires = head
    if n_wires > MAX_WIRES or n_gates > MAX_WIRES:
        raise CircuitFormatError(f"line {l1}: {n_gates} gates / {n_wires} wires is beyond the supported size")
    ins = _ints(h2, l2, "the input header")
    outs = _ints(h3, l3, "the output header")
    if not ins or len(ins) != ins[0] + 1 or ins[0] == 0:
        raise CircuitFormatError(f"line {l2}: expected 'n w_1 ... w_n' for the inputs, got {' '.join(h2)!r}")
    if not outs or len(outs) != outs[0] + 1 or outs[0] == 0:
        raise CircuitFormatError(f"line {l3}: expected 'n w_1 ... w_n' for the outputs, got {' '.join(h3)!r}")
    inputs, outputs = tuple(ins[1:]), tuple(outs[1:])
    if any(w == 0 for w in inputs + outputs):
        raise CircuitFormatError(f"{name}: zero-width input or output value")
    if sum(inputs) + sum(outputs) > n_wires:
        raise CircuitFormatError(f"{name}: {sum(inputs)} input and {sum(outputs)} output bits do not fit in {n_wires} wires")
    gate_lines = body[3:]
    if len(gate_lines) != n_gates:
        raise CircuitFormatError(f"{name}: header says {n_gates} gates, the file has {len(gate_lines)} gate lines")
    # Sizes are checked against the text before anything of the declared size is allocated: a
    # wire that is not an input is written by a gate, and a gate line names each wire it writes.
    if sum(inputs) > MAX_INPUT_BITS:
        raise CircuitFormatError(f"line {l2}: {sum(inputs)} input bits is beyond the supported {MAX_INPUT_BITS}")
    writable = sum(inputs) + sum(_outputs_named(t) for _, t in gate_lines)
    if n_wires > writable:
        raise CircuitFormatError(f"line {l1}: the header declares {n_wires} wires, but the inputs and the "
                                 f"{len(gate_lines)} gate lines can write at most {writable}")

    op: list[int] = []
    ga: list[int] = []
    gb: list[int] = []
    go: list[int] = []
    written = np.zeros(n_wires, dtype=bool)
    written[:sum(inputs)] = True

    def read(w: int, ln: int) -> int:
        if w >= n_wires:
            raise CircuitFormatError(f"line {ln}: wire {w} is out of range (the circuit has {n_wires} wires)")
        if not written[w]:
            raise CircuitFormatError(f"line {ln}: wire {w} is read before it is written (gates must be in topological order)")
        return w

    def write(w: int, ln: int) -> int:
        if w >= n_wires:
            raise CircuitFormatError(f"line {ln}: wire {w} is out of range (the circuit has {n_wires} wires)")
        if written[w]:
            raise CircuitFormatError(f"line {ln}: wire {w} is written twice")
        written[w] = True
        return w

    for ln, tok in gate_lines:
        if len(tok) < 3:
            raise CircuitFormatError(f"line {ln}: a gate needs 'n_in n_out wires... OP', got {' '.join(tok)!r}")
        kind = tok[-1]
        nums = _ints(tok[:-1], ln, "gate fields")
        n_in, n_out = nums[0], nums[1]
        wires = nums[2:]
        if len(wires) != n_in + n_out:
            raise CircuitFormatError(f"line {ln}: {n_in} inputs and {n_out} outputs need {n_in + n_out} wire numbers, got {len(wires)}")
        if kind in ("XOR", "AND"):
            if (n_in, n_out) != (2, 1):
                raise CircuitFormatError(f"line {ln}: {kind} takes 2 inputs and 1 output, got {n_in} and {n_out}")
            x, y, z = read(wires[0], ln), read(wires[1], ln), write(wires[2], ln)
            op.append(_NAMES[kind]), ga.append(x), gb.append(y), go.append(z)
        elif kind in ("INV", "EQW"):
            if (n_in, n_out) != (1, 1):
                raise CircuitFormatError(f"line {ln}: {kind} takes 1 input and 1 output, got {n_in} and {n_out}")
            x, z = read(wires[0], ln), write(wires[1], ln)
            op.append(_NAMES[kind]), ga.append(x), gb.append(-1), go.append(z)
        elif kind == "EQ":
            if (n_in, n_out) != (1, 1) or wires[0] not in (0, 1):
                raise CircuitFormatError(f"line {ln}: EQ takes a constant 0 or 1 and 1 output wire")
            z = write(wires[1], ln)
            op.append(EQ1 if wires[0] else EQ0), ga.append(-1), gb.append(-1), go.append(z)
        elif kind == "MAND":
            if n_in != 2 * n_out or n_out == 0:
                raise CircuitFormatError(f"line {ln}: MAND takes 2n inputs and n outputs, got {n_in} and {n_out}")
            xs = [read(w, ln) for w in wires[:n_in]]
            for k in range(n_out):
                z = write(wires[n_in + k], ln)
                op.append(AND), ga.append(xs[k]), gb.append(xs[n_out + k]), go.append(z)
        else:
            raise CircuitFormatError(f"line {ln}: unknown operation {kind!r} (XOR, AND, INV, EQW, EQ, MAND)")
    missing = np.flatnonzero(~written)
    if missing.size:
        raise CircuitFormatError(f"{name}: wire {int(missing[0])} is never written ({missing.size} unwritten wires)")
    as_arr = lambda v: np.asarray(v, dtype=np.int64)  # noqa: E731
    return Circuit(name, n_wires, inputs, outputs, as_arr(op).astype(np.uint8), as_arr(ga), as_arr(gb), as_arr(go))


def _outputs_named(tok: list[str]) -> int:
    """At most how many wires a gate line writes: its n_out, and no more wire numbers than it has."""
    named = max(0, len(tok) - 3)
    return min(int(tok[1]), named) if len(tok) > 1 and tok[1].isdigit() else named


def bundled() -> list[str]:
    """Names of the circuits shipped inside the package (``shaper/circuits/*.txt``)."""
    return sorted(p.name for p in _BUNDLED.glob("*.txt") if p.name.lower() != "license-bristol-fashion.txt")


def resolve(path: str | Path) -> Path:
    """``path`` if that file exists, else the bundled circuit of that name (``"aes_128.txt"`` or
    ``"aes_128"``); raises ``FileNotFoundError`` listing the bundled names otherwise."""
    p = Path(path)
    if p.exists():
        return p
    name = p.name if p.suffix else p.name + ".txt"
    if p.parent == Path(".") and name in bundled():
        return _BUNDLED / name
    raise FileNotFoundError(f"no circuit file {str(path)!r} (bundled circuits: {', '.join(bundled())})")


def load(path: str | Path) -> Circuit:
    """Reads and parses a Bristol Fashion file, or a bundled circuit by name (:func:`bundled`)."""
    p = resolve(path)
    try:
        text = p.read_text(encoding="ascii")
    except UnicodeDecodeError:
        raise CircuitFormatError(f"{p}: not a text circuit file (non-ASCII bytes)") from None
    return parse(text, p.name)


# -- values <-> bit-sliced wires ----------------------------------------------------------------
def words_for(instances: int) -> int:
    return max(1, -(-int(instances) // 64))


def to_bitsliced(values: Sequence[int] | np.ndarray, width: int) -> np.ndarray:
    """Instances' integer values (each < 2^width) -> (width, words) uint64: row j holds bit j of
    every instance (instance i at bit i % 64 of word i // 64)."""
    vals = [int(v) for v in values]
    n = len(vals)
    words = words_for(n)
    bound = 1 << width
    for i, v in enumerate(vals):
        if not 0 <= v < bound:
            raise ValueError(f"value at index {i} does not fit in {width} bits")
    # bits[i, j] = bit j of value i, via little-endian bytes
    nbytes = -(-width // 8)
    raw = np.frombuffer(b"".join(v.to_bytes(nbytes, "little") for v in vals), dtype=np.uint8).reshape(n, nbytes)
    bits = np.unpackbits(raw, axis=1, bitorder="little")[:, :width]  # (n, width)
    padded = np.zeros((words * 64, width), dtype=np.uint8)
    padded[:n] = bits
    packed = np.packbits(padded.T.reshape(width, words, 64), axis=2, bitorder="little")  # (width, words, 8)
    return np.ascontiguousarray(packed).view("<u8").reshape(width, words)


def from_bitsliced(rows: np.ndarray, instances: int) -> list[int]:
    """Inverse of :func:`to_bitsliced`: (width, words) -> list of ``instances`` integers."""
    rows = np.ascontiguousarray(rows, dtype=np.uint64)
    width, words = rows.shape
    bits = np.unpackbits(rows.view(np.uint8).reshape(width, words * 8), axis=1, bitorder="little")  # (width, 64 words)
    bits = bits[:, :instances].T  # (instances, width)
    nbytes = -(-width // 8)
    pad = np.zeros((instances, nbytes * 8), dtype=np.uint8)
    pad[:, :width] = bits
    raw = np.packbits(pad, axis=1, bitorder="little")
    return [int.from_bytes(raw[i].tobytes(), "little") for i in range(instances)]


def pick_bitsliced(rows: np.ndarray, indices: Sequence[int] | np.ndarray) -> list[int]:
    """The values of selected instances only (cost proportional to the selection, not to the
    batch): ``pick_bitsliced(rows, idx) == [from_bitsliced(rows, n)[i] for i in idx]``."""
    rows = np.ascontiguousarray(rows, dtype=np.uint64)
    idx = np.asarray(indices, dtype=np.int64)
    width = rows.shape[0]
    cols = rows[:, idx // 64]                                          # (width, k)
    bits = ((cols >> (idx % 64).astype(np.uint64)) & np.uint64(1)).astype(np.uint8).T  # (k, width)
    nbytes = -(-width // 8)
    pad = np.zeros((idx.size, nbytes * 8), dtype=np.uint8)
    pad[:, :width] = bits
    raw = np.packbits(pad, axis=1, bitorder="little")
    return [int.from_bytes(raw[i].tobytes(), "little") for i in range(idx.size)]


def block_to_int(block: bytes | str) -> int:
    """A 16-byte AES block (bytes or hex) as the circuit's big-endian integer."""
    if isinstance(block, str):
        block = bytes.fromhex(block)
    return int.from_bytes(block, "big")


def int_to_block(value: int, nbytes: int = 16) -> bytes:
    return int(value).to_bytes(nbytes, "big")


def split_inputs(circuit: Circuit, wires: np.ndarray) -> list[np.ndarray]:
    """Per-value row blocks of an input-wire array ordered like the circuit's inputs."""
    out, start = [], 0
    for w in circuit.inputs:
        out.append(wires[start:start + w])
        start += w
    return out


# -- plaintext evaluator (test oracle) ---------------------------------------------------------
def evaluate_plain(circuit: Circuit, inputs: Sequence[Sequence[int]]) -> list[list[int]]:
    """Evaluates the circuit in the clear on any number of instances: ``inputs[v][i]`` is value
    v of instance i; returns ``outputs[v][i]``. A direct gate-by-gate interpreter over
    bit-sliced words, independent of the layered schedule the 3PC engine uses."""
    if len(inputs) != len(circuit.inputs):
        raise ValueError(f"{circuit.name} takes {len(circuit.inputs)} input values, got {len(inputs)}")
    counts = {len(v) for v in inputs}
    if len(counts) != 1:
        raise ValueError("every input value needs the same number of instances")
    n = counts.pop()
    words = words_for(n)
    w = np.zeros((circuit.wires, words), dtype=np.uint64)
    start = 0
    for width, vals in zip(circuit.inputs, inputs):
        w[start:start + width] = to_bitsliced(vals, width)
        start += width
    ones = np.full(words, np.uint64(0xFFFFFFFFFFFFFFFF))
    for op, a, b, o in zip(circuit.op.tolist(), circuit.a.tolist(), circuit.b.tolist(), circuit.out.tolist()):
        if op == XOR:
            np.bitwise_xor(w[a], w[b], out=w[o])
        elif op == AND:
            np.bitwise_and(w[a], w[b], out=w[o])
        elif op == INV:
            np.bitwise_xor(w[a], ones, out=w[o])
        elif op == EQW:
            w[o] = w[a]
        elif op == EQ1:
            w[o] = ones
        else:  # EQ0
            w[o] = 0
    outs, start = [], circuit.wires - circuit.output_bits
    for width in circuit.outputs:
        outs.append(from_bitsliced(w[start:start + width], n))
        start += width
    return outs


# -- the layered schedule ----------------------------------------------------------------------
@dataclass(frozen=True)
class Schedule:
    """The program the 3PC engine runs: for each AND layer k = 0..depth, first the local gates
    (XOR/INV/EQW/EQ) whose inputs are ready, then the layer's AND gates (one message). An XOR
    whose output is read only by a later XOR of the same layer is folded into it (XOR3: one
    pass over three rows instead of two passes and a temporary).
    Wires live in ``slots`` reusable registers (freed after their last use); ``local`` and
    ``ands`` hold, per layer, arrays (op, a, b, out) and (a, b, out) of slot numbers."""

    depth: int
    slots: int
    input_slots: np.ndarray
    output_slots: np.ndarray
    local: list[np.ndarray]   # per layer: (n, 5) int32 [op, a, b, c, out]
    ands: list[np.ndarray]    # per layer: (n, 3) int32 [a, b, out]
    layer_and_counts: list[int]


def _schedule(c: Circuit) -> Schedule:
    n_in = c.input_bits
    level = np.zeros(c.wires, dtype=np.int64)  # AND depth of each wire
    ops, ga, gb, go = c.op.tolist(), c.a.tolist(), c.b.tolist(), c.out.tolist()
    lv = level.tolist()
    for op, a, b, o in zip(ops, ga, gb, go):
        if op == AND:
            lv[o] = max(lv[a], lv[b]) + 1
        elif op in (XOR,):
            lv[o] = max(lv[a], lv[b])
        elif op in (INV, EQW):
            lv[o] = lv[a]
        else:
            lv[o] = 0
    depth = max((lv[o] for op, o in zip(ops, go) if op == AND), default=0)
    # order: layer k = [local gates at level k (file order)] + [AND gates producing level k+1]
    order: list[list[int]] = [[] for _ in range(depth + 1)]
    and_order: list[list[int]] = [[] for _ in range(depth + 1)]
    for g, (op, o) in enumerate(zip(ops, go)):
        if op == AND:
            and_order[lv[o] - 1].append(g)
        else:
            order[lv[o]].append(g)
    # fold XOR chains: t = a ^ b read only by u = t ^ c (same layer) becomes u = a ^ b ^ c
    readers = [0] * c.wires
    for g in range(len(ops)):
        for w in {ga[g], gb[g]}:
            if w >= 0:
                readers[w] += 1
    out_start = c.wires - c.output_bits
    producer = {go[g]: g for g in range(len(ops))}
    extra: dict[int, int] = {}   # gate -> third input wire (gate became XOR3)
    gone: set[int] = set()       # gates folded away
    for k in range(depth + 1):
        in_layer = set(order[k])
        for g in order[k]:
            if ops[g] != XOR or g in extra:
                continue
            for mine, other in ((ga[g], gb[g]), (gb[g], ga[g])):
                p = producer.get(mine)
                if (p is not None and p in in_layer and ops[p] == XOR and p not in extra and p not in gone
                        and readers[mine] == 1 and mine < out_start and ga[p] != gb[p]):
                    extra[g] = other
                    ga[g], gb[g] = ga[p], gb[p]
                    gone.add(p)
                    break
        order[k] = [g for g in order[k] if g not in gone]
    # last use of each wire, in schedule positions (outputs live to the end)
    seq: list[tuple[int, int]] = []  # (gate, phase) phase 0 local, 1 and
    for k in range(depth + 1):
        seq.extend((g, 0) for g in order[k])
        seq.extend((g, 1) for g in and_order[k])
    end = len(seq)
    last = [-1] * c.wires
    for pos, (g, _) in enumerate(seq):
        for w in (ga[g], gb[g], extra.get(g, -1)):
            if w >= 0:
                last[w] = pos
    for wire in range(out_start, c.wires):
        last[wire] = end
    # linear-scan slot allocation; AND outputs of a layer are allocated after the whole layer's
    # inputs are read (the layer reads all inputs before it writes any output)
    slot = [-1] * c.wires
    free: list[int] = []
    top = 0

    def take() -> int:
        nonlocal top
        if free:
            return free.pop()
        top += 1
        return top - 1

    for wire in range(n_in):
        slot[wire] = take()
    for wire in range(n_in):  # inputs never read (possible in general)
        if last[wire] == -1:
            free.append(slot[wire])
    local_tab: list[np.ndarray] = []
    and_tab: list[np.ndarray] = []
    pos = 0
    for k in range(depth + 1):
        rows = []
        for g in order[k]:
            third = extra.get(g, -1)
            a_s = slot[ga[g]] if ga[g] >= 0 else -1
            b_s = slot[gb[g]] if gb[g] >= 0 else -1
            c_s = slot[third] if third >= 0 else -1
            # free inputs whose last use is here before allocating the output (in-place is fine)
            for wire in {ga[g], gb[g], third}:
                if wire >= 0 and last[wire] == pos:
                    free.append(slot[wire])
            o = go[g]
            slot[o] = take()
            if last[o] == -1:  # never read: the slot can go back right away
                free.append(slot[o])
            rows.append((XOR3 if third >= 0 else ops[g], a_s, b_s, c_s, slot[o]))
            pos += 1
        local_tab.append(np.asarray(rows, dtype=np.int32).reshape(-1, 5))
        arows = []
        layer = and_order[k]
        for g in layer:
            arows.append([slot[ga[g]], slot[gb[g]], -1])
        released = []
        for i, g in enumerate(layer):
            for wire in {ga[g], gb[g]}:
                if last[wire] == pos + i:
                    released.append(slot[wire])
        free.extend(released)
        for i, g in enumerate(layer):
            o = go[g]
            slot[o] = take()
            arows[i][2] = slot[o]
            if last[o] == -1:
                free.append(slot[o])
        pos += len(layer)
        and_tab.append(np.asarray(arows, dtype=np.int32).reshape(-1, 3))
    return Schedule(
        depth=depth,
        slots=top,
        input_slots=np.asarray(slot[:n_in], dtype=np.int64),
        output_slots=np.asarray(slot[out_start:], dtype=np.int64),
        local=local_tab,
        ands=and_tab,
        layer_and_counts=[len(x) for x in and_order],
    )


__all__ = [
    "Circuit", "CircuitFormatError", "Schedule", "parse", "load", "evaluate_plain", "to_bitsliced",
    "from_bitsliced", "pick_bitsliced", "block_to_int", "int_to_block", "words_for", "split_inputs",
]
