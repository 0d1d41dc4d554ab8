"""The Ray executor (shaper.kernels.cluster): same results as the local executor on a local
multi-process Ray cluster, a killed worker's chunk re-run elsewhere, a lost cluster a clear
error, and its settings validated. Skipped where Ray is not installed (it is an optional extra);
the settings tests run everywhere."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import shaper.kernels as kernels
from shaper.crypto import ahe, packing
from shaper.errors import ConfigError
from shaper.kernels import ExecutorSettings
from shaper.kernels import cluster as ray_executor
from shaper.net import load_parties


# -- settings (no Ray needed) ---------------------------------------------------------------------
def test_settings_from_env():
    assert ExecutorSettings.from_env({}) == ExecutorSettings()
    s = ExecutorSettings.from_env({"SHAPER_EXECUTOR": "ray:10.0.0.5:6379", "SHAPER_RAY_ACTORS": "8",
                                   "SHAPER_RAY_CPUS_PER_ACTOR": "4", "SHAPER_RAY_TASK_TIMEOUT": "90"})
    assert (s.kind, s.address, s.actors, s.cpus_per_actor, s.task_timeout) == ("ray", "10.0.0.5:6379", 8, 4, 90.0)
    assert ExecutorSettings.from_env({"SHAPER_EXECUTOR": "ray"}).address is None
    for bad in ("spark", "local:host"):
        with pytest.raises(ConfigError, match="SHAPER_EXECUTOR"):
            ExecutorSettings.from_env({"SHAPER_EXECUTOR": bad})
    with pytest.raises(ConfigError, match="SHAPER_RAY_ACTORS"):
        ExecutorSettings.from_env({"SHAPER_EXECUTOR": "ray", "SHAPER_RAY_ACTORS": "many"})
    with pytest.raises(ConfigError, match="actors"):
        ExecutorSettings.from_env({"SHAPER_EXECUTOR": "ray", "SHAPER_RAY_ACTORS": "0"})
    with pytest.raises(ConfigError, match="ray"):
        ExecutorSettings(kind="local", address="x:1")


def test_parties_file_executor_table(tmp_path):
    path = tmp_path / "parties.toml"
    path.write_text(textwrap.dedent("""
        [network]
        insecure = true
        [[party]]
        name = "bank"
        host = "127.0.0.1"
        port = 7100
        [party.executor]
        kind = "ray"
        address = "10.0.0.5:6379"
        actors = 16
        task_timeout = "10m"
        [[party]]
        name = "shop"
        host = "127.0.0.1"
        port = 7101
    """))
    pf = load_parties(path)
    assert pf.parties[0].executor == ExecutorSettings(kind="ray", address="10.0.0.5:6379", actors=16, task_timeout=600.0)
    assert pf.parties[1].executor is None
    path.write_text(path.read_text().replace("actors = 16", "actor = 16"))
    with pytest.raises(ConfigError, match="unknown keys actor"):
        load_parties(path)


def test_set_executor_validation():
    with pytest.raises(ConfigError):
        kernels.set_executor("spark")
    with pytest.raises(TypeError):
        kernels.set_executor(ExecutorSettings(), actors=2)


# -- which links may carry the party's secrets (no Ray needed) -------------------------------------
def _tls_env(tmp_path, **extra):
    env = {"RAY_USE_TLS": "1"}
    for var in ray_executor.TLS_VARIABLES:
        f = tmp_path / var.lower()
        f.write_text("pem")
        env[var] = str(f)
    env.update(extra)
    return env


@pytest.mark.parametrize("address", [None, "local", "127.0.0.1:6379", "localhost:6379", "[::1]:6379",
                                     "ray://127.0.0.1:10001", "ray://localhost:10001"])
def test_a_local_cluster_needs_no_tls(address):
    assert ray_executor.ray_transport(address, {}) == "local"


def test_a_head_on_this_machines_own_address_is_local(monkeypatch):
    """A local Ray head advertises the machine's outbound address, not loopback: that is this
    machine (the nodes that joined it are checked once joined); another address is not."""
    monkeypatch.setattr(ray_executor, "machine_addresses", lambda: {"127.0.0.1", "::1", "localhost", "10.1.2.3"})
    assert ray_executor.ray_transport("10.1.2.3:6379", {}) == "local"
    with pytest.raises(ConfigError, match="RAY_USE_TLS is not set"):
        ray_executor.ray_transport("10.1.2.4:6379", {})


@pytest.mark.parametrize("address", ["10.0.0.5:6379", "head.example:6379", "ray://head:10001", "[2001:db8::1]:6379",
                                     "192.168.1.7"])
def test_a_remote_cluster_without_tls_is_refused_with_the_reason(address):
    with pytest.raises(ConfigError, match=r"p - 1, q - 1.*neither encrypted nor authenticated.*"
                                          r"RAY_USE_TLS is not set.*insecure = true"):
        ray_executor.ray_transport(address, {})
    # RAY_ADDRESS counts as the address when none is given
    with pytest.raises(ConfigError, match="RAY_USE_TLS is not set"):
        ray_executor.ray_transport(None, {"RAY_ADDRESS": address})


def test_a_remote_cluster_with_ray_tls_or_the_override_is_allowed(tmp_path):
    assert ray_executor.ray_transport("10.0.0.5:6379", _tls_env(tmp_path)) == "tls"
    assert ray_executor.ray_transport("10.0.0.5:6379", {}, insecure=True) == "insecure"
    # half-configured TLS is not TLS: each missing piece is named
    env = _tls_env(tmp_path)
    del env["RAY_TLS_SERVER_KEY"]
    with pytest.raises(ConfigError, match="RAY_TLS_SERVER_KEY is not set"):
        ray_executor.ray_transport("10.0.0.5:6379", env)
    with pytest.raises(ConfigError, match="is not a readable file"):
        ray_executor.ray_transport("10.0.0.5:6379", _tls_env(tmp_path, RAY_TLS_CA_CERT=str(tmp_path / "none")))
    with pytest.raises(ConfigError, match="RAY_USE_TLS is not set"):
        ray_executor.ray_transport("10.0.0.5:6379", _tls_env(tmp_path, RAY_USE_TLS="0"))


def test_a_joined_cluster_with_nodes_elsewhere_is_refused_without_tls(tmp_path):
    here = ["127.0.0.1", "10.0.0.9"]
    # "auto" names no host: the nodes decide once joined
    assert ray_executor.ray_transport("auto", {}) == "unknown"
    ray_executor.check_cluster_nodes(["10.0.0.9", "127.0.0.1"], here, "unknown", {})  # all this machine
    with pytest.raises(ConfigError, match=r"nodes on other machines \(10.0.0.7\)"):
        ray_executor.check_cluster_nodes(["10.0.0.9", "10.0.0.7"], here, "unknown", {})
    # a loopback head whose cluster grew a node on another machine
    with pytest.raises(ConfigError, match="10.0.0.7"):
        ray_executor.check_cluster_nodes(["10.0.0.7"], here, ray_executor.ray_transport("127.0.0.1:6379", {}), {})
    ray_executor.check_cluster_nodes(["10.0.0.7"], here, "unknown", _tls_env(tmp_path))
    ray_executor.check_cluster_nodes(["10.0.0.7"], here, "unknown", {}, insecure=True)


def test_the_override_is_a_documented_setting(tmp_path):
    assert ExecutorSettings.from_env({"SHAPER_EXECUTOR": "ray:10.0.0.5:6379", "SHAPER_RAY_INSECURE": "1"}).insecure
    assert not ExecutorSettings.from_env({"SHAPER_EXECUTOR": "ray:10.0.0.5:6379"}).insecure
    with pytest.raises(ConfigError, match="SHAPER_RAY_INSECURE"):
        ExecutorSettings.from_env({"SHAPER_EXECUTOR": "ray", "SHAPER_RAY_INSECURE": "yes please"})
    assert ExecutorSettings.from_mapping({"kind": "ray", "address": "10.0.0.5:6379", "insecure": True}).insecure
    with pytest.raises(ConfigError, match="insecure must be true or false"):
        ExecutorSettings(kind="ray", insecure="yes")
    with pytest.raises(ConfigError, match="ray"):
        ExecutorSettings(kind="local", insecure=True)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "scale-out.md").read_text()
    assert "RAY_USE_TLS=1" in doc and "insecure = true" in doc and "SHAPER_RAY_INSECURE" in doc


def test_the_pool_refuses_before_joining_a_remote_cluster_without_tls(monkeypatch):
    joined = []

    class FakeRay:
        def is_initialized(self):
            return False

        def init(self, **kw):
            joined.append(kw)

    monkeypatch.setattr(ray_executor, "_ray", lambda: FakeRay())
    for var in ("RAY_USE_TLS", "RAY_ADDRESS"):
        monkeypatch.delenv(var, raising=False)
    pool = ray_executor.RayPool(ExecutorSettings(kind="ray", address="10.0.0.5:6379"))
    with pytest.raises(ConfigError, match="refusing to run kernel batches on the Ray cluster at 10.0.0.5:6379"):
        pool.connect()
    assert joined == [] and pool._actors == []


# -- on a local Ray cluster -----------------------------------------------------------------------
ray = pytest.importorskip("ray", reason="the Ray executor is an optional extra: pip install 'shaper-ppml[ray]'")


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster with two worker CPUs (this machine's cores); its GCS address."""
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                 object_store_memory=200 << 20)
    yield ray.get_runtime_context().gcs_address
    kernels.set_executor(None)
    if started:
        ray.shutdown()


