import os

import pytest

# Unit tests use small keys; keep fixed-base tables small so table builds stay fast.
os.environ.setdefault("SHAPER_TABLE_MIB", "8")
# Unit tests use 512-768-bit Paillier/OU keys, below the 2048 bits a real job needs: the named
# switch that allows them (tests of the refusal clear it).
os.environ.setdefault("SHAPER_INSECURE_KEY_BITS", "1")

from shaper.crypto import ou, paillier  # noqa: E402
from shaper.crypto.ou import OUPrivateKey, OUPublicKey  # noqa: E402
from shaper.crypto.paillier import PaillierPrivateKey, PaillierPublicKey  # noqa: E402

from . import vectors as V  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """CI runs the suite three times (native kernel, SHAPER_NATIVE=off, extension absent); the
    second and third set SHAPER_TESTS_ONCE=done so the checks marked ``once``, whose subject is
    the same on every kernel, run only in the first."""
    if os.environ.get("SHAPER_TESTS_ONCE") != "done":
        return
    skip = pytest.mark.skip(reason="kernel-independent check: ran in CI's first run (SHAPER_TESTS_ONCE=done)")
    for item in items:
        if item.get_closest_marker("once") or item.nodeid.startswith(ONCE_PATHS):
            item.add_marker(skip)


# Whole test files and directories whose subject never touches a kernel (the party runtime, file
# and state handling; OT-based PSI, native-only, which SHAPER_NATIVE=off leaves as it is and
# which skips without the extension; BGV's plaintext algebra, slot simulator, AES circuit and its
# serialisation, which numpy alone computes; threshold GHS's protocols, whose ring arithmetic is the
# cyclotomic kernels that tests/kernels/test_cyclo.py and tests/crypto/bgv/test_scheme.py check on
# every kernel; the active engine's SPDZ2k ring, whose arithmetic is its own native ring kernels
# with no fallback, and the AND triples' kernels, whose test runs the numpy path itself): ``once``
# as a group.
ONCE_PATHS = ("tests/net/", "tests/test_crash_safety.py", "tests/test_files.py", "tests/test_private_files.py",
              "tests/protocols/test_psi_okvs.py", "tests/crypto/bgv/test_algebra.py", "tests/crypto/bgv/test_slots.py",
              "tests/crypto/bgv/test_aes.py", "tests/crypto/bgv/test_serial.py", "tests/protocols/test_threshold_bgv.py",
              "tests/protocols/test_threshold_bgv_trust.py", "tests/protocols/test_active_ring.py",
              "tests/kernels/test_tinyot.py")


@pytest.fixture(scope="session")
def paillier_keys():
    """A fixed 512-bit DJN key (the known-answer-test key)."""
    pk = PaillierPublicKey(V.PAILLIER_P * V.PAILLIER_Q, V.PAILLIER_HS)
    return pk, PaillierPrivateKey(pk, V.PAILLIER_P, V.PAILLIER_Q)


@pytest.fixture(scope="session")
def fresh_paillier_keys():
    return paillier.keygen(640)


@pytest.fixture(scope="session")
def ou_keys():
    pk = OUPublicKey(V.OU_P * V.OU_P * V.OU_Q, V.OU_G, V.OU_H, V.OU_PRIME_BITS)
    return pk, OUPrivateKey(pk, V.OU_P, V.OU_Q, V.OU_T)


@pytest.fixture(scope="session")
def fresh_ou_keys():
    return ou.keygen(768)


@pytest.fixture(params=["paillier", "ou"], scope="session")
def scheme_keys(request, paillier_keys, ou_keys):
    """Both schemes behind the shared interface: the same tests run on each."""
    return paillier_keys if request.param == "paillier" else ou_keys
