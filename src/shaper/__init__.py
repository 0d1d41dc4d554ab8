"""shaper: privacy-preserving machine learning between organisations that will not pool data.

Layers (see docs/architecture.md): ``kernels`` (batch modular arithmetic) -> ``crypto`` (local
math: Paillier, OU, packing, encodings) -> ``net`` and ``protocols`` -> ``ml``.
"""

__version__ = "0.1.0"

from . import crypto, kernels, net  # noqa: E402
from .net import Session  # noqa: E402

__all__ = ["crypto", "kernels", "net", "Session", "__version__"]
