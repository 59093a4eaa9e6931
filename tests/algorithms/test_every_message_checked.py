"""Every message of every protocol is declared in its module's tables and checked where it arrives.

The MESSAGES and SIDE_MESSAGES tables atop each algorithm module, run as a specification: a short honest run of
each protocol (every variant whose flow differs) records every (sender, tag) it sends; each tag must be one the
module declares, and a run in which that one message is replaced by a value of the wrong type must end with a
ProtocolError that names the sender and the tag, raised where the message arrives (never a traceback deep in
the receiver, never a run that completes on it). Control messages that carry nothing (``None``) are sent as a
str. The same runs as :mod:`test_payload_checks`, which checks shapes, NaNs and ranges message by message.
"""

from __future__ import annotations

import warnings
from typing import Callable

import numpy as np
import pytest

from ppml.algorithms import (admm_sharing, centralized, decentralized_admm, dvp, fdml, ipp_admm, local, m_admm,
                             make_network, paillier_sgd, paillier_sqn, pp_admm, r_admm)
from ppml.config import build
from ppml.history import ConvergenceWarning
from ppml.network import Network, ProtocolError, WireError

from horizontal_data import horizontal
from test_paillier_sgd import BITS, arbiter_keys, vertical
from test_payload_checks import _vertical
from vertical_data import hosts_of

BAD = "not what the protocol sends"


def _declared(module, variant: str | None = None) -> set[str]:
    tables = [getattr(module, "SIDE_MESSAGES", ())]
    tables.append(module.MESSAGES_BY_VARIANT[variant] if variant else module.MESSAGES)
    return {m["tag"] for table in tables for m in table}


def _paillier(module, *, hosts: int = 1, **values) -> Callable:
    """A short run of a Paillier protocol; `hosts` > 1 deals the host's three columns to that many hosts."""
    def run(hook, keys):
        parties = vertical(3, n=60, n_test=20)
        if hosts > 1:
            parties = hosts_of(parties, (1, 2) if hosts == 2 else (1, 1, 1))
        p = module.Params(batch_size=30, key_bits=BITS, eta=0.5, lam=0.05, max_epochs=2, tol=1e-12, **values)
        network = module.network_for(parties, p, rng=None)
        hook(network)
        with arbiter_keys(keys["djn"]):
            return module.fit(parties, network, p, rng=np.random.default_rng(0))
    return run


def _fdml(variant: str) -> Callable:
    def run(hook, _):
        parties = _vertical(n=48, n_test=16, widths=(3, 2, 2))
        params = build(fdml.Params, {"epochs": 2, "batch_size": 16, "variant": variant}, "experiments.test")
        network = make_network(fdml, parties, params, rng=None)
        hook(network)
        return fdml.fit(parties, network, params, rng=np.random.default_rng(2))
    return run


def _admm_sharing(hook, _):
    parties = _vertical()
    network = Network([p.name for p in parties])
    hook(network)
    return admm_sharing.fit(parties, network, admm_sharing.Params(max_epochs=4), rng=np.random.default_rng(1))


AGENTS = horizontal(np.random.default_rng(5), agents=4, n=40, d=4, n_test=40)


def _decentralized(module) -> Callable:
    def run(hook, _):
        parties, evaluator = AGENTS
        params = module.Params(lam=0.05, agents=len(parties), T=4)
        rng = np.random.default_rng(0)
        network = module.network_for(parties, params, rng=rng)
        hook(network)
        return module.fit(parties, network, params, rng=rng, evaluation=evaluator)
    return run


def _local(hook, _):
    parties, evaluator = AGENTS
    params = centralized.Params(lam=1e-2)
    network = local.network_for(parties, params)
    hook(network)
    return local.fit(parties, network, params, rng=np.random.default_rng(0), evaluation=evaluator)


PROTOCOLS = {
    "paillier_sgd (masked)": (paillier_sgd, None, _paillier(paillier_sgd)),
    "paillier_sgd (coordinator)": (paillier_sgd, None, _paillier(paillier_sgd, update_at="coordinator")),
    "paillier_sqn (sampled S_H)": (paillier_sqn, None, _paillier(paillier_sqn, L=1, S_H=20)),
    "paillier_sgd (two hosts, masked)": (paillier_sgd, None, _paillier(paillier_sgd, hosts=2)),
    "paillier_sgd (three hosts, coordinator)": (paillier_sgd, None,
                                                _paillier(paillier_sgd, hosts=3, update_at="coordinator")),
    "paillier_sqn (two hosts, sampled S_H)": (paillier_sqn, None, _paillier(paillier_sqn, hosts=2, L=1, S_H=20)),
    "fdml paper": (fdml, "paper", _fdml("paper")),
    "fdml label_private": (fdml, "label_private", _fdml("label_private")),
    "fdml staleness_bounded": (fdml, "staleness_bounded", _fdml("staleness_bounded")),
    "admm_sharing": (admm_sharing, None, _admm_sharing),
    **{m.__name__.rsplit(".", 1)[1]: (m, None, _decentralized(m))
       for m in (decentralized_admm, pp_admm, ipp_admm, dvp, m_admm, r_admm)},
    "local": (local, None, _local),
}


def _sent(run, keys) -> list[tuple[str, str]]:
    seen: dict[tuple[str, str], None] = {}

    def hook(network):
        send = network.send

        def recording(src, dst, tag, payload):
            seen[(src, tag)] = None
            return send(src, dst, tag, payload)

        network.send = recording

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        run(hook, keys)
    return list(seen)


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_every_message_is_declared_and_refused_when_malformed_naming_its_sender(name, keys):
    module, variant, run = PROTOCOLS[name]
    sent = _sent(run, keys)
    assert sent, "the honest run sent nothing"
    undeclared = sorted({tag for _, tag in sent} - _declared(module, variant))
    assert not undeclared, f"{name} sends tags its tables do not declare: {undeclared}"
    unchecked = []
    for src, tag in sent:
        done: list[int] = []

        def hook(network, src=src, tag=tag, done=done):
            send = network.send

            def tampered(s, dst, t, payload):
                if s == src and t == tag and not done:
                    done.append(1)
                    payload = BAD
                return send(s, dst, t, payload)

            network.send = tampered

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                run(hook, keys)
            unchecked.append(f"{src} {tag}: the run completed")
        except (ProtocolError, WireError) as exc:
            text = str(exc).splitlines()[0]
            if not (repr(src) in text and repr(tag) in text):
                # a key the coordinator sends is named by its receiver's refusal: 'host refused the public key
                # from 'arbiter'' names both the message and its sender
                if not (tag == "public_key" and f"the public key from {src!r}" in text):
                    unchecked.append(f"{src} {tag}: {text[:160]}")
            assert len(text) < 400, text
        except Exception as exc:  # noqa: BLE001 - what the test reports
            # admm_sharing's alignment digest: a str of another value is a mismatch of the data, named
            if not (tag == admm_sharing.TAG_ALIGNED and repr(src) in str(exc)):
                unchecked.append(f"{src} {tag}: {type(exc).__name__}: {str(exc)[:160]}")
        assert done, f"{src} {tag} was not sent again"
    assert not unchecked, f"{name}: messages not checked where they arrive: {unchecked}"
