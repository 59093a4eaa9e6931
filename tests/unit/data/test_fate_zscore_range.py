"""``fate_zscore`` keeps data as given, so it refuses data that cannot be z-scores (issue 18).

A user's CSV with 1e308 under ``normalize: fate_zscore`` (an identity) used to pass the prepare stage and stop
the Paillier protocols with an EncodingOverflowError traceback; the prepare stage now refuses it in one line,
naming the dataset, the column and the value.
"""

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import yaml

from ppml.data.download import download_dataset
from ppml.data.normalize import VERTICAL, ZSCORE_BOUND, NotZScoredError
from ppml.data.prepare import NormalizationError, dataset_params, prepare_dataset

ROOT = Path(__file__).resolve().parents[3]
USER = {"source": "user", "reader": "user_csv", "path": "data/user/mine.csv", "label_column": "y",
        "positive_label": "1", "id_column": "id", "partition": "vertical", "parties": ["host", "guest"],
        "split": [2, 1], "label_holder": "guest", "alignment": "plain", "private_fraction": 0.0,
        "test_fraction": 0.25, "normalize": "fate_zscore"}


def user_csv(value="1e308", row=5, n=24):
    """id, a, b, c, y; cell b of record `row` is `value`, every other cell a small number."""
    rng = np.random.default_rng(0)
    lines = ["id,a,b,c,y"]
    for k in range(n):
        a, b, c = rng.normal(size=3).round(3)
        lines.append(f"r{k},{a},{value if k == row else b},{c},{k % 2}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("to_matrix", [np.asarray, sp.csr_array])
@pytest.mark.parametrize("value", [1e308, -1e308, 2.0**21, -1e7])
def test_values_no_z_score_can_have_are_refused(to_matrix, value):
    train = np.zeros((6, 3))
    test = np.zeros((4, 3))
    test[2, 1] = value
    shown = re.escape(f"{value:g}")
    message = rf"column 1 of this party's block holds {shown} on a test row, beyond 1048576 "
    with pytest.raises(NotZScoredError, match=message + ".*these data are not z-scored") as caught:
        VERTICAL["fate_zscore"](to_matrix(train), to_matrix(test))
    assert (caught.value.column, caught.value.value) == (1, value)
    with pytest.raises(NotZScoredError, match="on a training row"):
        VERTICAL["fate_zscore"](to_matrix(test), to_matrix(train))
    # z-scores up to the bound (one over 2^40 rows) are kept as given; NaN and infinities are collapse()'s
    test[2, 1] = np.copysign(ZSCORE_BOUND, value)
    test[0] = [np.nan, np.inf, 228.4]
    kept = to_matrix(test)
    assert VERTICAL["fate_zscore"](to_matrix(train), kept)[1] is kept


def test_prepare_refuses_a_user_csv_of_raw_values_under_fate_zscore(tmp_path):
    raw = tmp_path / "raw"
    path = tmp_path / "data/user/mine.csv"
    path.parent.mkdir(parents=True)
    path.write_text(user_csv())
    download_dataset("mine", raw, required=True, source="user", path=path)
    built = dataset_params({"datasets": {"mine": USER}}, "mine")
    with pytest.raises(NormalizationError, match=r"dataset 'mine', party host: .* column 'b' holds 1e\+308"):
        prepare_dataset("mine", built, raw, tmp_path / "out", rng=np.random.default_rng(0))
    assert not (tmp_path / "out").exists()


def test_the_prepare_stage_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("prepare_stage", ROOT / "stages" / "prepare.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    monkeypatch.chdir(tmp_path)  # params paths are relative to the repository root
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"seed": 0, "datasets": {"mine": USER}}))
    (tmp_path / "data/user").mkdir(parents=True)
    (tmp_path / USER["path"]).write_text(user_csv())
    download_dataset("mine", tmp_path / "data/raw/mine", required=True, source="user", path=USER["path"])
    assert stage.main(["--dataset", "mine", "--params", "params.yaml", "--raw", "data/raw/mine",
                       "--out", "data/prepared/mine"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("prepare@mine: dataset 'mine', party host: fate_zscore keeps the values as given")
    assert "\n" not in err and "column 'b' holds 1e+308" in err
