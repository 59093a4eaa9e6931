from dataclasses import dataclass, field
from typing import Literal

import pytest

from ppml.config import ParamError, build, fail, flat_fields, load_params, section


@dataclass(frozen=True)
class P:
    eta: float = field(default=0.5, metadata={"gt": 0})
    T: int = field(default=30, metadata={"ge": 1})
    mode: Literal["exact", "paper"] = "exact"
    split: tuple[int, ...] = (1, 2)
    delta: float | None = None

    def __post_init__(self):
        if self.delta is not None and self.delta >= 1:
            fail("delta", f"must be < 1, got {self.delta}")


def test_build_validates_with_key_paths():
    p = build(P, {"eta": 1, "T": 3, "split": [4, 5], "delta": "1e-5", "algorithm": "x"}, "experiments.e",
              ignore=("algorithm",))
    assert p == P(eta=1.0, T=3, split=(4, 5), delta=1e-5)
    with pytest.raises(ParamError, match=r"experiments\.e\.eta must be > 0, got -0\.5"):
        build(P, {"eta": -0.5}, "experiments.e")
    with pytest.raises(ParamError, match=r"experiments\.e\.T must be an integer, got 2\.5"):
        build(P, {"T": 2.5}, "experiments.e")
    with pytest.raises(ParamError, match=r"experiments\.e\.mode must be one of \['exact', 'paper'\], got 'x'"):
        build(P, {"mode": "x"}, "experiments.e")
    with pytest.raises(ParamError, match=r"experiments\.e\.bogus is not a parameter of P"):
        build(P, {"bogus": 1}, "experiments.e")
    with pytest.raises(ParamError, match=r"experiments\.e\.split\[1\] must be an integer"):
        build(P, {"split": [1, "a"]}, "experiments.e")
    with pytest.raises(ParamError, match=r"experiments\.e: delta must be < 1, got 2\.0"):
        build(P, {"delta": 2}, "experiments.e")


def test_flat_fields_and_sections(tmp_path):
    assert flat_fields(P()) == {"eta": 0.5, "T": 30, "mode": "exact", "split": [1, 2], "delta": None}
    path = tmp_path / "params.yaml"
    path.write_text("seed: 1\nexperiments:\n  a: {algorithm: local}\n")
    params = load_params(path)
    assert section(params, "experiments.a.algorithm") == "local"
    with pytest.raises(ParamError, match="missing key experiments.b"):
        section(params, "experiments.b")
    with pytest.raises(ParamError, match="file not found"):
        load_params(tmp_path / "nope.yaml")
    path.write_text("- 1\n")
    with pytest.raises(ParamError, match="top level must be a mapping"):
        load_params(path)
