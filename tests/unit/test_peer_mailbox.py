"""A party's receiving side when its peers are other processes (ray and grpc), without them: per-pair order,
arrival order, timeouts, aborts, bounds."""

from __future__ import annotations

import threading

import pytest

from ppml.network import ProtocolError, encode
from ppml.network.peer import PeerNetwork


def _net(timeout=1.0):
    return PeerNetwork("b", ("a", "b", "c"), None, timeout)


def test_overtaken_messages_are_released_in_the_order_they_were_sent():
    net = _net()
    net.deliver("a", "t", 2, encode("third")[0])
    net.deliver("a", "u", 1, encode("second")[0])
    assert net.pending("b", "a", "t") == 0  # held back: message 0 of this pair has not arrived
    net.deliver("a", "t", 0, encode("first")[0])
    assert net.pending("b", "a", "t") == 2 and net.pending("b", "a", "u") == 1
    assert [net.recv_first("b", "a", ("t", "u")) for _ in range(3)] == [("t", "first"), ("u", "second"),
                                                                      ("t", "third")]


def test_duplicates_and_strangers_are_dropped():
    net = _net()
    net.deliver("a", "t", 0, encode(1)[0])
    net.deliver("a", "t", 0, encode(99)[0])  # a duplicate of message 0
    net.deliver("z", "t", 0, encode(5)[0])  # not a party of this run
    net.deliver("b", "t", 0, encode(6)[0])  # not from itself either
    net.deliver("a", "t", 1, encode(2)[0])
    assert [net.recv("b", "a", "t"), net.recv("b", "a", "t")] == [1, 2]


def test_recv_any_takes_messages_in_arrival_order_across_senders():
    net = _net()
    net.deliver("c", "done", 0, encode("c0")[0])
    net.deliver("a", "done", 0, encode("a0")[0])
    net.deliver("c", "done", 1, encode("c1")[0])
    got = [net.recv_any("b", ("a", "c"), ("done",)) for _ in range(3)]
    assert [(src, value) for src, _, value in got] == [("c", "c0"), ("a", "a0"), ("c", "c1")]


def test_a_wait_times_out_naming_the_party_the_message_and_the_round():
    net = _net(timeout=0.05)
    net.next_round("b")
    with pytest.raises(ProtocolError, match=r"'b' waited 0.05 s for 'share' from 'a' in its round 1"):
        net.recv("b", "a", "share")
    assert net.step == "round 1: waiting for 'share' from 'a'"


def test_a_blocked_wait_returns_when_the_message_arrives_and_abort_ends_it():
    net = _net(timeout=10)
    out = []
    waiter = threading.Thread(target=lambda: out.append(net.recv("b", "a", "t")))
    waiter.start()
    net.deliver("a", "t", 0, encode([1, 2])[0])
    waiter.join(5)
    assert out == [[1, 2]]

    def wait_and_record():
        try:
            net.recv("b", "c", "never")
        except ProtocolError as exc:
            out.append(str(exc))

    waiter = threading.Thread(target=wait_and_record)
    waiter.start()
    net.abort("party 'c' failed")
    waiter.join(5)
    assert out[-1] == "'b' stopped while waiting for 'never' from 'c': party 'c' failed"


def test_corrupt_bytes_from_a_peer_are_a_wire_error():
    from ppml.network import WireError

    net = _net()
    net.deliver("a", "t", 0, encode([1.0, "x"])[0][:-1])
    with pytest.raises(WireError, match="truncated"):
        net.recv("b", "a", "t")


# --- what a peer delivers is checked and what the mailbox holds per sender is bounded -----------------------


@pytest.mark.parametrize("tag, seq, data", [
    ("t", 0, "not bytes"),
    ("t", 0, [1, 2]),
    ("t", 0, None),
    ("t", 0, bytearray(b"N")),
    (b"t", 0, b"N"),
    ("t", "0", b"N"),
    ("t", -1, b"N"),
    ("t", True, b"N"),
    ("t", 0.0, b"N"),
])
def test_a_malformed_delivery_is_a_wire_error_naming_the_sender(tag, seq, data):
    from ppml.network import WireError

    net = _net()
    with pytest.raises(WireError, match="'a' delivered a malformed message to 'b'"):
        net.deliver("a", tag, seq, data)
    # this party's program learns of it at its next wait, instead of waiting for its timeout
    with pytest.raises(ProtocolError, match="'b' stopped while waiting for 't' from 'a': 'a' delivered a"):
        net.recv("b", "a", "t")


def test_messages_held_out_of_order_are_bounded_per_sender():
    from ppml.network.peer import HELD_MESSAGES

    net = _net()
    payload = encode(b"x" * 100)[0]
    for seq in range(1, HELD_MESSAGES):  # message 0 never comes
        net.deliver("a", "t", seq, payload)
    with pytest.raises(ProtocolError, match=rf"'b' would hold more than {HELD_MESSAGES} messages .* from 'a' "
                                            rf"\(holding {HELD_MESSAGES - 1} messages"):
        net.deliver("a", "t", HELD_MESSAGES, payload)
    assert not net._held.get("a")  # what it held is freed at once
    net.deliver("a", "t", 0, payload)  # the run is over for this party: nothing more is held
    assert net.pending("b", "a", "t") == 0
    with pytest.raises(ProtocolError, match="stopped while waiting for 't' from 'a': 'b' would hold more"):
        net.recv("b", "a", "t")


def test_a_sequence_number_too_far_ahead_is_refused_at_once():
    from ppml.network.peer import HELD_MESSAGES

    net = _net()
    with pytest.raises(ProtocolError, match=f"from 'a' .*message {HELD_MESSAGES} of .* next in order is 0"):
        net.deliver("a", "t", HELD_MESSAGES, encode(1)[0])


def test_bytes_held_are_bounded_per_sender(monkeypatch):
    from ppml.network import peer

    monkeypatch.setattr(peer, "HELD_BYTES", 10_000)
    net = _net()
    big = encode(b"x" * 3000)[0]
    for seq in range(1, 4):
        net.deliver("a", "t", seq, big)
    with pytest.raises(ProtocolError, match=r"more than 1024 messages or 10000 bytes from 'a' \(holding 3 "
                                            r"messages, 9027 bytes"):
        net.deliver("a", "t", 4, big)


def test_unreceived_messages_count_too_but_a_stream_read_as_it_arrives_never_trips(monkeypatch):
    from ppml.network import peer

    monkeypatch.setattr(peer, "HELD_MESSAGES", 8)
    net = _net()
    for seq in range(40):  # in order, each received before the next: never more than one held
        net.deliver("a", "t", seq, encode(seq)[0])
        net.deliver("c", "t", seq, encode(-seq)[0])
        assert net.recv("b", "a", "t") == seq and net.recv("b", "c", "t") == -seq
    for seq in range(40, 48):  # eight queued and not received, from each of two senders: within the bound
        net.deliver("a", "t", seq, encode(seq)[0])
        net.deliver("c", "t", seq, encode(seq)[0])
    with pytest.raises(ProtocolError, match="more than 8 messages .* from 'c'"):
        net.deliver("c", "t", 48, encode(48)[0])
