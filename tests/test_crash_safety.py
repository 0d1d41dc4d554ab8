"""Every kind of state survives kill -9 and a full disk.

Each save (a file replaced by :func:`shaper.files.write_atomic`, an ML checkpoint epoch, new and
re-saved, PSI state and appended chunks, a threshold-CKKS key directory and its ledger's charge,
a CNN weights file, a triple store's consumption record) runs in a forked child whose every
file-system step (``os.write`` — cut in half first —, ``fsync``, ``replace``, ``rename``,
``unlink``, ``rmdir``, ``ftruncate``) is counted; the child is killed with SIGKILL at each step in
turn. Loading afterwards must give the last complete state (the old one, or the new one when the
save got far enough), lose nothing, and leave no temporary (they may hold keys and seeds).

The full disk is ``ENOSPC`` raised by the n-th ``os.write`` (or ``os.fsync``) for every n of a
save: the error propagates as it is, the previous state stays, and no temporary is left, without
any sweep. Where this test runs as root and can mount a tmpfs, a real full disk is tried too.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import traceback
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from shaper.files import remove_stale, write_atomic

STEPS = ("write", "fsync", "replace", "rename", "unlink", "rmdir", "ftruncate")
MARK = b"SECRET-KEY-MATERIAL-"


# -- the harness -------------------------------------------------------------------------------------

def run_child(action, kill_at: int | None):
    """``action(report)`` in a forked child whose file-system steps are counted; at step
    ``kill_at`` the child kills itself with SIGKILL. Returns (killed, lines the child reported,
    steps it counted when it was not killed)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        code = 0
        try:
            os.close(r)
            real_write = os.write
            count = [0]

            def report(line: str) -> None:
                real_write(w, line.encode() + b"\n")

            def hooked(name, real):
                def step(*args, **kwargs):
                    count[0] += 1
                    if count[0] == kill_at:
                        if name == "write":
                            half = memoryview(args[1]).cast("B")[: len(memoryview(args[1]).cast("B")) // 2]
                            if len(half):
                                real(args[0], half)  # a torn write
                        os.kill(os.getpid(), signal.SIGKILL)
                    return real(*args, **kwargs)
                return step

            for name in STEPS:
                setattr(os, name, hooked(name, getattr(os, name)))
            action(report)
            report(f"steps {count[0]}")
        except BaseException:
            code = 3
            try:
                os.write(w, traceback.format_exc().encode())
            except BaseException:
                pass
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 1 << 16):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    lines = b"".join(chunks).decode(errors="replace").splitlines()
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    if not killed:
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "\n".join(lines)
    steps = int(lines[-1].split()[1]) if not killed else None
    return killed, lines, steps


def kill_everywhere(tmp_path, setup, action, verify):
    """Runs ``action`` once to count its steps, then once per step with a kill there; after
    each, ``verify(directory, killed, lines)``. Returns the number of steps."""
    base = tmp_path / "count"
    base.mkdir()
    setup(base)
    killed, lines, steps = run_child(lambda report: action(base, report), None)
    assert not killed and steps > 0
    verify(base, False, lines)
    for k in range(1, steps + 1):
        d = tmp_path / f"kill-{k}"
        d.mkdir()
        setup(d)
        killed, lines, _ = run_child(lambda report: action(d, report), k)
        assert killed, f"step {k} of {steps} did not happen the second time"
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a kill never corrupts: nothing to fall back from
            verify(d, True, lines)
    return steps


