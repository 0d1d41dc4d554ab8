"""The benchmark scripts stay runnable: each parses its options and imports only the public
library (a refactor that breaks one fails here, not weeks later when someone measures); every
one writes its JSON with the shared machine block of benchmarks/meta.py; and scale_out.py runs
on a CPU whose local kernel is the native IFMA one (no process pool), simulated here."""

import ast
import datetime
import importlib.util
import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.once  # kernel-independent: CI runs it in its first run only

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(BENCH.glob("*.py")) if BENCH.is_dir() else []
WRITERS = [s for s in SCRIPTS if s.name != "meta.py"]  # every script but the helper writes results
# Quick runs that finish in seconds on a 2-core machine: each must write the machine block.
QUICK = {
    "ckks_precision.py": ["--logn", "11", "--bits", "50", "40", "40", "50", "--scale-bits", "40"],
    # okvs at 2^8 and 2^10, ECDH at 2^8 only (skipped above --ecdh-max), both checked at both parties (~10 s)
    "psi.py": ["--sizes", "8", "10", "--ecdh-max", "8", "--no-openmined"],
    # N = 2^12, 2 parties: keygen, joint input, agreed evaluation and flooded decryption (~20 s)
    "threshold_ckks.py": ["--quick", "--no-openfhe"],
    # AES-128 under BGV on the smallest test ring, one block (~10 s)
    "bgv.py": ["--quick"],
}
NEEDS_NATIVE = {"psi.py": "shaper's okvs and ECDH PSI are native only (the native extension is not built)",
                "threshold_ckks.py": "the benchmark runs the production engine: OT extension is native only",
                "bgv.py": "the benchmark pins the native pool's threads"}
# Machine facts belong to the shared block only: what a script writes must not carry them under
# keys of its own (the keys the scripts used for them before the shared block).
MACHINE_WORDS = {"machine", "processor", "cpu", "cpus", "python", "platform", "date", "numpy", "git"}


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_benchmark_script_starts(script):
    out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "usage:" in out.stdout


def _load(name, monkeypatch):
    """A benchmark script as a module (its directory on sys.path, as when it runs: the scripts
    import meta)."""
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the shared machine block -------------------------------------------------------------------
def test_machine_block_has_the_fixed_keys(monkeypatch, tmp_path):
    import shaper

    meta = _load("meta", monkeypatch)
    block = meta.machine()
    assert tuple(block) == meta.KEYS
    assert isinstance(block["cores"], int) and block["cores"] >= 1
    assert block["python"] == platform.python_version() and block["shaper"] == shaper.__version__
    assert block["avx512_ifma"] in (True, False, None) and block["vaes"] in (True, False, None)
    assert isinstance(block["kernel"], str) and not block["kernel"].startswith("unavailable")
    assert datetime.datetime.fromisoformat(block["date"]).tzinfo is not None

    written = meta.write_json(tmp_path / "new" / "r.json", {"meta": {"key_bits": 2048}, "rows": [1]})
    data = json.loads((tmp_path / "new" / "r.json").read_text())
    assert data == json.loads(json.dumps(written)) and list(data) == ["machine", "meta", "rows"]
    assert tuple(data["machine"]) == meta.KEYS
    with pytest.raises(ValueError, match="machine"):
        meta.write_json(tmp_path / "x.json", {"machine": "mine"})
    assert not list(tmp_path.rglob("*.tmp")) and not (tmp_path / "x.json").exists()


def test_machine_block_never_fails_a_run(monkeypatch):
    """A value that cannot be read (here: a kernel that cannot start) is recorded, not raised."""
    meta = _load("meta", monkeypatch)
    monkeypatch.setenv("SHAPER_NATIVE", "bogus")
    block = meta.machine()
    assert block["kernel"].startswith("unavailable: ValueError") and block["python"] == platform.python_version()


def _calls(tree, name):
    def called(node):
        return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)

    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and called(n) == name]