# Every batch goes to the actors (the unit-test keys are small).
SETTINGS = ExecutorSettings(kind="ray", actors=2, min_work_ms=0)


def _local_then_ray(fn, cluster):
    """``fn()`` on the local executor, then on Ray; both results and the Ray chunk count."""
    kernels.set_executor("local")
    try:
        local = fn()
        kernels.set_executor(SETTINGS)
        pool = kernels.get_kernel().pool_ray
        before = pool.stats["chunks"]
        remote = fn()
        return local, remote, pool.stats["chunks"] - before
    finally:
        kernels.set_executor(None)


def _exps(pk, count, salt=0):
    width = (pk.exponent_bits + 7) // 8
    raw = bytes((i * 131 + salt) % 251 for i in range(count * width))
    return np.frombuffer(raw, dtype=np.uint8).reshape(count, width)


def test_encryption_and_decryption_identical(cluster, paillier_keys):
    pk, sk = paillier_keys
    values = list(range(-300, 300, 3))
    exps = _exps(pk, len(values))

    def run():
        public = pk.raw_encrypt(values, exps)
        private = sk.raw_encrypt(values, exps)  # CRT: both halves gathered
        return public, private, sk.raw_decrypt(public)

    local, remote, chunks = _local_then_ray(run, cluster)
    assert chunks >= 4  # public encryption, both CRT halves and decryption went to the actors
    assert remote[0] == local[0] and remote[1] == local[1]  # bit-identical ciphertexts
    assert remote[0] == remote[1]  # the key owner's CRT path gives the same ciphertexts
    assert [int(v) for v in remote[2]] == [v % pk.n for v in values] == [int(v) for v in local[2]]