def hidden(root: Path) -> list[str]:
    """Temporaries anywhere under ``root`` (every one shaper writes starts with a dot)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*"))


def holding_secrets(root: Path, allowed: set[Path]) -> list[str]:
    """Files under ``root`` outside ``allowed`` (directories or files) that contain MARK."""
    out = []
    for p in root.rglob("*"):
        if p.is_file() and not any(p == a or a in p.parents for a in allowed) and MARK in p.read_bytes():
            out.append(str(p))
    return out


@contextmanager
def full_disk(fail_at: int, call: str = "write"):
    """The ``fail_at``-th ``os.<call>`` from now raises ENOSPC, as on a full disk; yields a
    list that holds True once it has."""
    real = getattr(os, call)
    count, hit = [0], []

    def step(*args, **kwargs):
        count[0] += 1
        if count[0] == fail_at:
            hit.append(True)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(*args, **kwargs)

    setattr(os, call, step)
    try:
        yield hit
    finally:
        setattr(os, call, real)


def fill_everywhere(tmp_path, setup, action, verify, calls=("write", "fsync")):
    """Runs ``action`` with ENOSPC at its 1st, 2nd, ... write (and fsync) until it gets through;
    ``verify(directory, objects, failed)`` after each, ``failed`` the call that raised (None when
    none did). A failed write leaves the old state; a failed fsync the old one or, when only the
    directory's fsync after the rename failed, the new one, whole. Returns the failures injected."""
    failures = 0
    for call in calls:
        for k in range(1, 10_000):
            d = tmp_path / f"{call}-{k}"
            d.mkdir()
            objects = setup(d)
            with full_disk(k, call) as hit:
                try:
                    action(d, objects)
                except OSError as exc:
                    assert hit and exc.errno == errno.ENOSPC and "No space left on device" in str(exc), exc
                    failures += 1
                else:
                    assert not hit
            assert hidden(d) == [], f"ENOSPC at {call} {k} left {hidden(d)}"
            verify(d, objects, call if hit else None)
            if not hit:
                break
    assert failures > 0
    return failures


def allowed(failed, old, new) -> list:
    """The states a save may leave when ``failed`` (see :func:`fill_everywhere`)."""
    return {None: [new], "write": [old], "fsync": [old, new]}[failed]


# -- files.write_atomic ---------------------------------------------------------------------------------

OLD, NEW = MARK + b"old" * 5000, MARK + b"new" * 7000


def test_write_atomic_survives_kill_at_every_step(tmp_path):
    def setup(d):
        write_atomic(d / "state.bin", OLD)

    def action(d, report):
        write_atomic(d / "state.bin", NEW)
        report("done")

    def verify(d, killed, lines):
        remove_stale(d)
        got = (d / "state.bin").read_bytes()
        assert got == NEW if "done" in lines else got in (OLD, NEW)
        assert hidden(d) == []

    assert kill_everywhere(tmp_path, setup, action, verify) >= 4  # writes, fsync, replace, directory fsync


def test_write_atomic_on_a_full_disk_keeps_the_old_file(tmp_path):
    fill_everywhere(tmp_path, lambda d: write_atomic(d / "state.bin", OLD),
                    lambda d, _: write_atomic(d / "state.bin", NEW),
                    lambda d, _, failed: (d / "state.bin").read_bytes() in allowed(failed, OLD, NEW) or pytest.fail())


# -- ML checkpoints -------------------------------------------------------------------------------------

def _epoch(n: int, variant: str = "") -> tuple[dict, dict]:
    return ({"epoch_note": f"{n}{variant}", "mask_seed": (MARK + bytes([n])).hex()},
            {"weights": MARK + f"{n}{variant}".encode() * 3000, "shares": bytes(range(256)) * 40})


def _ckpt_setup(d):
    from shaper.ml.checkpoint import Checkpointer

    ck = Checkpointer(d, "bank")
    for n in (1, 2):
        ck.save(n, *_epoch(n), None, None)


def _ckpt_verify_loads(ck, epoch, variant=""):
    state, blobs, _, _ = ck.load(epoch)
    want_state, want_blobs = _epoch(epoch, variant)
    assert {k: state[k] for k in want_state} == want_state and blobs == want_blobs


