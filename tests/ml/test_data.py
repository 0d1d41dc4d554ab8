"""Data readers, alignment by PSI and its check, vertical split and the SHAPER workload generator."""

import importlib.util
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from shaper.errors import ConfigError, PartyError
from shaper.ml.alignment import align
from shaper.ml.data import check_aligned, make_shaper_workload, read_table, shaper_workload, vertical_split
from shaper.net import run_in_memory

# ECDH runs in the native extension only
NEEDS_NATIVE = pytest.mark.skipif(importlib.util.find_spec("shaper._native") is None,
                                  reason="ECDH PSI runs in the native extension only (no Python curve arithmetic)")


def _frame(tmp_path):
    import pandas as pd

    df = pd.DataFrame({"id": ["u3", "u1", "u2"], "a": [1.5, 0.0, -2.0], "b": [0, 1, 0], "y": [1, 0, 1]})
    df.to_csv(tmp_path / "d.csv", index=False)
    df.to_parquet(tmp_path / "d.parquet")
    return df


@pytest.mark.parametrize("name", ["d.csv", "d.parquet"])
def test_read_csv_and_parquet(tmp_path, name):
    _frame(tmp_path)
    t = read_table(tmp_path / name, label_column="y")
    assert t.ids.tolist() == ["u3", "u1", "u2"] and t.y.tolist() == [1, 0, 1]
    dense = t.X.toarray() if sp.issparse(t.X) else t.X
    np.testing.assert_array_equal(dense, [[1.5, 0], [0, 1], [-2, 0]])
    assert t.feature_names == ["a", "b"] and t.rows == 3 and t.features == 2
    host = read_table(tmp_path / name)
    assert host.y is None and host.features == 3  # the label column is just a feature without label_column


def test_read_libsvm_with_qid_ids(tmp_path):
    (tmp_path / "d.svm").write_text("1 qid:7 1:0.5 3:2\n0 qid:9 2:1\n")
    t = read_table(tmp_path / "d.svm", label_column="label")
    assert t.ids.tolist() == [7, 9] and t.y.tolist() == [1, 0]
    np.testing.assert_array_equal(t.X.toarray(), [[0.5, 0, 2], [0, 1, 0]])


def test_read_errors(tmp_path):
    _frame(tmp_path)
    with pytest.raises(ConfigError, match="no id column"):
        read_table(tmp_path / "d.csv", id_column="key")
    with pytest.raises(ConfigError, match="no label column"):
        read_table(tmp_path / "d.csv", label_column="target")
    with pytest.raises(ConfigError, match="unknown format"):
        read_table(tmp_path / "d.xlsx")
    with pytest.raises(ConfigError, match="does not exist"):
        read_table(tmp_path / "missing.csv")
    (tmp_path / "bad.csv").write_text("id,a,y\n1,2,5\n")
    with pytest.raises(ConfigError, match="0/1"):
        read_table(tmp_path / "bad.csv", label_column="y")


def _aligned(session, ids):
    check_aligned(session, ids[session.index])
    return "ok"


def test_alignment_check_compares_digests_only():
    assert run_in_memory(2, _aligned, [np.array([1, 2, 3]), np.array([1, 2, 3])]) == ["ok", "ok"]
    with pytest.raises(PartyError, match="not aligned"):
        run_in_memory(2, _aligned, [np.array([1, 2, 3]), np.array([1, 3, 2])])


def test_unaligned_rows_error_says_how_to_align_them():
    """The error names what to do: --align auto (PSI inside the job) or shaper psi beforehand."""
    with pytest.raises(PartyError, match=r"not aligned with party .*: pass --align auto .*\(or run shaper psi"):
        run_in_memory(2, _aligned, [np.array([1, 2, 3]), np.array([1, 2])])