def test_sparse_products_and_packing_identical(cluster, paillier_keys):
    pk, sk = paillier_keys
    rng = np.random.default_rng(5)  # test data
    matrix = sp.random(60, 40, density=0.2, format="csr", random_state=rng, data_rvs=lambda k: rng.integers(-9, 10, k))
    vector = rng.integers(-1000, 1000, 40)
    cts = pk.raw_encrypt(vector.tolist(), _exps(pk, 40, salt=7))

    def run():
        enc = pk.ciphertext_array(np.array(cts, dtype=object))
        product = ahe.matvec(matrix, enc)
        summed = enc.sum()
        packed = packing.pack(product, 24)
        return [int(c) for c in product.ciphertexts.ravel()], int(summed.ciphertexts.ravel()[0]), packed

    local, remote, chunks = _local_then_ray(run, cluster)
    assert chunks >= 2
    assert remote[0] == local[0] and remote[1] == local[1]
    assert remote[2].to_bytes() == local[2].to_bytes()
    np.testing.assert_array_equal(packing.unpack(sk, remote[2]), matrix @ vector)


def _gated_actor(hold: str, started: str) -> type:
    """The executor's actor class, except that a chunk arriving while the file ``hold`` exists
    first appends its actor's pid to the file ``started`` and then waits until ``hold`` is gone:
    a batch started under the gate cannot finish before the test opens it. Defined in a function
    so that Ray ships the class itself to the workers (pickled by value), not a reference to
    this test module."""

    class GatedKernelActor(ray_executor.KernelActor):
        def run(self, frame: bytes) -> bytes:
            if os.path.exists(hold):
                with open(started, "a") as fh:
                    fh.write(f"{os.getpid()}\n")
                while os.path.exists(hold):
                    time.sleep(0.005)
            return ray_executor.KernelActor.run(self, frame)

    return GatedKernelActor