def test_checkpoint_save_survives_kill_at_every_step(tmp_path):
    from shaper.ml.checkpoint import Checkpointer

    def action(d, report):
        Checkpointer(d, "bank").save(3, *_epoch(3), None, None)
        report("done")

    def verify(d, killed, lines):
        ck = Checkpointer(d, "bank")  # sweeps what the killed save left
        epochs = ck.epochs()
        assert epochs in ([1, 2], [1, 2, 3], [2, 3]), epochs
        assert epochs == [2, 3] or not ("done" in lines)
        for e in epochs:
            _ckpt_verify_loads(ck, e)  # every epoch listed is whole: nothing lost
        assert hidden(d) == [], hidden(d)
        ck.save(3, *_epoch(3), None, None)  # and the run carries on
        assert ck.epochs() == [2, 3]

    kill_everywhere(tmp_path, _ckpt_setup, action, verify)


def test_checkpoint_resave_of_an_epoch_survives_kill_at_every_step(tmp_path):
    """A resumed run saves an epoch that exists again: the old copy goes only once the new is in place."""
    from shaper.ml.checkpoint import Checkpointer

    def action(d, report):
        Checkpointer(d, "bank").save(2, *_epoch(2, "again"), None, None)
        report("done")

    def verify(d, killed, lines):
        ck = Checkpointer(d, "bank")
        assert ck.epochs() == [1, 2]
        state = ck.load(2)[0]
        variant = "again" if state["epoch_note"] == "2again" else ""
        assert variant or "done" not in lines
        _ckpt_verify_loads(ck, 2, variant)
        _ckpt_verify_loads(ck, 1)
        assert hidden(d) == [], hidden(d)

    kill_everywhere(tmp_path, _ckpt_setup, action, verify)


def test_checkpoint_on_a_full_disk_keeps_the_previous_epochs(tmp_path):
    from shaper.ml.checkpoint import Checkpointer

    def verify(d, _, failed):
        ck = Checkpointer(d / "root", "bank")
        assert ck.epochs() in allowed(failed, [1, 2], [2, 3]) + ([[1, 2, 3]] if failed == "fsync" else [])
        for e in ck.epochs():
            _ckpt_verify_loads(ck, e)

    fill_everywhere(tmp_path, lambda d: _ckpt_setup(d / "root"),
                    lambda d, _: Checkpointer(d / "root", "bank").save(3, *_epoch(3), None, None), verify)


# -- PSI state ------------------------------------------------------------------------------------------

CHUNK_ROWS, WIDTH = 4, 16


def _chunk(i: int) -> bytes:
    return bytes([i + 1]) * (CHUNK_ROWS * WIDTH)


def _psi(d):
    from shaper.protocols.psi.checkpoint import PsiCheckpoint

    return PsiCheckpoint(d, "bank", "digest-of-ids", "ecdh")


def _psi_setup(d):
    ck = _psi(d)
    ck.start("run-1", {"blinding_key": MARK + b"1"}, ("own.bin",))
    ck.append("own.bin", _chunk(0))


def _psi_chunks(d) -> int:
    out = np.zeros((3 * CHUNK_ROWS, WIDTH), dtype=np.uint8)
    done = _psi(d).read_chunks("own.bin", out, CHUNK_ROWS)
    for i in range(done):
        assert out[i * CHUNK_ROWS:(i + 1) * CHUNK_ROWS].tobytes() == _chunk(i)
    return done


def test_psi_append_survives_kill_at_every_step(tmp_path):
    def action(d, report):
        _psi(d).append("own.bin", _chunk(1))
        report("done")

    def verify(d, killed, lines):
        state = _psi(d).load()
        assert state["run"] == "run-1" and _psi(d).secret(state, "blinding_key") == MARK + b"1"
        assert _psi_chunks(d) == (2 if "done" in lines else _psi_chunks(d)) and _psi_chunks(d) in (1, 2)
        assert hidden(d) == []

    kill_everywhere(tmp_path, _psi_setup, action, verify)


