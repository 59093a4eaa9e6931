"""calibration: tight: every private decentralized variant spends its target by the tight accountant."""

import numpy as np
import pytest

from ppml.algorithms import _private_admm as private
from ppml.algorithms import dvp, ipp_admm, m_admm, pp_admm, r_admm
from ppml.privacy.accountants import tight_epsilon
from ppml.privacy.calibration import RTOL

from horizontal_data import fit_module, horizontal

CASES = [(pp_admm, {"T": 4}), (ipp_admm, {"T": 4, "c": 2}), (dvp, {"T": 4}), (m_admm, {"T": 4, "q": 1.02}),
         (r_admm, {"T": 5})]


@pytest.fixture(scope="module")
def data():
    return horizontal(np.random.default_rng(11), n=[80, 120, 100], agents=3, d=4, n_test=60)


@pytest.mark.parametrize("module, kw", CASES, ids=lambda c: getattr(c, "__name__", "").rsplit(".", 1)[-1])
def test_tight_runs_spend_their_target_by_the_tight_accountant(data, module, kw):
    parties, evaluator = data
    tight, _, params = fit_module(module, parties, evaluator, lam=0.01, epsilon=2.0, calibration="tight",
                                  agents=3, **kw)
    spent = tight_epsilon(tight.ledger.events, tight.ledger.delta)["epsilon"]
    assert tight.ledger.certified and tight.ledger.target_epsilon == 2.0
    assert 2.0 * (1 - RTOL) <= spent <= 2.0
    assert any("nominal epsilon" in note for note in tight.ledger.notes)
    exact, _, _ = fit_module(module, parties, evaluator, lam=0.01, epsilon=2.0, calibration="exact", agents=3,
                             **kw)
    # the exact conversion is loose: the same target buys a larger budget by the tight accountant
    assert tight.final["rho_total"] > exact.final["rho_total"]
    assert tight_epsilon(exact.ledger.events, exact.ledger.delta)["epsilon"] < spent


def _facts(module, public, params, network):
    if module is dvp:
        return public.names
    if module in (pp_admm, ipp_admm):
        return pp_admm.agent_facts(public, params, network)
    return private.agent_facts(public, network, loss_scale=params.loss_scale)


@pytest.mark.parametrize("module, kw", CASES, ids=lambda c: getattr(c, "__name__", "").rsplit(".", 1)[-1])
@pytest.mark.parametrize("calibration", ["exact", "tight"])
def test_planned_events_are_the_events_a_run_records(data, module, kw, calibration):
    """What the tight calibration plans from public facts is what the agents' own reports put in the ledger."""
    parties, evaluator = data
    history, network, params = fit_module(module, parties, evaluator, lam=0.01, epsilon=1.0, agents=3,
                                          calibration=calibration, **kw)
    facts = _facts(module, pp_admm.Public.from_parties(parties, evaluator), params, network)
    resolved = private.resolve_tight(params, lambda p: module.planned_events(p, facts), facts=tuple(facts))
    planned = module.planned_events(resolved, facts)
    assert [e.to_dict() for e in planned] == [e.to_dict() for e in history.ledger.events]


def test_tight_params_refuse_to_give_a_budget_before_it_is_found():
    params = dvp.Params(epsilon=1.0, calibration="tight")
    with pytest.raises(RuntimeError, match="resolve_tight"):
        params.rho_total
    assert private.with_nominal(params, 3.0).rho_total > dvp.Params(epsilon=1.0).rho_total
    assert dvp.Params(epsilon=1.0, calibration="tight", noise=False).rho_total == dvp.Params(epsilon=1.0).rho_total


def test_the_evaluator_refuses_a_bad_or_differing_nominal_epsilon_from_an_agent():
    params = dvp.Params(epsilon=1.0, calibration="tight")
    good = {"agent1": {"nominal_epsilon": 1.3}, "agent2": {"nominal_epsilon": 1.3}}
    assert private.adopt_nominal(params, good, ["agent1", "agent2"]).nominal_epsilon == 1.3
    for bad in (None, "1.3", float("nan"), -1.0, True):
        with pytest.raises(ValueError, match="agent 'agent2' reports the nominal epsilon"):
            private.adopt_nominal(params, {**good, "agent2": {"nominal_epsilon": bad}}, ["agent1", "agent2"])
    with pytest.raises(ValueError, match="different nominal epsilons"):
        private.adopt_nominal(params, {**good, "agent2": {"nominal_epsilon": 1.31}}, ["agent1", "agent2"])
    # an exact run takes no nominal epsilon from anyone
    assert private.adopt_nominal(dvp.Params(epsilon=1.0), {}, []).nominal_epsilon is None
