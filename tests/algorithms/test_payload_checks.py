"""A peer's bad payload is named after its sender where it arrives (ppml.network.expect in the role programs).

A tampering peer corrupts one message (its send is wrapped): a short vector, a NaN, a wrong shape or type. The
run must end with a ProtocolError naming that sender and the message's tag, raised by the receiver (in
process, Network.run re-raises the first failing program's error: the receiver's, not a "stopped" party's).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.special import expit

from ppml.algorithms import admm_sharing, centralized, decentralized_admm, fdml, local, make_network, pp_admm
from ppml.config import build
from ppml.history import ConvergenceWarning
from ppml.network import Network, ProtocolError, expect
from ppml.parties import Party
from ppml.runtime import EVALUATOR

from horizontal_data import horizontal

# ---------------------------------------------------------------------------------------------------------
# the tampering peer


def _corrupt(value, how):
    """`value` made bad: ``short`` (one element fewer), ``nan`` (a NaN at index 1), ``shape`` (a 2-D array),
    ``type`` (a str)."""
    if how == "short":
        return value[:-1]
    if how == "nan":
        bad = np.array(value, dtype=float)
        bad.flat[1] = np.nan
        return bad
    if how == "shape":
        return np.zeros((2, 3))
    if how == "type":
        return "not an array"
    raise AssertionError(how)


def tamper(network: Network, *, src: str, tag: str, how: str, field: str | None = None, nth: int = 1) -> list:
    """Make `src`'s `nth` message with `tag` bad (its `field`, for a dict payload); returns the record of what
    was corrupted (to check the corruption happened)."""
    send = network.send
    seen, done = [0], []

    def tampered(s, dst, t, payload):
        if s == src and t == tag:
            seen[0] += 1
            if seen[0] == nth:
                if field is None:
                    payload = _corrupt(payload, how)
                else:
                    payload = {**payload, field: _corrupt(payload[field], how)}
                done.append((dst, t))
        return send(s, dst, t, payload)

    network.send = tampered  # Endpoint.send goes through the network's send
    return done


PROBLEMS = {"short": "of shape", "nan": "holding NaN at index ", "shape": "of shape (2, 3)", "type": "of type str"}


def assert_names(exc: pytest.ExceptionInfo, *, sender: str, tag: str, how: str, field: str | None = None) -> None:
    text = str(exc.value)
    subject = f"{sender!r} sent {tag!r}" + ("" if field is None else f" with {field!r}")
    assert text.startswith(subject), text
    assert PROBLEMS[how] in text, text
    assert "\n" not in text and len(text) < 300, text  # one bounded line: it travels in an abort frame


# ---------------------------------------------------------------------------------------------------------
# the checks themselves


def test_messages_are_one_bounded_line():
    for bad in ("x" * 10**6, {"k" * 10**5: 1}, 10**5000):
        with pytest.raises(ProtocolError) as exc:
            expect.vector(bad, sender="host", tag="share", length=3)
        assert len(str(exc.value)) < 200 and "\n" not in str(exc.value)
    with pytest.raises(ProtocolError, match=r"^'host' sent 'share' of shape \(50,\), expected \(1000,\)$"):
        expect.vector(np.zeros(50), sender="host", tag="share", length=1000)
    with pytest.raises(ProtocolError, match=r"^'a' sent 't' holding inf at index \(1, 0\)$"):
        expect.array(np.array([[0.0, 1.0], [np.inf, 2.0]]), sender="a", tag="t", shape=(2, 2))
    with pytest.raises(ProtocolError, match=r"with 'r' holding 2 at index 0, outside \[-1, 1\]"):
        expect.vector(np.array([2.0]), sender="s", tag="t", length=1, low=-1, high=1, what="r")
    with pytest.raises(ProtocolError, match="of dtype int64, expected a float array"):
        expect.vector(np.zeros(3, dtype=np.int64), sender="s", tag="t", length=3)
    with pytest.raises(ProtocolError, match="equal to an integer of 16610 bits, outside"):
        expect.integer(10**5000, sender="s", tag="t", high=3)
    with pytest.raises(ProtocolError, match="without 'b'"):
        expect.mapping({"a": 1}, ("a", "b"), sender="s", tag="t")
    with pytest.raises(ProtocolError, match="with unexpected 'c'"):
        expect.mapping({"a": 1, "c": 2}, ("a",), sender="s", tag="t")
    with pytest.raises(ProtocolError, match="of type bool, expected a number"):
        expect.scalar(True, sender="s", tag="t")


def test_checks_return_what_they_were_given():
    v = np.arange(4.0)
    assert expect.vector(v, sender="s", tag="t", length=4) is v
    assert expect.array(v.reshape(2, 2), sender="s", tag="t", shape=(None, 2)).shape == (2, 2)
    assert np.isnan(expect.scalar(float("nan"), sender="s", tag="t", finite=False, low=0.0))
    assert expect.flag(True, sender="s", tag="t") is True
    assert expect.integer(3, sender="s", tag="t", low=0, high=3) == 3


# ---------------------------------------------------------------------------------------------------------
# ADMM sharing


def _vertical(seed=0, n=60, n_test=30, widths=(3, 2)):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_test, sum(widths)))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = (rng.random(n + n_test) < expit(X @ rng.normal(size=sum(widths)))).astype(np.int8)
    parties, lo = [], 0
    for k, d in enumerate(widths):
        parties.append(Party(name=f"party{k + 1}", columns=tuple(f"c{j}" for j in range(lo, lo + d)),
                             ids=np.arange(n).astype(str), X=X[:n, lo:lo + d], y=y[:n] if k == 0 else None,
                             test_ids=np.arange(n, n + n_test).astype(str), X_test=X[n:, lo:lo + d],
                             y_test=y[n:] if k == 0 else None))
        lo += d
    return parties


def _admm_sharing(tampering: dict):
    parties = _vertical()
    network = Network([p.name for p in parties])
    done = tamper(network, **tampering)
    params = admm_sharing.Params(max_epochs=4)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return admm_sharing.fit(parties, network, params, rng=np.random.default_rng(1))
    finally:
        assert done, "the tampered message was never sent"


@pytest.mark.parametrize("how", sorted(PROBLEMS))
def test_admm_sharing_share_from_a_member(how):
    with pytest.raises(ProtocolError) as exc:
        _admm_sharing({"src": "party2", "tag": admm_sharing.TAG_SHARE, "how": how, "nth": 2})
    assert_names(exc, sender="party2", tag="share", how=how)
    assert "party 'party1'" in " ".join(getattr(exc.value, "__notes__", ["party 'party1'"]))  # the receiver


@pytest.mark.parametrize("how", ["short", "nan", "type"])
def test_admm_sharing_broadcast_from_the_central_node(how):
    with pytest.raises(ProtocolError) as exc:
        _admm_sharing({"src": "party1", "tag": admm_sharing.TAG_BROADCAST, "how": how, "field": "dual"})
    assert_names(exc, sender="party1", tag="residual_dual", how=how, field="dual")


def test_admm_sharing_evaluation_scores():
    with pytest.raises(ProtocolError) as exc:
        _admm_sharing({"src": "party2", "tag": "eval/scores", "how": "short", "field": "test"})
    assert_names(exc, sender="party2", tag="eval/scores", how="short", field="test")


def test_admm_sharing_honest_run_passes_its_checks():
    parties = _vertical()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        history = admm_sharing.fit(parties, Network([p.name for p in parties]), admm_sharing.Params(max_epochs=3),
                                   rng=np.random.default_rng(1))
    assert len(history.records) == 3


# ---------------------------------------------------------------------------------------------------------
# FDML


def _fdml(tampering: dict, **values):
    parties = _vertical(n=48, n_test=16, widths=(3, 2, 2))
    params = build(fdml.Params, {"epochs": 2, "batch_size": 16, **values}, "experiments.test")
    network = make_network(fdml, parties, params, rng=None)
    done = tamper(network, **tampering)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return fdml.fit(parties, network, params, rng=np.random.default_rng(2))
    finally:
        assert done, "the tampered message was never sent"


@pytest.mark.parametrize("how", sorted(PROBLEMS))
def test_fdml_worker_predictions_reach_the_server(how):
    with pytest.raises(ProtocolError) as exc:
        _fdml({"src": "party3", "tag": "alpha", "how": how, "field": "alpha", "nth": 3},
              variant="staleness_bounded")
    assert_names(exc, sender="party3", tag="alpha", how=how, field="alpha")


@pytest.mark.parametrize("how", sorted(PROBLEMS))
def test_fdml_server_sum_reaches_a_worker(how):
    with pytest.raises(ProtocolError) as exc:
        _fdml({"src": fdml.SERVER, "tag": "sum", "how": how, "field": "sum", "nth": 4}, variant="paper")
    assert_names(exc, sender="server", tag="sum", how=how, field="sum")


def test_fdml_push_of_a_worker_and_the_labels_of_the_server():
    with pytest.raises(ProtocolError) as exc:
        _fdml({"src": "party2", "tag": "push", "how": "nan", "field": "alpha"}, variant="label_private")
    assert_names(exc, sender="party2", tag="push", how="nan", field="alpha")
    with pytest.raises(ProtocolError) as exc:
        _fdml({"src": fdml.SERVER, "tag": "labels", "how": "short", "field": "labels"}, variant="paper")
    assert_names(exc, sender="server", tag="labels", how="short", field="labels")


def test_fdml_residual_out_of_range_and_evaluation_scores():
    parties = _vertical(n=48, n_test=16, widths=(3, 2, 2))
    params = build(fdml.Params, {"epochs": 2, "batch_size": 16, "variant": "staleness_bounded"},
                   "experiments.test")
    network = make_network(fdml, parties, params, rng=None)
    send = network.send

    def tampered(src, dst, tag, payload):
        if src == fdml.SERVER and tag == "residual":
            payload = {**payload, "residual": payload["residual"] + 3.0}
        return send(src, dst, tag, payload)

    network.send = tampered
    with pytest.raises(ProtocolError, match=r"^'server' sent 'residual' with 'residual' holding .* outside "
                                            r"\[-1, 1\]"):
        fdml.fit(parties, network, params, rng=np.random.default_rng(2))
    with pytest.raises(ProtocolError) as exc:
        _fdml({"src": "party1", "tag": "eval/scores", "how": "type", "field": "train"})
    assert_names(exc, sender="party1", tag="eval/scores", how="type", field="train")


# ---------------------------------------------------------------------------------------------------------
# the decentralized family: PP-ADMM and the non-private baseline


@pytest.fixture(scope="module")
def agents_data():
    return horizontal(np.random.default_rng(5), agents=4, n=40, d=4, n_test=40)


def _decentralized(module, data, tampering: dict, **values):
    parties, evaluator = data
    params = module.Params(lam=0.05, agents=len(parties), T=4, **values)
    rng = np.random.default_rng(0)
    network = module.network_for(parties, params, rng=rng)
    done = tamper(network, **tampering)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return module.fit(parties, network, params, rng=rng, evaluation=evaluator)
    finally:
        assert done, "the tampered message was never sent"


@pytest.mark.parametrize("module", [pp_admm, decentralized_admm])
@pytest.mark.parametrize("how", sorted(PROBLEMS))
def test_decentralized_theta_from_a_neighbour(module, agents_data, how):
    with pytest.raises(ProtocolError) as exc:
        _decentralized(module, agents_data, {"src": "agent1", "tag": "theta", "how": how, "nth": 3})
    assert_names(exc, sender="agent1", tag="theta", how=how)


@pytest.mark.parametrize("how", sorted(PROBLEMS))
def test_pp_admm_models_from_the_evaluator(agents_data, how):
    with pytest.raises(ProtocolError) as exc:
        _decentralized(pp_admm, agents_data, {"src": EVALUATOR, "tag": "eval/models", "how": how, "nth": 2})
    assert_names(exc, sender=EVALUATOR, tag="eval/models", how=how)


def test_pp_admm_evaluation_messages_of_an_agent(agents_data):
    for tampering, field in [({"src": "agent2", "tag": "eval/labels", "how": "short"}, None),
                             ({"src": "agent3", "tag": "eval/scores", "how": "nan", "nth": 2}, None),
                             ({"src": "agent2", "tag": "eval/model", "how": "short", "field": "theta"}, "theta")]:
        with pytest.raises(ProtocolError) as exc:
            _decentralized(pp_admm, agents_data, tampering)
        assert_names(exc, sender=tampering["src"], tag=tampering["tag"], how=tampering["how"], field=field)
    parties, evaluator = agents_data
    params = pp_admm.Params(lam=0.05, agents=len(parties), T=3)
    rng = np.random.default_rng(0)
    network = pp_admm.network_for(parties, params, rng=rng)
    send = network.send
    network.send = lambda s, d, t, p: send(s, d, t, {**p, "newton_steps": "many"} if t == "eval/model" else p)
    with pytest.raises(ProtocolError, match=r"^'agent1' sent 'eval/model' with 'newton_steps' of type str, "
                                            r"expected an integer"):
        pp_admm.fit(parties, network, params, rng=rng, evaluation=evaluator)


# ---------------------------------------------------------------------------------------------------------
# the local baseline's one message


def test_local_baseline_model_message(agents_data):
    parties, evaluator = agents_data
    params = centralized.Params(lam=1e-2)
    network = local.network_for(parties, params)
    done = tamper(network, src="agent1", tag=local.TAG_MODEL, how="short", field="w")
    with pytest.raises(ProtocolError) as exc:
        local.fit(parties, network, params, rng=np.random.default_rng(0), evaluation=evaluator)
    assert done
    assert_names(exc, sender="agent1", tag="eval/model", how="short", field="w")


# ---------------------------------------------------------------------------------------------------------
# progress: every party logs at INFO, at a bounded rate


def _speakers(caplog, logger: str) -> dict[str, int]:
    lines: dict[str, int] = {}
    for record in caplog.records:
        if record.name == logger and record.levelname == "INFO":
            who = record.getMessage().split(":", 1)[0]
            lines[who] = lines.get(who, 0) + 1
    return lines


def test_every_party_logs_its_progress(caplog, agents_data):
    caplog.set_level("INFO")
    parties = _vertical()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        admm_sharing.fit(parties, Network([p.name for p in parties]), admm_sharing.Params(max_epochs=3),
                         rng=np.random.default_rng(1))
    lines = _speakers(caplog, admm_sharing.__name__)
    assert set(lines) == {"party1", "party2"} and all(n <= 4 for n in lines.values()), lines

    parties = _vertical(n=48, n_test=16, widths=(3, 2, 2))
    params = build(fdml.Params, {"epochs": 2, "batch_size": 16}, "experiments.test")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fdml.fit(parties, make_network(fdml, parties, params, rng=None), params, rng=np.random.default_rng(2))
    lines = _speakers(caplog, fdml.__name__)
    assert set(lines) == {"party1", "party2", "party3", "server"} and all(n == 2 for n in lines.values()), lines

    agents, evaluator = agents_data
    params = decentralized_admm.Params(lam=0.05, agents=len(agents), T=100)
    rng = np.random.default_rng(0)
    decentralized_admm.fit(agents, decentralized_admm.network_for(agents, params, rng=rng), params, rng=rng,
                           evaluation=evaluator)
    lines = _speakers(caplog, decentralized_admm.__name__)
    assert set(lines) == {"agent1", "agent2", "agent3", "agent4", EVALUATOR}, lines
    assert all(n <= decentralized_admm.PROGRESS_LINES + 2 for n in lines.values()), lines


# ---------------------------------------------------------------------------------------------------------
# the Paillier protocols: the messages a hostile peer sent unchecked before (batch seed, batch loss, the
# coordinator's steps, decrypted masked sums and verdict, the host's evaluation scores, SQN's sample rows)


def _paillier(keys, tampering: dict, *, module=None, replace=None, **overrides):
    """A short Paillier run (512-bit shared keys) with one message of `tampering` made bad; `replace` maps the
    honest payload to the bad one (else ``how`` of :func:`_corrupt`)."""
    from ppml.algorithms import paillier_sgd
    from ppml.crypto.paillier import KeyLengthWarning
    from tests.algorithms.test_paillier_sgd import arbiter_keys, params, vertical

    module = module or paillier_sgd
    parties = vertical(3, n=60, n_test=20)
    p = params(batch_size=30, max_epochs=2, **overrides) if module is paillier_sgd else overrides.pop("p")
    network = module.network_for(parties, p, rng=None)
    if replace is None:
        done = tamper(network, **tampering)
    else:
        done, send = [], network.send

        def tampered(s, dst, t, payload):
            if s == tampering["src"] and t == tampering["tag"] and not done:
                payload = replace(payload)
                done.append((dst, t))
            return send(s, dst, t, payload)

        network.send = tampered
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            warnings.simplefilter("ignore", KeyLengthWarning)
            with arbiter_keys(keys["djn"]):
                return module.fit(parties, network, p, rng=np.random.default_rng(0))
    finally:
        assert done, "the tampered message was never sent"


def _one_line(exc: pytest.ExceptionInfo, start: str, problem: str) -> None:
    text = str(exc.value)
    assert text.startswith(start), text
    assert problem in text, text
    assert "\n" not in text and len(text) < 300, text


@pytest.mark.parametrize("bad, problem", [(12.7, "of type float"), (-1, "outside [0,"), (2**64, "outside [0,"),
                                          ("7", "of type str")])
def test_paillier_batch_seed_of_the_guest(keys, bad, problem):
    """A float seed was truncated silently (a run on another batch schedule, exit 0): now refused."""
    with pytest.raises(ProtocolError) as exc:
        _paillier(keys, {"src": "guest", "tag": "batch_seed"}, replace=lambda _: bad)
    _one_line(exc, "'guest' sent 'batch_seed'", problem)


def test_paillier_batch_loss_of_more_than_one_ciphertext(keys):
    from ppml.crypto.paillier import EncryptedVector

    def doubled(v):
        return EncryptedVector(v.public_key, list(v.ciphertexts) * 2, v.frac_bits)

    with pytest.raises(ProtocolError) as exc:
        _paillier(keys, {"src": "guest", "tag": "batch_loss"}, replace=doubled)
    _one_line(exc, "'guest' sent 'batch_loss'", "of shape (2,), expected (1,)")


@pytest.mark.parametrize("how", sorted(PROBLEMS))
def test_paillier_coordinator_steps(keys, how):
    with pytest.raises(ProtocolError) as exc:
        _paillier(keys, {"src": "arbiter", "tag": "host_step", "how": how}, update_at="coordinator")
    assert_names(exc, sender="arbiter", tag="host_step", how=how)


@pytest.mark.parametrize("bad, problem", [(lambda m: m[:-1], "expected a list of"),
                                          (lambda m: [float(x) for x in m], "expected a list of"),
                                          (lambda m: [10**400] + m[1:], "beyond the key's modulus")])
def test_paillier_decrypted_masked_sums(keys, bad, problem):
    with pytest.raises(ProtocolError) as exc:
        _paillier(keys, {"src": "arbiter", "tag": "guest_gradient_decrypted"}, replace=bad)
    _one_line(exc, "'arbiter' sent 'guest_gradient_decrypted'", problem)


def test_paillier_verdict_of_the_coordinator(keys):
    with pytest.raises(ProtocolError) as exc:
        _paillier(keys, {"src": "arbiter", "tag": "converged"}, replace=lambda _: "yes")
    _one_line(exc, "'arbiter' sent 'converged'", "expected a boolean")


@pytest.mark.parametrize("field, how", [("train", "short"), ("train", "nan"), ("test", "shape"),
                                        ("sqnorm", "type")])
def test_paillier_evaluation_scores_of_the_host(keys, field, how):
    from ppml.algorithms._hetero_lr import TAG_EVAL

    with pytest.raises(ProtocolError) as exc:
        _paillier(keys, {"src": "host", "tag": TAG_EVAL, "how": how, "field": field})
    text = str(exc.value)
    assert text.startswith(f"'host' sent {TAG_EVAL!r} with {field!r}"), text


def test_paillier_sqn_sample_rows_of_the_guest(keys):
    from ppml.algorithms import paillier_sqn
    from tests.algorithms.test_paillier_sgd import BITS

    p = paillier_sqn.Params(batch_size=30, key_bits=BITS, eta=0.5, lam=0.05, max_epochs=2, tol=1e-12, L=1,
                            S_H=20)
    with pytest.raises(ProtocolError) as exc:
        _paillier(keys, {"src": "guest", "tag": "hessian_rows"}, module=paillier_sqn, p=p,
                  replace=lambda rows: np.append(rows[:-1], 10**6))
    _one_line(exc, "'guest' sent 'hessian_rows'", "outside [0, 59]")
