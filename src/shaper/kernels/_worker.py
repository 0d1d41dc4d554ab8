"""Kernel worker process: ``python -m shaper.kernels._worker``.

Reads calls from stdin, runs them on the process's gmpy2 kernel (whose fixed-base tables stay
cached between calls), writes replies to stdout. Exits when stdin closes. See
:mod:`shaper.kernels.wire` for the message format.
"""

from __future__ import annotations

import sys

from . import wire
from .gmp import local_kernel


def main() -> int:
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but replies may reach the reply stream
    kernel = local_kernel()
    while True:
        frame = wire.read_frame(stdin)
        if frame is None:
            return 0
        wire.write_frame(stdout, wire.serve(kernel, frame))


if __name__ == "__main__":
    sys.exit(main())