def test_killed_worker_is_retried_on_another(cluster, paillier_keys, tmp_path, monkeypatch):
    """The victim is killed while it provably holds a chunk of the batch (its chunks wait at a
    gate that opens only after the kill), so the retry must happen on any CPU, however fast."""
    pk, sk = paillier_keys
    values = list(range(20000))
    exps = _exps(pk, len(values), salt=3)
    kernels.set_executor("local")
    expected = pk.raw_encrypt(values, exps)
    hold, started = tmp_path / "hold", tmp_path / "started"
    monkeypatch.setattr(ray_executor, "KernelActor", _gated_actor(str(hold), str(started)))
    kernels.set_executor(SETTINGS)
    pool = kernels.get_kernel().pool_ray  # its actors (and any replacement) are gated actors
    victim = pool.describe_actors()[0]["pid"]  # slot 0: the first chunk of a batch goes there
    before = dict(pool.stats)
    hold.touch()
    killed_in_flight = threading.Event()
    done = threading.Event()

    def kill_victim_mid_chunk():
        try:
            deadline = time.monotonic() + 300  # only a guard against a hang if dispatch is broken
            while not done.is_set() and time.monotonic() < deadline:
                if started.exists() and f"{victim}\n" in started.read_text():
                    os.kill(victim, signal.SIGKILL)  # its chunk cannot have finished: the gate is shut
                    killed_in_flight.set()
                    return
                done.wait(0.005)
        finally:
            hold.unlink()  # now the other actor and the replacement may finish the batch

    killer = threading.Thread(target=kill_victim_mid_chunk)
    killer.start()
    try:
        out = pk.raw_encrypt(values, exps)
    finally:
        done.set()
        killer.join()
        kernels.set_executor(None)
    assert killed_in_flight.is_set(), "the victim never received a chunk of the batch"
    assert pool.stats["retried"] > before["retried"] and pool.stats["replaced"] > before["replaced"]
    assert [int(v) for v in sk.raw_decrypt(out[:50])] == values[:50]
    assert out == expected  # every chunk exactly once, in order


def test_vertical_lr_epoch_host_on_ray_same_model(cluster):
    from shaper.net import NetConfig, launch
    from tests.ml import jobs as J

    X, y = J.data(rows=120)
    params = {"key_bits": 768, "epochs": 1, "batch_size": 60, "seed": bytes(range(32))}
    config = NetConfig(insecure=True, timeout=120)
    host_settings = ExecutorSettings(kind="ray", address=cluster, actors=2, min_work_ms=0)
    local = launch(2, J.executor_job, X, y, params, config=config, timeout=300, workers_per_party=1)
    mixed = launch(2, J.executor_job, X, y, params, config=config, timeout=300, workers_per_party=1,
                   executors={"party0": host_settings})
    assert mixed[0]["ray_chunks"] > 0 and mixed[1]["ray_chunks"] is None  # host on Ray, guest local
    assert local[0]["ray_chunks"] is None
    for a, b in zip(local, mixed):  # the same model, up to the fixed-point rounding of fresh masks
        np.testing.assert_allclose(a["coef"], b["coef"], rtol=1e-4, atol=1e-4)
        assert a["intercept"] == pytest.approx(b["intercept"], abs=1e-4)