@NEEDS_NATIVE
def test_multi_column_keys_and_align():
    frame_a = {"first": ["ann", "bo", "cy", "ann"], "last": ["lee", "li", "x", "li"], "v": [1, 2, 3, 4]}
    frame_b = {"first": ["ann", "ann", "cy", "an"], "last": ["li", "lee", "y", "nli"], "w": [5, 6, 7, 8]}

    def job(session):
        data = frame_a if session.index == 0 else frame_b
        return align(session, data, id_columns=["first", "last"])

    out_a, out_b = run_in_memory(2, job)
    assert list(zip(out_a["first"], out_a["last"])) == list(zip(out_b["first"], out_b["last"]))
    assert sorted(zip(out_a["first"], out_a["last"])) == [("ann", "lee"), ("ann", "li")]
    assert sorted(out_a["v"].tolist()) == [1, 4] and sorted(out_b["w"].tolist()) == [5, 6]
    with pytest.raises(PartyError, match="no id column 'id'"):
        run_in_memory(2, lambda s: align(s, frame_a, id_columns="id"))


@NEEDS_NATIVE
def test_align_a_dataframe_and_a_table():
    pd = pytest.importorskip("pandas")
    from shaper.ml.data import Table

    fa = pd.DataFrame({"id": ["u1", "u2", "u3", "u4"], "x": [1.0, 2.0, 3.0, 4.0]})
    tb = Table(np.array(["u4", "u9", "u2"]), np.array([[40.0], [90.0], [20.0]]), np.array([1, 0, 1]))

    def job(session):
        return align(session, fa, id_columns="id") if session.index == 0 else align(session, tb)

    out_a, out_b = run_in_memory(2, job)
    assert out_a["id"].tolist() == out_b.ids.tolist() and sorted(out_b.ids.tolist()) == ["u2", "u4"]
    assert (out_a["x"].to_numpy() * 10 == out_b.X[:, 0]).all() and out_b.y.tolist() == [1, 1]


@NEEDS_NATIVE
def test_align_by_every_protocol_gives_the_pre_aligned_rows_bit_for_bit():
    """okvs (the default), ECDH and FNP line up the same rows: exactly the rows of the ids both
    hold, sorted by id, with every column's values unchanged (what training on them sees)."""
    rng = np.random.default_rng(3)
    frames = ({"id": [f"p{i}" for i in range(0, 40, 2)], "x": rng.normal(size=20)},
              {"id": [f"p{i}" for i in range(0, 40, 3)][::-1], "y": rng.normal(size=14)})

    def job(session, protocol):
        return align(session, frames[session.index], id_columns="id", protocol=protocol)

    shared = sorted(set(frames[0]["id"]) & set(frames[1]["id"]))
    expected = [{"id": shared, **{k: [f[k][f["id"].index(i)] for i in shared] for k in f if k != "id"}}
                for f in frames]
    for protocol in ("okvs", "ecdh", "fnp"):
        for got, want in zip(run_in_memory(2, job, protocol), expected):
            assert got["id"].tolist() == want["id"]
            for k in want:
                if k != "id":
                    assert got[k].tobytes() == np.asarray(want[k]).tobytes(), (protocol, k)


def test_vertical_split():
    X = sp.random(10, 5, density=0.5, format="csr", random_state=1)
    host, (guest, y) = vertical_split(X, np.arange(10) % 2, 2)
    assert host.shape == (10, 2) and guest.shape == (10, 3)
    np.testing.assert_array_equal(sp.hstack([host, guest]).toarray(), X.toarray())
    with pytest.raises(ValueError):
        vertical_split(X, np.zeros(10), 5)


def test_shaper_workload_shape_and_streaming():
    chunks = list(shaper_workload(2500, host_features=3000, guest_features=7000, density=0.002, chunk_rows=1000))
    assert [c[0].shape[0] for c in chunks] == [1000, 1000, 500]
    Xh, Xg, y = make_shaper_workload(2500, host_features=3000, guest_features=7000, density=0.002, chunk_rows=1000)
    assert Xh.shape == (2500, 3000) and Xg.shape == (2500, 7000)
    assert set(np.diff(Xh.indptr).tolist()) == {6} and set(np.diff(Xg.indptr).tolist()) == {14}  # 0.2 % density
    assert set(Xh.data.tolist()) == {1}  # one-hot 0/1
    assert 0.2 < y.mean() < 0.8
    again = make_shaper_workload(2500, host_features=3000, guest_features=7000, density=0.002, chunk_rows=1000)
    np.testing.assert_array_equal(again[2], y)  # reproducible from the seed


