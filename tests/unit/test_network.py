import hashlib

import numpy as np
import pytest

from ppml.network import Network, ProtocolError, WireError, decode, encode, register_wire_type


def test_codec_roundtrips_plain_values():
    payload = {
        "none": None, "flag": True, "int": -(2**300) + 7, "float": -1.5e-300, "text": "δ=1e-5", "raw": b"\x00\xff",
        "vec": np.arange(6, dtype=np.float64).reshape(2, 3), "ints": np.array([1, -2], dtype=np.int32),
        "nested": [1, (2.0, "x"), {"k": np.zeros(0)}],
    }
    data, n_ct = encode(payload)
    out = decode(data)
    assert n_ct == 0
    assert out["int"] == payload["int"] and out["float"] == payload["float"] and out["text"] == payload["text"]
    assert out["none"] is None and out["flag"] is True and out["raw"] == b"\x00\xff"
    np.testing.assert_array_equal(out["vec"], payload["vec"])
    assert out["vec"].dtype == np.float64 and out["ints"].dtype == np.int32
    assert isinstance(out["nested"][1], tuple) and out["nested"][2]["k"].shape == (0,)


def test_codec_counts_ciphertexts_and_keeps_big_ints_exact():
    rng = np.random.default_rng(0)
    cts = np.array([int(rng.integers(1, 2**62)) ** 40 for _ in range(5)], dtype=object)
    data, n_ct = encode({"c": cts})
    assert n_ct == 5
    assert list(decode(data)["c"]) == list(cts)


def test_codec_rejects_unregistered_objects_and_pickle_like_arrays():
    with pytest.raises(WireError, match="cannot send"):
        encode(object())
    with pytest.raises(WireError, match="object arrays"):
        encode(np.array(["a", 1], dtype=object))
    with pytest.raises(WireError, match="dict keys"):
        encode({1: 2})


def test_registered_wire_type_roundtrips():
    class Box:
        def __init__(self, v):
            self.v = v

    register_wire_type(Box, "test.box", lambda b: {"v": b.v}, lambda d: Box(d["v"]))
    out = decode(encode([Box(3)])[0])
    assert isinstance(out[0], Box) and out[0].v == 3


def test_send_copies_payload_and_records_traffic():
    net = Network(["a", "b", "c"], capture=True)
    x = np.ones(4)
    nbytes = net.endpoint("a").send("b", "vec", x)
    x[:] = 7  # the sender's later change must not reach the receiver
    got = net.endpoint("b").recv("a", "vec")
    np.testing.assert_array_equal(got, np.ones(4))
    assert nbytes > 32
    net.next_round()
    net.endpoint("b").broadcast(["a", "c"], "ack", 1)
    summary = net.summary()
    assert summary["messages"] == 3 and summary["rounds"] == 1
    assert summary["roles"]["a"]["bytes_sent"] == nbytes
    assert summary["tags"]["ack"]["routes"] == ["b->a", "b->c"]
    assert [m.round for m in net.messages] == [0, 1, 1]
    assert net.messages[0].payload is not None


def test_fifo_order_and_errors():
    net = Network(["a", "b"])
    net.send("a", "b", "t", 1)
    net.send("a", "b", "t", 2)
    assert net.pending("b", "a", "t") == 2
    assert net.recv("b", "a", "t") == 1 and net.recv("b", "a", "t") == 2
    with pytest.raises(LookupError, match="nothing is queued"):
        net.recv("b", "a", "t")
    with pytest.raises(KeyError, match="not on this network"):
        net.send("a", "z", "t", 1)
    with pytest.raises(ValueError, match="itself"):
        net.send("a", "a", "t", 1)


def test_edges_restrict_traffic_to_neighbours():
    net = Network(["a", "b", "c"], edges=[("a", "b")])
    net.send("b", "a", "theta", np.zeros(2))
    with pytest.raises(PermissionError, match="not neighbours"):
        net.send("a", "c", "theta", np.zeros(2))


def test_encoding_is_pinned():
    # Message byte counts are committed pipeline results: the encoder's bytes must not change.
    payload = {"n": None, "t": True, "i": -(2**70), "f": 0.5, "s": "δ", "b": b"\x01", "l": [1, (2,)],
               "a": np.arange(3, dtype=np.int16), "c": np.array([0, 2**20], dtype=object),
               "z": np.zeros(2, dtype=object)}
    data, n_ct = encode(payload)
    assert (len(data), n_ct) == (305, 4)
    digest = "a16696f64c3374ddb4d6466876d3de9d26e0441e710bdcc7bfe938adeb71a372"
    assert hashlib.sha256(data).hexdigest() == digest


def test_recv_of_corrupt_bytes_raises_wire_error():
    net = Network(["a", "b"])
    net._post("a", "b", "t", encode([1.0, "x"])[0][:-1])  # a transport that lost the last byte
    with pytest.raises(WireError, match="truncated .* at byte"):
        net.recv("b", "a", "t")


# --- Network.run: every party's program at once, deterministically -----------------------------------------


def _ping_pong(rounds):
    def a(ep):
        total = 0
        for r in range(rounds):
            ep.send("b", "ping", r)
            total += ep.recv("b", "pong")
            ep.next_round()
        ep.send("b", "ctl/stop", None)
        return total

    def b(ep):
        seen = []
        while True:
            tag, value = ep.recv_first("a", ("ping", "ctl/stop"))
            if tag == "ctl/stop":
                return seen
            seen.append(value)
            ep.send("a", "pong", value * 10)
            ep.next_round()

    return a, b


def test_run_executes_role_programs_and_counts_control_apart():
    net = Network(["a", "b"])
    a, b = _ping_pong(4)
    out = net.run({"a": lambda: a(net.endpoint("a")), "b": lambda: b(net.endpoint("b"))})
    assert out == {"a": 60, "b": [0, 1, 2, 3]}
    summary = net.summary()
    assert summary["rounds"] == 4 and summary["messages"] == 8
    assert summary["control"]["messages"] == 1 and "ctl/stop" not in summary["tags"]
    assert [m.round for m in net.messages if m.tag == "ping"] == [0, 1, 2, 3]


def test_run_is_deterministic_in_message_order():
    orders = []
    for _ in range(3):
        net = Network(["a", "b"])
        a, b = _ping_pong(5)
        net.run({"b": lambda: b(net.endpoint("b")), "a": lambda: a(net.endpoint("a"))})
        orders.append([(m.src, m.tag, m.round) for m in net.messages])
    assert orders[0] == orders[1] == orders[2]


def test_recv_first_takes_the_earliest_sent_of_several_tags():
    net = Network(["a", "b"])
    net.send("a", "b", "y", 1)
    net.send("a", "b", "x", 2)
    net.send("a", "b", "y", 3)
    assert [net.recv_first("b", "a", ("x", "y")) for _ in range(3)] == [("y", 1), ("x", 2), ("y", 3)]


def test_run_reports_a_deadlock_naming_every_wait():
    net = Network(["a", "b"])
    with pytest.raises(ProtocolError, match=r"deadlock.*a waits for 'x' from 'b'.*b waits for 'y' from 'a'"):
        net.run({"a": lambda: net.recv("a", "b", "x"), "b": lambda: net.recv("b", "a", "y")})


def test_run_raises_the_failing_partys_error_and_stops_the_others():
    net = Network(["a", "b"])

    def a():
        raise ValueError("bad shard")

    with pytest.raises(ValueError, match="bad shard") as info:
        net.run({"b": lambda: net.recv("b", "a", "x"), "a": a})
    assert "party 'a'" in "".join(getattr(info.value, "__notes__", []))
