"""A prepared party file cut short or corrupted is a one-line error naming the file and how to rebuild it
(issue 18), in process (load_prepared) and for a party that loads its own shard (load_shard)."""

import pytest
import yaml

from ppml.data.prepared import ShardError, load_prepared, load_shard
from ppml.io import save_party, write_json
from tests.algorithms.test_paillier_sgd import vertical


@pytest.fixture
def prepared(tmp_path):
    """data/prepared/toy with a guest and a host file."""
    directory = tmp_path / "prepared" / "toy"
    directory.mkdir(parents=True)
    parties = vertical(0, n=60, n_test=20)
    for p in parties:
        save_party(directory / f"{p.name}.npz", p)
    write_json(directory / "manifest.json", {
        "dataset": "toy", "available": True,
        "parties": [{"name": p.name, "file": f"{p.name}.npz"} for p in parties], "evaluator": None})
    return directory


def cut(path, keep):
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


@pytest.mark.parametrize("keep", [0.0, 0.3, 0.999])
def test_truncated_shard_is_named_with_the_stage_that_rebuilds_it(prepared, keep):
    cut(prepared / "host.npz", keep)
    message = rf"^{prepared / 'host.npz'}: truncated or corrupt party file \(\w+: .*\); "
    with pytest.raises(ShardError, match=message + r"regenerate it with `dvc repro prepare@toy`$"):
        load_prepared(prepared)


def test_a_partys_own_shard_names_the_file_too(prepared):
    """What a party loading its own shard in its own process (the ray transport) gets."""
    assert load_shard(prepared / "guest.npz").name == "guest"
    cut(prepared / "guest.npz", 0.5)
    with pytest.raises(ShardError, match=r"guest\.npz: truncated or corrupt party file \(BadZipFile: .*\); "
                                         r"regenerate it with `dvc repro prepare@toy`"):
        load_shard(prepared / "guest.npz")
    with pytest.raises(ShardError, match=r"prepare@credit"):
        load_shard(prepared / "guest.npz", dataset="credit")


def test_corrupted_bytes_are_named_too(prepared):
    path = prepared / "host.npz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside an array: the member's CRC no longer matches
    path.write_bytes(bytes(data))
    with pytest.raises(ShardError, match=r"host\.npz: truncated or corrupt party file"):
        load_prepared(prepared)


def test_another_partys_file_says_how_to_rebuild(prepared):
    (prepared / "host.npz").write_bytes((prepared / "guest.npz").read_bytes())
    with pytest.raises(ShardError, match=r"host\.npz: holds party 'guest', but the manifest says 'host'; "
                                         r"regenerate it with `dvc repro prepare@toy`"):
        load_prepared(prepared)


def test_train_stage_reports_a_truncated_shard_in_one_line(prepared, tmp_path, capsys):
    from stages.train import main

    cut(prepared / "host.npz", 0.5)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"seed": 1, "experiments": {"c": {"algorithm": "centralized",
                                                                       "dataset": "toy"}}}))
    out = tmp_path / "run"
    code = main(["--experiment", "c", "--params", str(params), "--data", str(prepared), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.startswith(f"experiment c: {prepared / 'host.npz'}: truncated or corrupt party file")
    assert err.endswith("regenerate it with `dvc repro prepare@toy`")
    assert not out.exists()
