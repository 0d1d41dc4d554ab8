"""Data readers, alignment check, vertical split and the SHAPER workload generator."""

import numpy as np
import pytest
import scipy.sparse as sp

from shaper.errors import ConfigError, PartyError
from shaper.ml.data import check_aligned, make_shaper_workload, read_table, shaper_workload, vertical_split
from shaper.net import run_in_memory


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
