import json

import numpy as np
import pytest
import scipy.sparse as sp

from ppml.history import ConvergenceWarning, History
from ppml.io import atomic_path, load_party, save_npz, save_party
from ppml.parties import Party
from ppml.privacy.events import GaussianEvent, event_from_dict


def test_history_records_final_metrics_and_warns_on_cap():
    h = History("demo")
    h.log(epoch=1, train_objective=np.float64(0.5), extra=np.array([1.0, np.inf]))
    with pytest.warns(ConvergenceWarning, match="cap"):
        h.stop(converged=False, reason="hit the iteration cap")
    y = np.array([0, 1, 1, 0])
    h.finish(train_objective=0.4, y_train=y, train_scores=np.array([-2.0, 1.0, 3.0, 0.5]), y_test=y,
             test_scores=np.array([-1.0, 2.0, 1.0, -3.0]))
    assert h.final["test_auc"] == 1.0 and h.final["test_error"] == 0.0
    assert h.final["train_error"] == 0.25 and h.final["converged"] is False
    data = json.loads(json.dumps(h.to_dict(), allow_nan=False))
    assert data["records"][0]["extra"] == [1.0, None]


def test_ledger_events_roundtrip():
    h = History("demo")
    h.ledger.spend(GaussianEvent(sigma=2.0, sensitivity=0.5, count=3, party="p1"))
    d = h.ledger.to_dict()["events"][0]
    assert d["kind"] == "gaussian"
    assert event_from_dict(d) == GaussianEvent(sigma=2.0, sensitivity=0.5, count=3, party="p1")
    assert event_from_dict(d).noise_multiplier == 4.0


def test_npz_is_byte_deterministic_and_atomic(tmp_path):
    arrays = {"b": np.arange(3.0), "a": np.array(["x", "yy"])}
    save_npz(tmp_path / "1.npz", arrays)
    save_npz(tmp_path / "2.npz", dict(reversed(list(arrays.items()))))
    assert (tmp_path / "1.npz").read_bytes() == (tmp_path / "2.npz").read_bytes()
    with pytest.raises(TypeError, match="dtype object"):
        save_npz(tmp_path / "3.npz", {"o": np.array([None])})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1.npz", "2.npz"]  # nothing half-written
    with pytest.raises(RuntimeError):
        with atomic_path(tmp_path / "4.txt") as tmp:
            tmp.write_text("partial")
            raise RuntimeError("boom")
    assert not (tmp_path / "4.txt").exists() and len(list(tmp_path.iterdir())) == 2


@pytest.mark.parametrize("sparse", [False, True])
def test_party_roundtrip(tmp_path, sparse):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(5, 3))
    X = sp.csr_array(X) if sparse else X
    p = Party(name="p1", columns=("a", "b", "c"), ids=np.array(["1", "2", "3", "4", "5"]), X=X,
              y=np.array([0, 1, 0, 1, 1], dtype=np.int8), test_ids=np.array(["9"]),
              X_test=np.ones((1, 3)), y_test=np.array([1], dtype=np.int8))
    save_party(tmp_path / "p1.npz", p)
    q = load_party(tmp_path / "p1.npz")
    assert q.name == "p1" and q.columns == p.columns and q.is_label_holder
    assert sp.issparse(q.X) == sparse
    np.testing.assert_array_equal(q.X.toarray() if sparse else q.X, X.toarray() if sparse else X)
    np.testing.assert_array_equal(q.ids, p.ids)


def test_party_rejects_inconsistent_shapes():
    with pytest.raises(ValueError, match="3 ids for 2 rows"):
        Party(name="p", columns=("a",), ids=np.array(["1", "2", "3"]), X=np.zeros((2, 1)))
    with pytest.raises(ValueError, match="column names"):
        Party(name="p", columns=("a", "b"), ids=np.array(["1"]), X=np.zeros((1, 1)))