def test_psi_new_run_survives_kill_at_every_step(tmp_path):
    def action(d, report):
        _psi(d).start("run-2", {"blinding_key": MARK + b"2"}, ("own.bin",))
        report("done")

    def verify(d, killed, lines):
        state = _psi(d).load()
        if state is None:  # between dropping the old run and writing the new: nothing to resume
            assert "done" not in lines
        elif state["run"] == "run-1":  # the old run, whole
            assert "done" not in lines and _psi_chunks(d) == 1
        else:
            assert state["run"] == "run-2" and _psi_chunks(d) == 0
        assert hidden(d / "bank" / "psi-ecdh") == []

    kill_everywhere(tmp_path, _psi_setup, action, verify)


def test_psi_on_a_full_disk_keeps_what_was_complete(tmp_path):
    def verify(d, _, failed):
        assert _psi(d).load()["run"] == "run-1" and _psi_chunks(d) == (1 if failed else 2)

    fill_everywhere(tmp_path, _psi_setup, lambda d, _: _psi(d).append("own.bin", _chunk(1)), verify)


# -- threshold CKKS: key directory and ledger ----------------------------------------------------------

@pytest.fixture(scope="module")
def joint_keys():
    from shaper.crypto import ckks
    from shaper.protocols import threshold_ckks as tc

    params = ckks.Parameters.from_literal(64, [50, 40], 50, 40, insecure=True)
    sk = ckks.SecretKey.generate(params)
    return tc.JointKeys(params, ckks.public_key(sk), ckks.relin_key(sk), {}, ckks.SecretKeyShare(params, sk.ntt, 0, 2))


def test_key_directory_save_survives_kill_at_every_step(tmp_path, joint_keys):
    from shaper.crypto import ckks
    from shaper.errors import ConfigError
    from shaper.protocols import threshold_ckks as tc
    from shaper.protocols.threshold_ckks.ledger import Ledger

    share = ckks.to_bytes(joint_keys.share)

    def action(d, report):
        joint_keys.save(d / "keys", ledger=Ledger(budget=5))
        report("done")

    def verify(d, killed, lines):
        try:
            keys = tc.JointKeys.load(d / "keys", insecure=True)  # sweeps the killed save's temporary
        except ConfigError:
            assert "done" not in lines and not (d / "keys").exists()
        else:
            assert ckks.to_bytes(keys.share) == share and keys.ledger.budget == 5
        assert hidden(d) == [], hidden(d)
        leftovers = [p for p in d.rglob("*") if p.is_file() and share in p.read_bytes()]
        assert leftovers in ([], [d / "keys" / tc.SHARE_FILE]), leftovers  # the share only in its place

    kill_everywhere(tmp_path, lambda d: None, action, verify)


def _ledger_setup(keys):
    from shaper.protocols.threshold_ckks.ledger import Ledger

    def setup(d):
        keys.save(d / "keys", ledger=Ledger(budget=5))
    return setup


def test_ledger_charge_survives_kill_at_every_step_and_is_durable_when_spend_returns(tmp_path, joint_keys):
    from shaper.protocols.threshold_ckks.ledger import Ledger

    def action(d, report):
        Ledger.load(d / "keys").spend(2)
        report("charged")  # from here on the decryption would open: the charge must be on disk

    def verify(d, killed, lines):
        spent = Ledger.load(d / "keys").spent
        assert spent == (2 if "charged" in lines else spent) and spent in (0, 2)
        assert hidden(d) == []

    kill_everywhere(tmp_path, _ledger_setup(joint_keys), action, verify)


def test_a_crash_right_after_charging_keeps_the_charge(tmp_path, joint_keys):
    from shaper.protocols.threshold_ckks.ledger import Ledger

    _ledger_setup(joint_keys)(tmp_path)

    def action(d, report):
        Ledger.load(d / "keys").spend(3)
        os.kill(os.getpid(), signal.SIGKILL)  # right after the charge, before anything is opened

    killed, _, _ = run_child(lambda report: action(tmp_path, report), None)
    assert killed and Ledger.load(tmp_path / "keys").spent == 3


