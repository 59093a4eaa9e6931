import hashlib
import lzma
import os
from pathlib import Path

import pytest

from ppml.data.sources import DATASETS, Dataset, SourceFile, get_dataset

REPO = Path(__file__).resolve().parents[3]
SHA = "0" * 64


def _mirror_root() -> Path | None:
    root = Path(os.environ.get("DATA_MIRROR") or REPO.parent / "shared" / "datasets")
    return root if root.is_dir() else None


def test_registry_has_the_pipeline_datasets():
    assert set(DATASETS) == {"a9a", "gisette", "adult", "default_credit", "give_credit", "madelon", "arcene"}
    assert all(key == d.key for key, d in DATASETS.items())
    with pytest.raises(TypeError):
        DATASETS["x"] = DATASETS["a9a"]  # read-only


def test_registry_lists_the_files_the_readers_need():
    assert [f.name for f in DATASETS["a9a"].files] == ["a9a", "a9a.t"]
    assert [f.name for f in DATASETS["adult"].files] == ["adult.data", "adult.test"]
    assert [f.name for f in DATASETS["default_credit"].files] == [
        "UCI_Credit_Card.csv", "fate/default_credit_hetero_guest.csv", "fate/default_credit_hetero_host.csv"]
    assert DATASETS["give_credit"].file("cs-training.csv").url is None  # Kaggle needs a login
    gisette = DATASETS["gisette"]
    assert gisette.file("gisette_train.data").size == 67788724
    assert gisette.file("gisette_valid.labels").url.endswith("/gisette/gisette_valid.labels")  # one dir up
    for key in ("madelon", "arcene"):
        assert {f.name for f in DATASETS[key].files} == {
            f"{key}_train.data", f"{key}_train.labels", f"{key}_valid.data", f"{key}_valid.labels"}


def test_get_dataset_names_the_known_keys():
    assert get_dataset("adult") is DATASETS["adult"]
    with pytest.raises(KeyError, match=r"unknown dataset 'adlt' \(known: a9a, adult, arcene,"):
        get_dataset("adlt")
    toy = Dataset("toy", "toy", "https://example.org", (SourceFile("f", SHA, None, None),))
    assert get_dataset("toy", {"toy": toy}) is toy
    with pytest.raises(KeyError, match="has no file 'g'"):
        toy.file("g")


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "../f"}, "normalized relative path"),
    ({"name": "/abs/f"}, "normalized relative path"),
    ({"name": "a//b"}, "normalized relative path"),
    ({"name": "status.json"}, "collides"),
    ({"sha256": "ABC"}, "64 lowercase hex"),
    ({"size": 0}, "positive number of bytes"),
    ({"url": "ftp://host/f"}, "must be http"),
])
def test_source_file_rejects_bad_entries(kwargs, message):
    fields = {"name": "f", "sha256": SHA, "size": 1, "url": "https://example.org/f", **kwargs}
    with pytest.raises(ValueError, match=message):
        SourceFile(**fields)


def test_dataset_rejects_empty_or_repeated_files():
    with pytest.raises(ValueError, match="lists no files"):
        Dataset("d", "d", "https://example.org", ())
    f = SourceFile("f", SHA, None, None)
    with pytest.raises(ValueError, match="lists 'f' twice"):
        Dataset("d", "d", "https://example.org", (f, f))


@pytest.mark.skipif(_mirror_root() is None, reason="no dataset mirror (set DATA_MIRROR)")
def test_mirror_holds_every_registered_file_except_gisette():
    root = _mirror_root()
    for key, dataset in DATASETS.items():
        present = [(root / key / f.name).is_file() or (root / key / f"{f.name}.xz").is_file()
                   for f in dataset.files]
        assert all(present) or (key == "gisette" and not any(present)), key


@pytest.mark.skipif(_mirror_root() is None, reason="no dataset mirror (set DATA_MIRROR)")
def test_mirror_copies_match_registered_digests_and_sizes():
    root = _mirror_root()
    for dataset in DATASETS.values():
        for f in dataset.files:
            path = root / dataset.key / f"{f.name}.xz"
            if not path.is_file():
                continue
            data = lzma.decompress(path.read_bytes())
            assert hashlib.sha256(data).hexdigest() == f.sha256, f.name
            assert f.size in (None, len(data)), f.name
