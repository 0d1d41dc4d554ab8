"""State that holds secrets (checkpoints with keys, mask seeds and shares; PSI state with the
run's blinding key; a party's triple shares) is refused on load when its mode lets the group or
other users in: a copy others could read is a leak already, and using it would hide that."""

import os
import stat

import numpy as np
import pytest

from shaper.errors import KeyValidationError
from shaper.files import check_private_file

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")


def _widen(path):
    os.chmod(path, 0o644)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_the_check_names_the_file_and_the_fix(tmp_path):
    f = tmp_path / "key.bin"
    f.write_bytes(b"secret")
    os.chmod(f, 0o600)
    check_private_file(f)
    os.chmod(f, 0o640)
    with pytest.raises(KeyValidationError, match=r"mode 0640.*chmod 600"):
        check_private_file(f, "a key")


def test_a_checkpoint_readable_by_others_is_refused(tmp_path):
    from shaper.ml.checkpoint import Checkpointer

    ck = Checkpointer(tmp_path, "bank")
    ck.save(1, {"mask_seed": "00" * 16}, {"shares": b"\1" * 64}, None, None)
    assert ck.load(1)[1] == {"shares": b"\1" * 64}
    epoch = next(tmp_path.rglob("shares.bin"))
    _widen(epoch)
    with pytest.raises(KeyValidationError, match="shares.bin"):
        ck.load(1)


def test_psi_state_readable_by_others_is_refused(tmp_path):
    from shaper.protocols.psi.checkpoint import PsiCheckpoint

    ck = PsiCheckpoint(tmp_path, "bank", "digest-of-ids", "ecdh")
    ck.start("run-1", {"blinding_key": b"\7" * 32}, ("own.bin",))
    assert ck.load()["run"] == "run-1"
    _widen(next(tmp_path.rglob("state.json")))
    with pytest.raises(KeyValidationError, match="PSI state"):
        ck.load()


def test_a_triple_store_readable_by_others_is_refused(tmp_path):
    from shaper.protocols.triples import TripleStore

    store = TripleStore(0)
    a = np.arange(8, dtype=np.uint64)
    store.add(a, a, a)
    store.save(tmp_path / "t.npz")
    TripleStore.load(tmp_path / "t.npz", 0).close()
    _widen(tmp_path / "t.npz")
    with pytest.raises(KeyValidationError, match="triple store"):
        TripleStore.load(tmp_path / "t.npz", 0)
