import numpy as np
import pytest
import scipy.optimize

from ppml.algorithms import decentralized_admm as da
from ppml.config import ParamError, build
from ppml.models.losses import objective_and_gradient, solve_l2_logistic
from ppml.network import Network, traffic_kind
from ppml.runtime import EVALUATOR

from horizontal_data import fit_module, horizontal

LAM = 0.05


def centralized_optimum(parties, lam=LAM):
    """argmin of f = mean loss + lam/2 ||w||^2 over all rows, polished by Newton to |grad f| <= 1e-15."""
    X = np.vstack([p.X for p in parties])
    y = np.concatenate([p.y for p in parties])
    w = solve_l2_logistic(X, y, lam)
    problem = da.LocalProblem(X=X, y=2.0 * y - 1.0, row_weight=1.0 / len(y), a=lam,
                              linear=np.zeros(X.shape[1]))
    w = da.solve_local(problem, w, gtol=1e-15).theta
    return w, objective_and_gradient(w, X, y, lam)[0]


def run(parties, evaluator, **kw):
    history, network, _ = fit_module(da, parties, evaluator, lam=LAM, **kw)
    return history, network


@pytest.fixture(scope="module")
def data():
    return horizontal(np.random.default_rng(7), n=(120, 100, 140, 120, 110))


def test_random_graph_is_connected_seeded_and_respects_p():
    names = [f"a{i}" for i in range(6)]
    g1 = da.random_connected_graph(names, p=0.3, rng=np.random.default_rng(3))
    g2 = da.random_connected_graph(names, p=0.3, rng=np.random.default_rng(3))
    assert g1 == g2
    assert da._connected(_adjacency(names, g1))
    assert len(da.random_connected_graph(names, p=1.0, rng=np.random.default_rng(0))) == 15
    with pytest.raises(RuntimeError, match="no connected graph"):
        da.random_connected_graph(names, p=1e-9, rng=np.random.default_rng(0), max_draws=5)


def _adjacency(names, edges):
    index = {n: i for i, n in enumerate(names)}
    a = np.zeros((len(names), len(names)), dtype=bool)
    for u, v in edges:
        a[index[u], index[v]] = a[index[v], index[u]] = True
    return a


def test_solve_local_matches_a_generic_minimizer():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 4)) / 2
    y = rng.choice([-1.0, 1.0], size=60)
    problem = da.LocalProblem(X=X, y=y, row_weight=0.7, a=1.3, linear=rng.normal(size=4))
    sol = da.solve_local(problem, np.zeros(4), gtol=1e-12)

    def h(theta):
        return problem.value(theta, X @ theta), da.local_gradient(problem, theta)

    ref = scipy.optimize.minimize(h, np.zeros(4), jac=True, method="BFGS", options={"gtol": 1e-12})
    assert sol.converged and sol.grad_norm <= 1e-12
    np.testing.assert_allclose(sol.theta, ref.x, atol=1e-6)


def test_solve_local_reports_a_missed_tolerance():
    rng = np.random.default_rng(2)
    problem = da.LocalProblem(X=rng.normal(size=(30, 3)), y=np.ones(30), row_weight=1.0, a=0.5,
                              linear=np.ones(3))
    sol = da.solve_local(problem, np.zeros(3), gtol=1e-300, max_iter=3)
    assert not sol.converged and sol.iterations == 3


@pytest.mark.parametrize("loss_scale, T", [("sum", 150), ("mean", 400)])
def test_noise_free_consensus_reaches_the_centralized_optimum(data, loss_scale, T):
    parties, evaluator = data
    history, _ = run(parties, evaluator, T=T, loss_scale=loss_scale)
    _, f_star = centralized_optimum(parties)
    assert history.final["train_objective"] == pytest.approx(f_star, rel=1e-4)
    assert history.records[-1]["consensus"] < 0.05 * history.records[0]["consensus"]
    assert history.converged is True


