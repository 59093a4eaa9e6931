"""Entity alignment by id: private set intersection and plain join against the true shared ids."""

import numpy as np
import pytest

from ppml.data.align import AlignmentError, _own_rows, align
from ppml.network import Network


def ids(numbers):
    return np.array([f"id{k:04d}" for k in numbers])


def check_alignment(result, tables):
    """Every party's rows hold exactly the canonical ids, and the ids are sorted."""
    assert np.array_equal(result.ids, np.sort(result.ids))
    for name, own in tables.items():
        assert np.array_equal(own[result.rows[name]], result.ids)


rng = np.random.default_rng(7)
ORDERS = {
    "same order": (ids(range(100)), ids(range(40, 160))),
    "reversed": (ids(range(100)), ids(range(159, 39, -1))),
    "shuffled": (ids(rng.permutation(100)), ids(rng.permutation(np.arange(40, 160)))),
    "subset": (ids(rng.permutation(100)), ids(range(10, 20))),
    "disjoint blocks": (ids(range(50)), ids(range(50, 100))),
    "one side empty": (ids(range(50)), ids([])),
}


@pytest.mark.parametrize("method", ["psi", "plain"])
@pytest.mark.parametrize("case", sorted(ORDERS))
def test_intersection_is_the_true_shared_ids(method, case):
    holder, other = ORDERS[case]
    tables = {"guest": holder, "host": other}
    result = align(tables, label_holder="guest", method=method)
    assert set(result.ids) == set(holder) & set(other)
    check_alignment(result, tables)


def test_psi_and_plain_agree_and_holder_need_not_come_first():
    g = np.random.default_rng(3)
    tables = {"host": ids(g.choice(400, 250, replace=False)), "guest": ids(g.choice(400, 300, replace=False))}
    psi = align(tables, label_holder="guest", method="psi")
    plain = align(tables, label_holder="guest", method="plain")
    assert np.array_equal(psi.ids, plain.ids)
    for name in tables:
        assert np.array_equal(psi.rows[name], plain.rows[name])
    assert list(psi.rows) == ["host", "guest"]


@pytest.mark.parametrize("method", ["psi", "plain"])
def test_three_parties_share_only_what_all_hold(method):
    g = np.random.default_rng(11)
    tables = {"party1": ids(g.permutation(np.arange(0, 120))),
              "party2": ids(g.permutation(np.arange(30, 150))),
              "party3": ids(g.permutation(np.r_[0:10, 50:200]))}
    result = align(tables, label_holder="party2", method=method)
    assert set(result.ids) == set(tables["party1"]) & set(tables["party2"]) & set(tables["party3"])
    assert len(result.ids) == 70
    check_alignment(result, tables)


@pytest.mark.parametrize("method", ["psi", "plain"])
@pytest.mark.parametrize("who", ["guest", "host"])
def test_duplicate_ids_are_an_error_naming_party_and_id(method, who):
    tables = {"guest": ids(range(10)), "host": ids(range(5, 15))}
    tables[who] = np.append(tables[who], tables[who][3])
    with pytest.raises(AlignmentError, match=rf"party '{who}' holds id '{tables[who][3]}' 2 times"):
        align(tables, label_holder="guest", method=method)


def test_psi_traffic_goes_through_the_network_and_hides_the_other_sides_ids():
    holder, other = ids(range(0, 60)), ids(range(30, 120))
    net = Network(["guest", "host"], capture=True)
    result = align({"guest": holder, "host": other}, label_holder="guest", method="psi", network=net)
    tags = [(m.src, m.dst, m.tag) for m in net.messages]
    assert tags == [("guest", "host", "psi_request"), ("host", "guest", "psi_setup"),
                    ("host", "guest", "psi_response"), ("guest", "host", "aligned_ids")]
    # Only the shared ids ever cross in the clear, and only from the label holder to the other party.
    sent = b"".join(m.payload if isinstance(m.payload, bytes) else "".join(m.payload).encode()
                    for m in net.messages)
    for private in set(other) - set(result.ids):
        assert private.encode() not in sent
    for private in set(holder) - set(result.ids):
        assert private.encode() not in sent


def test_plain_mode_does_reveal_the_ids():
    # The counterpart of the test above: the check it makes does catch ids sent in the clear.
    net = Network(["guest", "host"], capture=True)
    align({"guest": ids(range(5)), "host": ids(range(3, 9))}, label_holder="guest", method="plain",
          network=net)
    assert "id0008" in net.messages[0].payload


def test_message_sizes_are_the_same_on_every_run():
    tables = {"guest": ids(range(80)), "host": ids(range(50, 90))}
    sizes = []
    for _ in range(2):
        net = Network(["guest", "host"])
        align(tables, label_holder="guest", network=net)
        sizes.append([m.nbytes for m in net.messages])
    assert sizes[0] == sizes[1]


def test_bad_arguments():
    tables = {"guest": ids(range(5)), "host": ids(range(5))}
    with pytest.raises(ValueError, match="method must be one of"):
        align(tables, label_holder="guest", method="bloom")
    with pytest.raises(ValueError, match="label holder 'arbiter'"):
        align(tables, label_holder="arbiter")
    with pytest.raises(ValueError, match="at least two parties"):
        align({"guest": ids(range(5))}, label_holder="guest")


def test_a_party_refuses_ids_it_does_not_hold():
    message = r"'host' was sent 1 aligned ids it does not hold \(first: 'id0009'\)"
    with pytest.raises(AlignmentError, match=message):
        _own_rows("host", ids([3, 1, 2]), ids([1, 9]))
    assert _own_rows("host", ids([3, 1, 2]), ids([1, 2, 3])).tolist() == [1, 2, 0]