LOST = textwrap.dedent("""
    import os, signal, sys, threading, time
    import ray
    from shaper import kernels
    from shaper.kernels import cluster
    from shaper.crypto import paillier
    from shaper.errors import KernelError

    HOLD, STARTED = sys.argv[1], sys.argv[2]


    class GatedKernelActor(cluster.KernelActor):  # defined in __main__: Ray ships the class itself
        def run(self, frame):  # while HOLD exists a chunk says so in STARTED, then waits
            if os.path.exists(HOLD):
                with open(STARTED, "a") as fh:
                    fh.write(f"{os.getpid()}\\n")
                while os.path.exists(HOLD):
                    time.sleep(0.005)
            return cluster.KernelActor.run(self, frame)


    cluster.KernelActor = GatedKernelActor  # the pool starts its actors from this name
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
             object_store_memory=100 << 20)
    # task_timeout far beyond the test's patience: an error can only come from probing the head
    kernels.set_executor("ray", actors=2, min_work_ms=0, task_timeout=3600)
    pk, _ = paillier.keygen(1024)
    pk.raw_encrypt(list(range(200)))  # actors up (the gate is open)

    # The head goes while the executor waits for the batch's chunks, all of them dispatched:
    # a driver whose raylet is gone is terminated by Ray if it then touches the object store
    # (ray.put), which is not what this test is about. So the batch has at most PIPELINE chunks
    # per actor (all sent at once), and the kill waits for the executor's first ray.wait.
    pool = kernels.get_kernel().pool_ray
    chunks, waiting = [], threading.Event()
    real_map, real_wait = pool.map, ray.wait

    def counting_map(workers, tasks):
        chunks.append(len(tasks))
        return real_map(workers, tasks)

    def signalling_wait(*args, **kwargs):
        if os.path.exists(HOLD):
            waiting.set()
        return real_wait(*args, **kwargs)

    pool.map, ray.wait = counting_map, signalling_wait

    def kill_head():  # the cluster's head processes: this process's own children
        for pid in os.listdir("/proc"):
            try:
                stat = open(f"/proc/{pid}/stat").read()
            except OSError:
                continue
            name, ppid = stat[stat.index("(") + 1:stat.rindex(")")], int(stat[stat.rindex(")") + 2:].split()[1])
            if ppid == os.getpid() and name in ("gcs_server", "raylet"):
                os.kill(int(pid), signal.SIGKILL)

    def kill_head_mid_batch():  # an actor holds a chunk and the gate is shut: the batch is in flight
        waiting.wait()
        while not os.path.exists(STARTED):
            time.sleep(0.005)
        kill_head()
        print("head killed with a chunk in flight", flush=True)

    open(HOLD, "w").close()  # shut the gate: no chunk of the batch below can finish
    threading.Thread(target=kill_head_mid_batch, daemon=True).start()
    started = time.monotonic()
    try:
        pk.raw_encrypt(list(range(1000)))
    except KernelError as exc:
        print("batch chunks: %d of at most %d" % (max(chunks), 2 * cluster.PIPELINE), flush=True)
        print("KernelError after %.0f s: %s" % (time.monotonic() - started, exc), flush=True)
        os._exit(0)
    print("no error", flush=True)
    os._exit(1)
""")


def test_lost_cluster_fails_clearly_and_fast(tmp_path):
    """The head dies while the batch is provably in flight (every chunk waits at a gate that
    never opens). The task timeout is an hour, so the error can only come from the executor
    probing the head; it must say the cluster is gone."""
    script = tmp_path / "lost.py"
    script.write_text(LOST)
    env = dict(os.environ, SHAPER_EXECUTOR="local")
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "hold"), str(tmp_path / "started")],
                          capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "head killed with a chunk in flight" in proc.stdout, proc.stdout
    counts = [x for x in proc.stdout.splitlines() if x.startswith("batch chunks: ")][0].split()
    assert 1 <= int(counts[2]) <= int(counts[-1]), counts  # every chunk was sent before the kill
    line = [x for x in proc.stdout.splitlines() if x.startswith("KernelError")][0]
    assert "is gone" in line and "refuses connections" in line, line  # the probe's verdict, not the timeout


def test_cluster_check_command(cluster, capsys):
    from shaper.cli import main

    assert main(["cluster", "check", "--actors", "2", "--batch", "300", "--key-bits", "1024"]) == 0
    out = capsys.readouterr().out
    assert "2 actors ready" in out and "ciphertexts identical: True" in out, out
    assert kernels.executor() == ExecutorSettings()  # the command leaves the process on the default