def test_duals_sum_to_zero_and_the_optimum_is_a_fixed_point(data):
    parties, evaluator = data
    params = da.Params(lam=LAM, T=1)
    rng = np.random.default_rng(0)
    network = da.network_for(parties, params, rng=rng)
    agents = da.make_agents(parties, network, loss_scale="sum", rng=rng)
    w_star, _ = centralized_optimum(parties)
    for agent in agents:  # theta_i = theta*, lambda_i = -grad f_i(theta*) / 2 (they sum to zero)
        agent.theta = w_star.copy()
        agent.neighbour_theta = {j: w_star.copy() for j in agent.neighbours}
        problem = agent.problem(reg=agent.regularization(LAM), penalty=0.0)
        agent.dual = -0.5 * da.local_gradient(problem, w_star)
    assert np.linalg.norm(sum(a.dual for a in agents)) < 1e-10

    def program(agent):
        da.consensus_rounds(agent, T=3, local_step=lambda t: (agent.solve(
            agent.problem(reg=agent.regularization(LAM), penalty=params.eta)).theta, {}),
            dual_step=lambda t: params.eta)

    programs = {a.name: (lambda a=a: program(a)) for a in agents}
    programs[EVALUATOR] = lambda: da.evaluator_program(network.endpoint(EVALUATOR), evaluator,
                                                       agents=[a.name for a in agents],
                                                       params=da.Params(lam=LAM, T=3), algorithm="test")
    network.run(programs)
    for agent in agents:
        np.testing.assert_allclose(agent.theta, w_star, atol=1e-8)
    assert np.linalg.norm(sum(a.dual for a in agents)) < 1e-10


def graph_edges(network):
    """The agents' graph: the network's edges without the evaluator's."""
    return {e for e in network.edges if EVALUATOR not in e}


def test_traffic_is_only_theta_between_neighbours(data):
    parties, evaluator = data
    history, network = run(parties, evaluator, T=4, capture=True)
    edges = graph_edges(network)
    side = [m for m in network.messages if traffic_kind(m.tag) != "training"]
    assert {m.tag for m in side} == {m["tag"] for m in da.SIDE_MESSAGES}
    assert all(EVALUATOR in (m.src, m.dst) and traffic_kind(m.tag) == "evaluation" for m in side)
    network.messages = [m for m in network.messages if traffic_kind(m.tag) == "training"]
    assert {m.tag for m in network.messages} == {m["tag"] for m in da.MESSAGES}
    assert all(frozenset((m.src, m.dst)) in edges for m in network.messages)
    assert len(network.messages) == 4 * 2 * len(edges)  # every round, both directions of every edge
    assert network.summary()["messages"] == len(network.messages)  # evaluation counted apart
    rows = np.vstack([p.X for p in parties])
    for m in network.messages:
        assert m.payload.shape == (parties[0].n_features,)
        assert not np.any(np.all(np.isclose(rows, m.payload), axis=1))  # never a data row
    last = [m for m in network.messages if m.round == 3]
    assert all(np.isfinite(m.payload).all() for m in last)


def test_runs_are_deterministic_per_seed(data):
    parties, evaluator = data
    h1, _ = run(parties, evaluator, T=5, seed=11)
    h2, _ = run(parties, evaluator, T=5, seed=11)
    assert h1.records == h2.records
    assert h1.final == h2.final


def test_final_metrics_average_the_agents_models(data):
    parties, evaluator = data
    history, _ = run(parties, evaluator, T=3)
    record = history.records[-1]
    assert history.final["test_error"] == pytest.approx(record["test_error"])
    assert history.final["test_error_worst_agent"] >= history.final["test_error"] - 1e-12
    assert history.final["agents"] == 5


def test_params_are_validated_and_agent_count_checked(data):
    parties, _ = data
    with pytest.raises(ParamError, match="experiments.x.eta must be > 0"):
        build(da.Params, {"eta": -0.5}, "experiments.x")
    with pytest.raises(ParamError, match="agents is 4"):
        da.network_for(parties, da.Params(agents=4), rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="graph edges"):
        da.fit(parties, Network([p.name for p in parties]), da.Params(), rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="'evaluator' address"):
        da.fit(parties, Network([p.name for p in parties], edges=da.random_connected_graph(
            [p.name for p in parties], p=1.0, rng=np.random.default_rng(0))), da.Params(),
            rng=np.random.default_rng(0))