# -- CSV without pandas, and non-numeric features ----------------------------------------------------
CSV_CASES = {
    "string ids, dense": "id,a,b,y\nu3,1.5,0,1\nu1,0,1,0\nu2,-2,0,1\n",
    "integer ids, sparse 0/1, float labels": "id,f1,f2,f3,label\n7,0,0,1,1.0\n9,0,0,0,0.0\n11,1,0,0,1.0\n",
    "quoted cells, spaces, exponents, blank line": 'id,"x, y",z,y\n"a",1e3, 2 ,0\n\n"b",-0.5,3,1\n',
    "bool labels, leading zeros in ids": "id,a,y\n007,1,True\n010,2,False\n",
}


def _same_table(a, b):
    assert a.ids.tolist() == b.ids.tolist() and a.ids.dtype == b.ids.dtype
    assert (a.y is None and b.y is None) or (a.y.tolist() == b.y.tolist() and a.y.dtype == b.y.dtype)
    assert a.feature_names == b.feature_names and sp.issparse(a.X) == sp.issparse(b.X)
    np.testing.assert_array_equal(a.X.toarray() if sp.issparse(a.X) else a.X, b.X.toarray() if sp.issparse(b.X) else b.X)


@pytest.mark.parametrize("case", sorted(CSV_CASES))
def test_csv_without_pandas_reads_what_pandas_reads(tmp_path, monkeypatch, case):
    pytest.importorskip("pandas")
    path = tmp_path / "d.csv"
    path.write_text(CSV_CASES[case])
    label = "label" if "label" in CSV_CASES[case].split("\n")[0] else "y"
    with_pandas = read_table(path, label_column=label)
    host_with_pandas = read_table(path)
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` now fails
    _same_table(read_table(path, label_column=label), with_pandas)
    _same_table(read_table(path), host_with_pandas)


def test_csv_errors_are_the_same_without_pandas(tmp_path, monkeypatch):
    (tmp_path / "missing.csv").write_text("id,a,y\n1,,1\n2,3,0\n")
    (tmp_path / "labels.csv").write_text("id,a,y\n1,2,yes\n2,3,\n")
    (tmp_path / "header-only.csv").write_text("id,a,y\n")
    cases = [("missing.csv", "missing values"), ("labels.csv", "labels must be 0/1"),
             ("header-only.csv", "no rows")]
    for pandas_hidden in (False, True):
        if pandas_hidden:
            monkeypatch.setitem(sys.modules, "pandas", None)
        for name, message in cases:
            with pytest.raises(ConfigError, match=message):
                read_table(tmp_path / name, label_column="y")
        with pytest.raises(ConfigError, match="no label column 'target'"):
            read_table(tmp_path / "missing.csv", label_column="target")


@pytest.mark.parametrize("pandas_hidden", [False, True], ids=["pandas", "csv-module"])
def test_non_numeric_feature_column_is_named(tmp_path, monkeypatch, pandas_hidden):
    path = tmp_path / "d.csv"
    path.write_text('id,grade,amount,y\n1,gold,"1,234.5",1\n2,silver,"2,000",0\n')
    if pandas_hidden:
        monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ConfigError) as info:
        read_table(path, label_column="y")
    message = str(info.value)
    assert "'grade' (e.g. 'gold')" in message and "'amount' (e.g. '1,234.5')" in message
    assert "not numeric" in message and "Cannot interpret" not in message


def test_parquet_without_pandas_names_the_extra(tmp_path, monkeypatch):
    (tmp_path / "d.parquet").write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pip install 'shaper-ppml\[data\]'"):
        read_table(tmp_path / "d.parquet")
