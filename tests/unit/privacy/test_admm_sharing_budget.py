"""An ADMM-sharing privacy target Corollary 1 cannot make a finite epsilon is a parameter error (issue 18).

epsilon = 1e300 used to train to the end and then stop with an OverflowError traceback in the ledger's paper
bound; it is refused when the parameters are built, naming the key, and the train stage says so in one line.
"""

import math

import pytest
import yaml

from ppml.config import ParamError
from ppml.experiment import experiment_params
from ppml.privacy.bounds_admm_sharing import corollary1


def block(**kw):
    return {"algorithm": "admm_sharing", "dataset": "toy", "epsilon": 0.5, "delta": 1e-5, "max_epochs": 20,
            **kw}


@pytest.mark.parametrize("epsilon, epochs", [(1e300, 20), (710.0, 1), (703.0, 20)])
def test_epsilon_without_a_finite_corollary1_bound_is_refused_at_validation(epsilon, epochs):
    with pytest.raises(ParamError, match=rf"^experiments\.e: epsilon cannot be composed by Corollary 1 over "
                                         rf"max_epochs = {epochs} at delta 1e-05: no finite bound: .*; got "
                                         rf"{epsilon!r}$".replace("+", r"\+")):
        experiment_params("e", block(epsilon=epsilon, max_epochs=epochs))
    with pytest.raises(ValueError, match="no finite bound"):  # and the bound itself says why
        corollary1(epsilon=epsilon, delta=1e-5, epochs=epochs, delta_prime=1e-5)


def test_largest_epsilons_with_a_finite_bound_are_kept():
    _, params, _ = experiment_params("e", block(epsilon=703.0, max_epochs=1))
    assert params.epsilon == 703.0
    assert math.isfinite(corollary1(epsilon=703.0, delta=1e-5, epochs=1, delta_prime=1e-5)["epsilon"])
    with pytest.raises(ParamError):
        experiment_params("e", block(epsilon=703.0, max_epochs=20))


def test_train_stage_reports_it_in_one_line(tmp_path, capsys):
    from stages.train import main

    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"seed": 1, "experiments": {"x": block(epsilon=1e300)}}))
    out = tmp_path / "run"
    code = main(["--experiment", "x", "--params", str(params), "--data", str(tmp_path), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert err.startswith("experiment x: experiments.x: epsilon cannot be composed by Corollary 1")
    assert not out.exists()
