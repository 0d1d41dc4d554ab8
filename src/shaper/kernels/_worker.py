"""Kernel worker process: ``python -m shaper.kernels._worker``.

Reads calls from stdin, runs them on the process's gmpy2 kernel (whose fixed-base tables stay
cached between calls), writes replies to stdout. Exits when stdin closes. See
:mod:`shaper.kernels.wire` for the message format.
"""

from __future__ import annotations

import sys
import traceback

from . import wire
from .gmp import local_kernel

_METHODS = {"powmod", "powmod_same_exponent", "fixed_base_powmod", "mulmod", "invert", "prod_rows", "horner", "horner_multiexp"}


def main() -> int:
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but replies may reach the reply stream
    kernel = local_kernel()
    while True:
        frame = wire.read_frame(stdin)
        if frame is None:
            return 0
        try:
            method, args = wire.decode(frame)
            if method not in _METHODS:
                raise wire.WireError(f"unknown kernel method {method!r}")
            result = getattr(kernel, method)(*args)
            reply = wire.encode(("ok", result))
        except Exception as exc:  # reported to the parent, which raises it
            reply = wire.encode(("error", type(exc).__name__, f"{exc}\n{traceback.format_exc()}"))
        wire.write_frame(stdout, reply)


if __name__ == "__main__":
    sys.exit(main())