def test_decryption_opens_nothing_before_the_charge_is_on_disk(tmp_path, joint_keys):
    """The decryption share is computed only after the ledger file on disk holds the charge."""
    import importlib
    import json

    from shaper.protocols.threshold_ckks.ledger import LEDGER_FILE

    src = Path(importlib.import_module("shaper.protocols.threshold_ckks.decrypt").__file__).read_text()
    body = src[src.index("def decrypt_many"):]
    assert body.index("keys.ledger.spend(") < body.index("decryption_share(") < body.index("open_rows(")
    _ledger_setup(joint_keys)(tmp_path)
    from shaper.protocols.threshold_ckks.ledger import Ledger

    ledger = Ledger.load(tmp_path / "keys")
    ledger.spend(1)
    assert json.loads((tmp_path / "keys" / LEDGER_FILE).read_bytes())["spent"] == 1


def test_key_directory_and_ledger_on_a_full_disk(tmp_path, joint_keys):
    from shaper.protocols import threshold_ckks as tc
    from shaper.protocols.threshold_ckks.ledger import Ledger

    def verify_save(d, _, failed):
        assert (d / "keys").exists() in allowed(failed, False, True)
        if (d / "keys").exists():
            tc.JointKeys.load(d / "keys", insecure=True)

    (tmp_path / "save").mkdir()
    fill_everywhere(tmp_path / "save", lambda d: None,
                    lambda d, _: joint_keys.save(d / "keys", ledger=Ledger(budget=5)), verify_save)

    def setup(d):
        _ledger_setup(joint_keys)(d)
        return Ledger.load(d / "keys")

    def verify_spend(d, ledger, failed):
        assert ledger.spent == (0 if failed else 2)  # a charge that raised is not made in memory
        assert Ledger.load(d / "keys").spent in allowed(failed, 0, 2)  # on disk it may be: a wasted decryption

    (tmp_path / "spend").mkdir()
    fill_everywhere(tmp_path / "spend", setup, lambda d, ledger: ledger.spend(2), verify_spend)


# -- CNN weights ----------------------------------------------------------------------------------------

def _models():
    from shaper.ml.cnn.model import SHAPES, CnnModel

    def model(seed):
        rng = np.random.default_rng(seed)
        return CnnModel(**{k: rng.normal(0, 0.1, shape) for k, shape in SHAPES.items()})
    return model(1), model(2)


def test_cnn_model_save_survives_kill_at_every_step(tmp_path):
    from shaper.ml.cnn.model import CnnModel

    old, new = _models()

    def action(d, report):
        new.save(d / "model.npz", overwrite=True)
        report("done")

    def verify(d, killed, lines):
        back = CnnModel.load(d / "model.npz")
        assert back.same_weights(new) if "done" in lines else (back.same_weights(old) or back.same_weights(new))
        assert hidden(d) == []

    kill_everywhere(tmp_path, lambda d: old.save(d / "model.npz"), action, verify)


def test_cnn_model_on_a_full_disk_keeps_the_old_file(tmp_path):
    from shaper.ml.cnn.model import CnnModel

    old, new = _models()
    fill_everywhere(tmp_path, lambda d: old.save(d / "model.npz"),
                    lambda d, _: new.save(d / "model.npz", overwrite=True),
                    lambda d, _, failed: any(CnnModel.load(d / "model.npz").same_weights(m)
                                             for m in allowed(failed, old, new)) or pytest.fail())


# -- triple stores --------------------------------------------------------------------------------------

TRIPLES = 300
TAKES = (3, 10, 1, 20, 40)


def _store_setup(d):
    from shaper.protocols.triples import TripleStore

    store = TripleStore(0)
    a = np.arange(TRIPLES, dtype=np.uint64)
    store.add(a, a + 1000, a + 2000)
    store.save(d / "triples.npz")