def _written_dicts(tree, node, seen=None):
    """The dict literals that ``node`` (a write_json payload) is or is assigned from, and those
    under their "meta" key, followed through plain names."""
    seen = set() if seen is None else seen
    if isinstance(node, ast.Name):
        if node.id in seen:
            return []
        seen.add(node.id)
        values = [a.value for a in ast.walk(tree) if isinstance(a, ast.Assign)
                  for t in a.targets if isinstance(t, ast.Name) and t.id == node.id]
        return [d for v in values for d in _written_dicts(tree, v, seen)]
    if not isinstance(node, ast.Dict):
        return []
    found = [node]
    for key, value in zip(node.keys, node.values):
        if isinstance(key, ast.Constant) and key.value == "meta":
            found += _written_dicts(tree, value, seen)
    return found


@pytest.mark.parametrize("script", WRITERS, ids=[s.name for s in WRITERS])
def test_benchmark_writes_its_json_through_meta(script):
    """Read, not run (most take minutes or hours): results go out only through meta.write_json,
    and what a script writes carries no machine facts under keys of its own (its top level and
    its "meta")."""
    tree = ast.parse(script.read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "meta" for a in n.names}
    writes = _calls(tree, "write_json")
    assert "write_json" in imported and writes, "results not written with meta.write_json"
    assert not _calls(tree, "dump"), "json.dump to a file: use meta.write_json"
    for call in _calls(tree, "write") + _calls(tree, "write_text"):
        assert not any(_calls(arg, "dumps") for arg in call.args), "JSON written by hand: use meta.write_json"
    for call in writes:
        payload = call.args[1] if len(call.args) > 1 else None
        for d in _written_dicts(tree, payload):
            keys = {k.value for k in d.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            assert not keys & MACHINE_WORDS, f"machine facts under the script's own keys: {sorted(keys & MACHINE_WORDS)}"


@pytest.mark.parametrize("script", sorted(QUICK), ids=sorted(QUICK))
def test_quick_run_writes_the_machine_block(script, tmp_path, monkeypatch):
    if script in NEEDS_NATIVE and importlib.util.find_spec("shaper._native") is None:
        pytest.skip(NEEDS_NATIVE[script])
    meta = _load("meta", monkeypatch)
    path = tmp_path / "out.json"
    out = subprocess.run([sys.executable, str(BENCH / script), *QUICK[script], "--json", str(path)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads(path.read_text())
    assert tuple(data["machine"]) == meta.KEYS and data["machine"]["cores"] >= 1
    assert not set(data["meta"]) & MACHINE_WORDS
    if script == "psi.py":
        small, large = data["rows"]
        for row in data["rows"]:
            okvs = row["shaper_okvs"]
            assert okvs["checked"].startswith("a and b") and okvs["intersection"] == row["n"] // 2
            assert len(okvs["bits_per_item_per_party"]) == len(okvs["peak_rss_mib"]) == 2
            assert row["okvs_params"]["mask_bytes"] > 0
        assert small["ratios"]["okvs_speedup_over_ecdh"] > 0 and small["shaper_ecdh"]["checked"].startswith("a and b")
        assert "skipped" in large["shaper_ecdh"] and large["ratios"]["okvs_speedup_over_ecdh"] is None


def test_psi_make_files_writes_what_python_formatting_would(tmp_path, monkeypatch):
    """benchmarks/psi.py builds its CSVs in numpy: the same bytes as one f-string per line."""
    psi = _load("psi", monkeypatch)
    shared = psi.make_files(1000, tmp_path, seed=3)
    rng = psi.np.random.default_rng(3)
    pool = rng.permutation(2000)[:1500]
    for name, ids in (("a", pool[:1000]), ("b", psi.np.concatenate([pool[:500], pool[1000:]]))):
        ids = ids[rng.permutation(len(ids))]
        text = "customer,value\n" + "".join(f"cust-{i:09d},{v}\n" for i, v in zip(ids, rng.integers(0, 1000, len(ids))))
        assert (tmp_path / f"{name}.csv").read_text() == text
    assert shared.tolist() == sorted(pool[:500].tolist())
    (tmp_path / "out.csv").write_text("customer,value\r\n" + "".join(f"cust-{i:09d},7\r\n" for i in shared))
    assert psi.read_out_numbers(tmp_path / "out.csv").tolist() == shared.tolist()


# -- scale_out.py on both kinds of CPU ------------------------------------------------------------
class _StandInRayKernel:
    """In place of shaper.kernels.cluster.RayKernel, so no cluster is needed: its task pool
    answers the benchmark's trivial task (3 * 5 mod 7)."""

    def __init__(self, settings, local):
        self.name = f"ray(2 actors) over {local.name}"
        self.workers = 2
        self.pool = self

    def map(self, workers, tasks):
        return [[3 * 5 % 7] for _ in tasks]

    def close(self):
        pass


def _report(scale_out, over, capsys):
    enc = [{"batch": 1000, "local_per_s": 900, "ray_per_s": 800, "ray_over_local": 0.889, "ray_chunks": 2,
            "bit_identical": True}]
    proj = [scale_out.projection(400.0, over["ray"]["per_task_in_batch_ms"], 1e-5, 16, 2, 10**6, 1)]
    scale_out.print_report(1024, 2, over, enc, 1e-5, proj, None)
    return capsys.readouterr().out


def test_scale_out_where_the_local_kernel_is_native_ifma(monkeypatch, capsys):
    """On a CPU with AVX-512 IFMA get_kernel() is the native kernel, which has threads and no
    process pool: the local executor has no per-task overhead to measure, and the benchmark
    must say so instead of failing (it used to raise KeyError: 'local')."""
    from shaper import kernels
    from shaper.kernels import ExecutorSettings, cluster, native

    if not native.available():
        pytest.skip("the native extension is not built")
    scale_out = _load("scale_out", monkeypatch)
    monkeypatch.setenv("SHAPER_NATIVE", "auto")
    monkeypatch.delenv("SHAPER_EXECUTOR", raising=False)
    monkeypatch.setattr(native, "ifma_available", lambda: True)  # this CPU, as far as get_kernel() can tell
    monkeypatch.setattr(cluster, "RayKernel", _StandInRayKernel)
    try:
        kernels.set_executor(None)
        assert kernels.get_kernel().name == "native-ifma" and getattr(kernels.get_kernel(), "pool", None) is None
        over = scale_out.overhead(ExecutorSettings(kind="ray", actors=2), reps=2)
    finally:
        kernels.set_executor(None)  # (no IFMA instruction ran: the kernel was only built)
    assert over["local"]["kernel"] == "native-ifma" and over["local"]["task_pool"] is False
    assert over["local"]["round_trip_ms"] is None and over["local"]["per_task_in_batch_ms"] is None
    assert over["ray"]["task_pool"] is True and over["ray"]["per_task_in_batch_ms"] >= 0
    out = _report(scale_out, over, capsys)
    assert "local n/a (native-ifma: no task pool); ray round trip" in out


def test_scale_out_where_the_local_kernel_is_the_process_pool(monkeypatch, capsys):
    from shaper import kernels
    from shaper.kernels import ExecutorSettings, cluster

    scale_out = _load("scale_out", monkeypatch)
    monkeypatch.setenv("SHAPER_NATIVE", "off")
    monkeypatch.setenv("SHAPER_WORKERS", "2")
    monkeypatch.delenv("SHAPER_EXECUTOR", raising=False)
    monkeypatch.setattr(cluster, "RayKernel", _StandInRayKernel)
    try:
        kernels.set_workers(None)
        kernels.set_executor(None)
        over = scale_out.overhead(ExecutorSettings(kind="ray", actors=2), reps=2)
    finally:
        kernels.set_workers(None)
        kernels.set_executor(None)
    assert over["local"]["kernel"] == "gmpy2-parallel" and over["local"]["task_pool"] is True
    assert over["local"]["round_trip_ms"] > 0 and over["local"]["workers"] == 2
    out = _report(scale_out, over, capsys)
    assert "local round trip" in out and "no task pool" not in out
