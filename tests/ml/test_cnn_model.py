"""The plaintext benchmark CNN (shaper.ml.cnn.model) and its MNIST loaders.

Only the files shipped in the package are used (the bundled weights and the 1,000-image test
sample); the test that reads the full MNIST files skips when ``shared/data/mnist`` is absent.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from shaper.errors import DivergenceError, SerializationError
from shaper.ml.cnn import mnist
from shaper.ml.cnn.model import FORMAT, CnnModel, bundled, train

# Measured on the bundled weights (data/README.md): 97.4 % on the 1k sample, max |logit| 70.3
# (86.2 on the 10k test set). The encrypted evaluation needs |logits| well below ~1000.
SAMPLE_ACCURACY_AT_LEAST = 0.973
SAMPLE_MAX_LOGIT_BELOW = 100.0


@pytest.fixture(scope="module")
def sample():
    images, labels = mnist.sample()
    return images / 255.0, labels


@pytest.fixture(scope="module")
def model():
    return bundled()


def random_model(seed: int = 0) -> CnnModel:
    rng = np.random.default_rng(seed)
    return CnnModel(
        conv=rng.normal(0, 0.3, (5, 4, 4)),
        fc1_w=rng.normal(0, 0.05, (64, 845)),
        fc1_b=rng.normal(0, 0.1, 64),
        fc2_w=rng.normal(0, 0.1, (10, 64)),
        fc2_b=rng.normal(0, 0.1, 10),
    )


def naive_forward(model: CnnModel, image: np.ndarray) -> np.ndarray:
    """Direct convolution and dense layers with explicit loops: the reference for forward()."""
    flat = [0.0] * 845
    for c in range(5):
        for i in range(13):
            for j in range(13):
                total = 0.0
                for u in range(4):
                    for v in range(4):
                        total += model.conv[c, u, v] * image[2 * i + u, 2 * j + v]
                flat[c + 5 * (13 * i + j)] = total * total
    hidden = []
    for r in range(64):
        total = model.fc1_b[r]
        for k in range(845):
            total += model.fc1_w[r, k] * flat[k]
        hidden.append(total * total)
    logits = []
    for r in range(10):
        total = model.fc2_b[r]
        for k in range(64):
            total += model.fc2_w[r, k] * hidden[k]
        logits.append(total)
    return np.array(logits)


# -- forward pass ---------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["bundled", "random"])
def test_forward_matches_naive_loops(which, model, sample):
    net = model if which == "bundled" else random_model(3)
    images = sample[0][:3]
    got = net.forward(images)
    want = np.stack([naive_forward(net, im) for im in images])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(net.forward(images[0]), got[:1], rtol=1e-12, atol=1e-12)  # one (28, 28)


@pytest.mark.parametrize("c,i,j", [(0, 0, 0), (1, 0, 0), (0, 0, 1), (0, 1, 0), (4, 12, 12), (2, 5, 7)])
def test_flatten_order_is_channel_fastest(c, i, j, sample):
    # FC-1 with a single 1 at column c + 5(13i + j) must read exactly conv output (c, i, j)
    # squared, computed here by hand from the image.
    base = random_model(1)
    fc1_w = np.zeros((64, 845))
    fc1_w[0, c + 5 * (13 * i + j)] = 1.0
    net = CnnModel(base.conv, fc1_w, np.zeros(64), base.fc2_w, base.fc2_b)
    images = sample[0][:4]
    layers = net.layers(images)
    by_hand = np.einsum("uv,muv->m", base.conv[c], images[:, 2 * i : 2 * i + 4, 2 * j : 2 * j + 4])
    np.testing.assert_allclose(layers["fc1"][:, 0], by_hand**2, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(layers["conv"][:, c, i, j], by_hand, rtol=1e-13, atol=1e-15)
    assert np.all(layers["fc1"][:, 1:] == 0)


def test_layers_shapes_and_consistency(model, sample):
    layers = model.layers(sample[0][:5])
    assert {k: v.shape for k, v in layers.items()} == {
        "conv": (5, 5, 13, 13), "act1": (5, 5, 13, 13), "fc1": (5, 64), "act2": (5, 64),
        "logits": (5, 10),
    }
    np.testing.assert_array_equal(layers["act1"], layers["conv"] ** 2)
    np.testing.assert_array_equal(layers["act2"], layers["fc1"] ** 2)
    np.testing.assert_array_equal(layers["logits"], model.forward(sample[0][:5]))
    np.testing.assert_array_equal(model.predict(sample[0][:5]), layers["logits"].argmax(axis=1))


# -- bundled weights ------------------------------------------------------------------------


def test_bundled_weights_accuracy_and_logit_range(model, sample):
    images, labels = sample
    assert model.accuracy(images, labels) >= SAMPLE_ACCURACY_AT_LEAST
    assert np.abs(model.forward(images)).max() < SAMPLE_MAX_LOGIT_BELOW
    assert model.test_accuracy is not None and model.test_accuracy >= 0.98
    assert model.training["images"] == 5000 and model.training["shift"] == 2
    assert model.training["data_sha256"] == (
        "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d"
    )


def test_sample_is_first_thousand_test_images():
    images, labels = mnist.sample()
    assert images.shape == (1000, 28, 28) and images.dtype == np.uint8
    assert labels.dtype == np.uint8 and labels[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    try:
        directory = mnist.data_dir()
    except FileNotFoundError:
        pytest.skip("full MNIST test set not available (no shared/data/mnist, SHAPER_MNIST_DIR unset)")
    test_images, test_labels = mnist.load_test(directory)
    np.testing.assert_array_equal(test_images[:1000], images)
    np.testing.assert_array_equal(test_labels[:1000], labels)


# -- weights file ---------------------------------------------------------------------------


def test_save_load_round_trip_is_exact(tmp_path):
    net = CnnModel(**{k: getattr(random_model(2), k) for k in ("conv", "fc1_w", "fc1_b", "fc2_w", "fc2_b")},
                   training={"seed": 2, "note": "test"}, test_accuracy=0.5)
    path = net.save(tmp_path / "w.npz")
    back = CnnModel.load(path)
    assert back.same_weights(net)
    assert back.training == {"seed": 2, "note": "test"} and back.test_accuracy == 0.5
    with np.load(path, allow_pickle=False) as npz:
        assert str(npz["format"]) == FORMAT and npz["fc1_w"].dtype == np.float64


def test_float32_file_holds_rounded_weights(tmp_path):
    net = random_model(4)
    back = CnnModel.load(net.save(tmp_path / "w32.npz", dtype=np.float32))
    np.testing.assert_array_equal(back.fc1_w, net.fc1_w.astype(np.float32).astype(np.float64))
    assert back.fc1_w.dtype == np.float64


def test_save_refuses_to_overwrite(tmp_path):
    path = random_model().save(tmp_path / "w.npz")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        random_model(5).save(path)
    random_model(5).save(path, overwrite=True)
    assert CnnModel.load(path).same_weights(random_model(5))


def write_npz(path, **changes):
    arrays = {"format": np.array(FORMAT)}
    arrays.update({k: getattr(random_model(), k) for k in ("conv", "fc1_w", "fc1_b", "fc2_w", "fc2_b")})
    for key, value in changes.items():
        if value is None:
            del arrays[key]
        else:
            arrays[key] = value
    with open(path, "wb") as handle:
        np.savez_compressed(handle, **arrays)
    return path


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"format": np.array("shaper-mnist-cnn/2")}, "format is 'shaper-mnist-cnn/2'"),
        ({"format": None}, "missing key 'format'"),
        ({"fc1_b": None}, "missing key 'fc1_b'"),
        ({"fc1_w": np.zeros((64, 844))}, r"fc1_w has shape \(64, 844\)"),
        ({"conv": np.full((5, 4, 4), np.nan)}, "conv contains NaN"),
        ({"fc2_b": np.zeros(10, dtype=np.int64)}, "fc2_b has dtype int64"),
        ({"training": np.array("{not json")}, "'training' is not a JSON"),
        ({"test_accuracy": np.array(1.5)}, "test_accuracy is 1.5"),
    ],
)
def test_load_rejects_bad_files(tmp_path, changes, message):
    path = write_npz(tmp_path / "bad.npz", **changes)
    with pytest.raises(SerializationError, match=message):
        CnnModel.load(path)


def test_load_rejects_non_npz(tmp_path):
    path = tmp_path / "junk.npz"
    path.write_bytes(b"not a zip file at all")
    with pytest.raises(SerializationError, match="not a readable .npz"):
        CnnModel.load(path)


def _npy(array: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=True)
    return buf.getvalue()


def _zip(path, members: dict[str, bytes]):
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _good_members() -> dict[str, bytes]:
    members = {"format.npy": _npy(np.array(FORMAT))}
    members.update({f"{k}.npy": _npy(getattr(random_model(), k)) for k in ("conv", "fc1_w", "fc1_b", "fc2_w", "fc2_b")})
    return members


def test_load_refuses_a_member_declaring_a_huge_size_before_reading_it(tmp_path, monkeypatch):
    path = _zip(tmp_path / "bomb.npz", _good_members())
    data = bytearray(path.read_bytes())
    at = data.index(b"PK\x01\x02")  # the first central-directory entry
    data[at + 24:at + 28] = (2**32 - 2).to_bytes(4, "little")  # its uncompressed size: ~4 GiB
    path.write_bytes(bytes(data))
    reads = []
    monkeypatch.setattr(np.lib.format, "read_magic", lambda f: reads.append(f) or (1, 0))
    with pytest.raises(SerializationError, match=r"declares 4,294,967,294 bytes uncompressed.*zip bomb"):
        CnnModel.load(path)
    assert reads == []  # refused from the zip directory, before any member was opened


def test_load_refuses_too_many_members_and_oversized_files(tmp_path):
    members = _good_members()
    members.update({f"extra{i}.npy": b"" for i in range(100)})
    with pytest.raises(SerializationError, match="has 106 members; a CNN weights file has at most 16"):
        CnnModel.load(_zip(tmp_path / "many.npz", members))
    big = tmp_path / "big.npz"
    with open(big, "wb") as fh:
        fh.truncate(65 << 20)  # sparse: no disk used
    with pytest.raises(SerializationError, match="is 68,157,440 bytes; a CNN weights file is at most"):
        CnnModel.load(big)


@pytest.mark.parametrize("key,array,message", [
    ("fc1_w", np.array([None, 1], dtype=object), "fc1_w has dtype '|O'"),
    ("format", np.array([{"a": 1}], dtype=object), "format has dtype '|O'"),
    ("fc2_b", np.zeros(3, dtype=[("x", "<f8")]), "fc2_b has dtype"),
])
def test_load_refuses_object_and_structured_dtypes_without_unpickling(tmp_path, key, array, message):
    members = _good_members()
    members[f"{key}.npy"] = _npy(array)
    with pytest.raises(SerializationError, match=message):
        CnnModel.load(_zip(tmp_path / "obj.npz", members))


def test_load_checks_the_header_shape_before_allocating(tmp_path):
    import io

    # headers announcing (0, 2**63) or 2**40 floats, or the right shape, with 64 bytes behind them
    for key, shape, message in (("fc1_b", (0, 2**63), r"fc1_b has shape \(0, 9223372036854775808\)"),
                                ("fc1_b", (2**40,), r"fc1_b has shape \(1099511627776,\)"),
                                ("fc1_w", (64, 845), r"key 'fc1_w' is truncated \(64 of 432,640 bytes\)")):
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": shape})
        members = _good_members()
        members[f"{key}.npy"] = buf.getvalue() + b"\0" * 64
        path = _zip(tmp_path / "shape.npz", members)
        with pytest.raises(SerializationError, match=message):
            CnnModel.load(path)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_load_refuses_non_finite_weights(tmp_path, value):
    fc2_w = random_model().fc2_w.copy()
    fc2_w[3, 7] = value
    with pytest.raises(SerializationError, match="fc2_w contains NaN or infinite"):
        CnnModel.load(write_npz(tmp_path / "nan.npz", fc2_w=fc2_w))


def test_save_replaces_atomically_and_a_failed_save_keeps_the_old_file(tmp_path, monkeypatch):
    import errno
    import os

    path = random_model(1).save(tmp_path / "w.npz")
    before = path.read_bytes()

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError, match="No space left"):
        random_model(2).save(path, overwrite=True)
    monkeypatch.undo()
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["w.npz"]
    random_model(2).save(path, overwrite=True)
    assert CnnModel.load(path).same_weights(random_model(2))


def test_constructor_names_bad_field():
    good = random_model()
    with pytest.raises(ValueError, match=r"fc2_w: shape \(64, 10\)"):
        CnnModel(good.conv, good.fc1_w, good.fc1_b, good.fc2_w.T, good.fc2_b)
    with pytest.raises(ValueError, match="fc1_b: contains NaN"):
        CnnModel(good.conv, good.fc1_w, np.full(64, np.inf), good.fc2_w, good.fc2_b)


# -- training -------------------------------------------------------------------------------


def test_train_is_deterministic(sample):
    images, labels = sample[0][:128], sample[1][:128]
    a = train(images, labels, epochs=1, seed=7)
    b = train(images, labels, epochs=1, seed=7)
    c = train(images, labels, epochs=1, seed=8)
    assert a.same_weights(b)
    assert not a.same_weights(c)
    assert a.training["seed"] == 7 and a.training["epochs"] == 1


def test_train_reduces_loss_and_learns(sample):
    images, labels = sample
    history = []
    net = train(images[:500], labels[:500], epochs=3, batch_size=32, seed=0,
                progress=lambda *args: history.append(args))
    assert [h[:2] for h in history] == [(1, 3), (2, 3), (3, 3)]
    assert history[-1][2] < 0.7 * history[0][2]
    assert net.accuracy(images[500:], labels[500:]) > 0.7


def test_train_raises_when_loss_is_not_finite(sample):
    with pytest.raises(DivergenceError, match="smaller learning_rate"):
        train(sample[0][:64], sample[1][:64], epochs=1, batch_size=16, learning_rate=1e80)


# -- input validation -----------------------------------------------------------------------


def test_rejects_bad_images(model, sample):
    raw, _ = mnist.sample()
    with pytest.raises(ValueError, match=r"must be in \[0, 1\] \(divide uint8 images by 255\)"):
        model.forward(raw[:2])
    with pytest.raises(ValueError, match=r"shape \(m, 28, 28\)"):
        model.forward(np.zeros((2, 28, 27)))
    with pytest.raises(ValueError, match="NaN"):
        model.forward(np.full((1, 28, 28), np.nan))
    with pytest.raises(ValueError, match="empty"):
        model.forward(np.zeros((0, 28, 28)))


def test_rejects_bad_labels(model, sample):
    images, labels = sample[0][:4], sample[1][:4]
    with pytest.raises(ValueError, match="3 labels for 4 images"):
        model.accuracy(images, labels[:3])
    with pytest.raises(ValueError, match="digits 0..9"):
        model.accuracy(images, np.array([0, 1, 2, 10]))
    with pytest.raises(ValueError, match="integers 0..9"):
        train(images, np.array([0.5, 1, 2, 3]), epochs=1)
    with pytest.raises(ValueError, match="epochs must be an integer >= 1"):
        train(images, labels, epochs=0)


# -- MNIST files ----------------------------------------------------------------------------


def test_data_dir_explains_how_to_provide_it(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        mnist.data_dir(tmp_path / "missing")
    monkeypatch.setenv(mnist.ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="SHAPER_MNIST_DIR"):
        mnist.data_dir()
    monkeypatch.setenv(mnist.ENV_VAR, str(tmp_path))
    assert mnist.data_dir() == tmp_path


def test_load_test_checks_idx_headers(tmp_path):
    header = np.array([2049, 10000, 28, 28], dtype=">u4").tobytes()  # labels magic in images file
    (tmp_path / mnist.TEST_IMAGES).write_bytes(gzip.compress(header))
    (tmp_path / mnist.TEST_LABELS).write_bytes(gzip.compress(np.array([2049, 10000], ">u4").tobytes()))
    with pytest.raises(ValueError, match="magic number is 2049, expected 2051"):
        mnist.load_test(tmp_path)
    header = np.array([2051, 10000, 28, 28], dtype=">u4").tobytes()
    (tmp_path / mnist.TEST_IMAGES).write_bytes(gzip.compress(header + bytes(100)))
    with pytest.raises(ValueError, match="bytes after gunzip, expected 7840016"):
        mnist.load_test(tmp_path)


def test_training_notes_are_json(model):
    assert json.loads(json.dumps(model.training)) == model.training