def _store_action(d, report):
    from shaper.protocols.triples import TripleStore

    store = TripleStore.load(d / "triples.npz", 0, reserve=8)
    for count in TAKES:
        a, _, _ = store.take(count)
        report("took " + " ".join(str(int(v)) for v in a))


def _handed_out(lines) -> list[int]:
    return [int(v) for line in lines if line.startswith("took ") for v in line.split()[1:]]


def test_triple_store_reload_never_reuses(tmp_path):
    from shaper.errors import ConfigError
    from shaper.protocols.triples import TripleStore

    _store_setup(tmp_path)
    first = TripleStore.load(tmp_path / "triples.npz", 0, reserve=4)
    a1 = first.take(7)[0].copy()
    with pytest.raises(ConfigError, match="in use by another triple store"):
        TripleStore.load(tmp_path / "triples.npz", 0)  # two live stores would hand out the same triples
    first.close()
    second = TripleStore.load(tmp_path / "triples.npz", 0, reserve=4)  # reloaded: carries on after the first
    a2 = second.take(5)[0].copy()
    del second  # released when collected, as when its process ends
    third = TripleStore.load(tmp_path / "triples.npz", 0)
    rest = third.take(third.available)[0].tolist()
    assert not set(a1.tolist()) & set(a2.tolist())
    assert not set(rest) & set(a1.tolist() + a2.tolist())
    assert len(a1) + len(a2) + len(rest) >= TRIPLES - 2 * 4  # at most a reserved block wasted per load


def test_triple_store_survives_kill_at_every_step_without_reuse(tmp_path):
    from shaper.protocols.triples import TripleStore

    def verify(d, killed, lines):
        handed = _handed_out(lines)
        assert handed == list(range(len(handed)))  # in order, each once
        store = TripleStore.load(d / "triples.npz", 0)
        rest = store.take(store.available)[0].tolist()
        assert not set(handed) & set(rest), "a triple handed out before the crash came back"
        assert len(handed) + len(rest) >= TRIPLES - 8 * len(TAKES)  # a crash wastes at most a block per take
        assert hidden(d) == []

    kill_everywhere(tmp_path, _store_setup, _store_action, verify)


def test_triple_store_on_a_full_disk_hands_out_nothing_unrecorded(tmp_path):
    from shaper.protocols.triples import TripleStore

    def setup(d):
        _store_setup(d)
        return {"store": TripleStore.load(d / "triples.npz", 0, reserve=8), "handed": []}

    def action(d, objects):
        for count in TAKES:
            before = objects["store"].available
            try:
                objects["handed"] += objects["store"].take(count)[0].tolist()
            except OSError:
                assert objects["store"].available == before  # nothing left the store
                raise

    def verify(d, objects, failed):
        objects["store"].close()
        store = TripleStore.load(d / "triples.npz", 0)
        assert not set(objects["handed"]) & set(store.take(store.available)[0].tolist())

    fill_everywhere(tmp_path, setup, action, verify)


def test_triple_store_save_survives_kill_at_every_step(tmp_path):
    from shaper.protocols.triples import TripleStore

    def action(d, report):
        store = TripleStore(0)
        a = np.arange(TRIPLES, 2 * TRIPLES, dtype=np.uint64)
        store.add(a, a, a)
        store.save(d / "triples.npz")
        report("done")

    def verify(d, killed, lines):
        store = TripleStore.load(d / "triples.npz", 0)
        got = store.take(store.available)[0].tolist()
        assert got == list(range(TRIPLES, 2 * TRIPLES)) if "done" in lines else got in (
            list(range(TRIPLES)), list(range(TRIPLES, 2 * TRIPLES)))
        assert hidden(d) == []

    kill_everywhere(tmp_path, _store_setup, action, verify)


# -- a real full disk -----------------------------------------------------------------------------------

@pytest.fixture
def small_tmpfs(tmp_path):
    """A 1 MiB tmpfs (needs root and mount; the ENOSPC tests above cover every system)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; the injected-ENOSPC tests cover this")
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mnt)],
                          capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip()}); the injected-ENOSPC tests cover this")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30)


def test_a_real_full_disk_keeps_every_previous_state(small_tmpfs):
    from shaper.ml.checkpoint import Checkpointer
    from shaper.ml.cnn.model import CnnModel

    d = small_tmpfs
    ck = Checkpointer(d / "ckpt", "bank")
    ck.save(1, {"n": 1}, {"w": MARK + b"1" * 1000}, None, None)
    write_atomic(d / "state.bin", OLD[:2000])
    filler = d / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)  # fill the disk, then give back a little
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    os.truncate(filler, os.path.getsize(filler) - 40 * 1024)
    with pytest.raises(OSError) as exc:
        ck.save(2, {"n": 2}, {"w": os.urandom(120 * 1024)}, None, None)
    assert exc.value.errno == errno.ENOSPC
    with pytest.raises(OSError) as exc:
        write_atomic(d / "state.bin", os.urandom(120 * 1024))
    assert exc.value.errno == errno.ENOSPC
    with pytest.raises(OSError) as exc:
        _models()[0].save(d / "model.npz")
    assert exc.value.errno == errno.ENOSPC
    assert hidden(d) == [] and not (d / "model.npz").exists()
    assert ck.epochs() == [1] and ck.load(1)[1] == {"w": MARK + b"1" * 1000}
    assert (d / "state.bin").read_bytes() == OLD[:2000]
    os.unlink(filler)  # space again: the run carries on
    ck.save(2, {"n": 2}, {"w": b"2"}, None, None)
    assert ck.epochs() == [1, 2]
    assert CnnModel.load(_models()[0].save(d / "model.npz")).same_weights(_models()[0])


# -- a corrupt latest state -----------------------------------------------------------------------------

@pytest.mark.parametrize("damage", ["truncate", "garble", "drop-state", "drop-blob", "alter-blob"])
def test_a_corrupt_latest_checkpoint_falls_back_to_the_previous_one_with_a_warning(tmp_path, damage):
    from shaper.errors import SerializationError
    from shaper.ml.checkpoint import Checkpointer, CheckpointWarning

    _ckpt_setup(tmp_path)
    latest = tmp_path / "bank" / "epoch-000002"
    state = latest / "state.json"
    if damage == "truncate":
        state.write_bytes(state.read_bytes()[:40])
    elif damage == "garble":
        state.write_bytes(b"\xff\x00" + state.read_bytes()[2:])
    elif damage == "drop-state":
        state.unlink()
    elif damage == "drop-blob":
        (latest / "weights.bin").unlink()
    else:
        (latest / "shares.bin").write_bytes(b"\0" * 10)
    ck = Checkpointer(tmp_path, "bank")
    with pytest.warns(CheckpointWarning, match="epoch-000002 is unusable"):
        assert ck.epochs() == [1]
    _ckpt_verify_loads(ck, 1)
    with pytest.raises(SerializationError, match="epoch-000002 is unusable"):
        ck.load(2)
    ck.save(2, *_epoch(2), None, None)  # a resumed run writes it again
    assert Checkpointer(tmp_path, "bank").epochs() == [1, 2]
    # none usable: a named error, not a silent fresh start
    for e in (1, 2):
        (tmp_path / "bank" / f"epoch-{e:06d}" / "state.json").write_bytes(b"{")
    with pytest.warns(CheckpointWarning), pytest.raises(SerializationError, match="no usable checkpoint"):
        Checkpointer(tmp_path, "bank").epochs()


def test_a_garbled_psi_state_starts_afresh_with_a_warning(tmp_path):
    from shaper.protocols.psi.checkpoint import PsiStateWarning

    _psi_setup(tmp_path)
    state = tmp_path / "bank" / "psi-ecdh" / "state.json"
    state.write_bytes(state.read_bytes()[:25])
    with pytest.warns(PsiStateWarning, match="truncated or garbled"):
        assert _psi(tmp_path).load() is None
