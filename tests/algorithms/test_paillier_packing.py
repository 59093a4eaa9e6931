"""Packed ciphertexts (``packing: t``): the slot arithmetic against exact integers, packed runs against the
plaintext and the unpacked runs of the same settings, slot overflows refused at their source, and the
coordinator's view of the slots it does not need.

1024-bit keys: packing needs room for 2t - 1 slots of about 175 bits, more than a 512-bit key has.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ppml.algorithms import _hetero_lr, paillier_sgd, paillier_sqn
from ppml.config import ParamError
from ppml.crypto.packing import (FACTOR_INT_BITS, VALUE_INT_BITS, Layout, SlotOverflowError, layout_for,
                                 max_slots)
from ppml.history import ConvergenceWarning
from ppml.network import ProtocolError
from ppml.parties import Party

from test_paillier_sgd import arbiter_keys, vertical

BITS = KEY_BITS = 1024  # KEY_BITS: the length of conftest.py's `keys` in this module
FRAC = 16
V = _hetero_lr.VALUE_FRAC_BITS


def layout(rows: int = 40) -> Layout:
    t = max_slots(key_bits=BITS, value_frac_bits=_hetero_lr.VALUE_FRAC_BITS, frac_bits=FRAC, rows=rows,
                  mask_bits=80)
    return layout_for(t, key_bits=BITS, value_frac_bits=_hetero_lr.VALUE_FRAC_BITS, frac_bits=FRAC, rows=rows,
                      mask_bits=80)


# -- the slot arithmetic -----------------------------------------------------------------------------------


@pytest.mark.parametrize("rows", [1, 2, 7, 40])  # fewer rows than slots, a short last group, whole groups
@pytest.mark.parametrize("scheme", ["djn", "plaintext"])
def test_packed_product_reads_the_exact_unpacked_integers(keys, scheme, rows):
    pk, sk = keys[scheme]
    lay = layout(40)
    assert lay.slots >= 2
    rng = np.random.default_rng(rows)
    u, own = rng.normal(scale=20, size=rows), rng.normal(scale=5, size=rows)
    X = rng.normal(scale=3, size=(rows, 4))
    X[0, 1] = 0.0  # a zero factor costs nothing and must still be right
    packed = pk.encrypt_encoded(lay.pack(u, frac_bits=V, party="host", what="u"), frac_bits=V)
    assert len(packed) == -(-rows // lay.slots)
    d = packed.mul(0.25, frac_bits=2).add_encoded(lay.pack(own, frac_bits=V + 2, party="guest", what="own"))
    reference = (pk.encrypt(u, frac_bits=V).mul(0.25, frac_bits=2) + own).matvec(X, frac_bits=FRAC)
    exact = [int(m) for m in sk.decrypt_encoded(reference)]
    # the same integers by Python arithmetic, as a third opinion
    ints_d = [int(a) + int(b)
              for a, b in zip(np.rint(np.ldexp(u, V)).tolist(), np.rint(np.ldexp(own, V + 2)).tolist())]
    ints_X = np.rint(np.ldexp(X, FRAC)).astype(np.int64)
    assert exact == [sum(int(ints_X[i, j]) * ints_d[i] for i in range(rows)) for j in range(4)]

    product = lay.matvec(d, X, rows=rows, frac_bits=FRAC)
    sealed, kept = lay.mask(product)
    assert kept == [0] * 4
    assert lay.read(sk.decrypt_encoded(sealed)) == exact
    sealed, kept = lay.mask(product, wanted=True)  # Hardy et al.'s masked mode: the value hidden too
    assert [m - r for m, r in zip(lay.read(sk.decrypt_encoded(sealed)), kept)] == exact


def test_masked_slots_are_fresh_and_carry_nothing(keys):
    """What the coordinator decrypts: every slot but t - 1 non-negative, below 2^B, and different each time."""
    pk, sk = keys["djn"]
    lay = layout(40)
    rng = np.random.default_rng(0)
    d = pk.encrypt_encoded(lay.pack(rng.normal(size=40), frac_bits=V, party="guest", what="d"), frac_bits=V)
    product = lay.matvec(d, rng.normal(size=(40, 3)), rows=40, frac_bits=FRAC)
    seen = []
    for _ in range(2):
        sealed, _ = lay.mask(product)
        for m in sk.decrypt_encoded(sealed):
            m = int(m)
            assert m >= 0
            slots = [(m >> (p * lay.width)) & ((1 << lay.width) - 1) for p in range(2 * lay.slots - 1)]
            assert m >> (lay.product_bits) == 0
            others = [v for p, v in enumerate(slots) if p != lay.wanted]
            assert all(v >= 1 << lay.value_bits for v in others)  # the offset keeps them non-negative
            seen.append(others)
    assert seen[0] != seen[3]  # fresh masks: the same product never decrypts to the same cross slots


@pytest.mark.parametrize("hosts", [1, 2, 3, 7])
def test_a_layout_for_more_hosts_holds_their_largest_sums(keys, hosts):
    """K hosts: [d] adds K + 1 packed values, the batch loss K products (B's over 4 [U], each host's over its
    prefix [P_k]). With every value and factor at its bound and of one sign (the largest sums there are), every
    slot of the products, the wanted one and the 2t - 2 others, stays below 2^value_bits, the bound the masks
    are offset by; the wanted slot is the exact integer."""
    pk, sk = keys["plaintext"]
    rows = 40
    sizes = dict(key_bits=BITS, value_frac_bits=V, frac_bits=FRAC, rows=rows, mask_bits=80, addends=hosts + 1,
                 products=hosts)
    lay = layout_for(max_slots(**sizes), **sizes)
    assert lay.slots >= 2
    top = -(2.0**VALUE_INT_BITS - 2.0**-V)  # the largest magnitude a party packs, negative: sums only grow
    u = [np.full(rows, top) for _ in range(hosts)]
    own = np.full(rows, top)
    X = np.full((rows, 2), 2.0**FACTOR_INT_BITS - 2.0**-FRAC)

    def packed(values, frac_bits=V):
        return pk.encrypt_encoded(lay.pack(values, frac_bits=frac_bits, party="p", what="v"), frac_bits=frac_bits)

    def slots(vector):
        return lay.split([int(m) for m in sk.decrypt_encoded(vector)], len(vector) * (2 * lay.slots - 1))

    def exact(a, fa, b, fb):
        """sum_i a_i b_i of the encodings, by Python integers."""
        return sum(int(x) * int(y) for x, y in zip(np.rint(np.ldexp(a, fa)), np.rint(np.ldexp(b, fb))))

    hosts_u = [packed(v) for v in u]
    U = hosts_u[0]
    for v in hosts_u[1:]:
        U = U + v
    d = U.mul(0.25, frac_bits=2).add_encoded(lay.pack(own, frac_bits=V + 2, party="guest", what="own"))
    gradient = lay.matvec(d, X, rows=rows, frac_bits=FRAC)
    cross = lay.matvec(U, own[:, None], rows=rows, frac_bits=FRAC)
    if hosts > 1:
        prefix, crosses = hosts_u[0], []
        for k in range(1, hosts):
            crosses.append(lay.matvec(prefix, u[k][:, None], rows=rows, frac_bits=FRAC))
            prefix = prefix + hosts_u[k]
        total = crosses[0]
        for c in crosses[1:]:
            total = total + c
        cross = cross + total.mul(0.25, frac_bits=2)
    def read(product):
        return lay.read(sk.decrypt_encoded(lay.mask(product)[0]))

    for product in (gradient, cross):
        assert max(abs(m) for m in slots(product)) < 2**lay.value_bits  # every slot, signed, before masking
    d_exact = sum(u) / 4 + own  # exact in float64: every term is a multiple of 2^-(V + 2) below 2^11
    assert read(gradient) == [exact(d_exact, V + 2, X[:, j], FRAC) for j in range(2)]
    loss = exact(sum(u), V, own, FRAC) * (4 if hosts > 1 else 1)  # B's term, at the hosts' 2 more bits
    loss += sum(exact(sum(u[:k]), V, u[k], FRAC) for k in range(1, hosts))
    assert read(cross) == [loss]


def test_split_inverts_join_for_signed_values():
    lay = layout(40)
    values = [-(1 << 60), -1, 0, 1, (1 << 60) - 1, -12345, 7]
    assert lay.split(lay.join(values), len(values)) == values


def test_a_value_beyond_its_slot_is_refused_naming_party_and_quantity():
    lay = layout(40)
    values = np.zeros(9)
    values[6] = 2.0 ** VALUE_INT_BITS
    with pytest.raises(SlotOverflowError, match=r"party 'host': u_A row 6 is 256.*slot"):
        lay.pack(values, frac_bits=V, party="host", what="u_A")
    values[6] = np.nan
    with pytest.raises(SlotOverflowError, match="row 6 is nan"):
        lay.pack(values, frac_bits=V, party="host", what="u_A")


def test_a_layout_that_does_not_fit_the_key_says_how_many_do():
    best = max_slots(key_bits=2048, value_frac_bits=52, frac_bits=16, rows=3000, mask_bits=80)
    assert best == 5
    # the protocols' value precision is what lets Table 1 pack seven rows at |S| = 3000
    assert max_slots(key_bits=2048, value_frac_bits=V, frac_bits=16, rows=3000, mask_bits=80) == 7
    layout_for(best, key_bits=2048, value_frac_bits=52, frac_bits=16, rows=3000, mask_bits=80)
    with pytest.raises(ValueError, match=f"at most {best} fit"):
        layout_for(best + 1, key_bits=2048, value_frac_bits=52, frac_bits=16, rows=3000, mask_bits=80)


# -- packed runs -------------------------------------------------------------------------------------------


def run(module, parties, p, keys, *, seed=0, capture=False):
    net = module.network_for(parties, p, rng=None, capture=capture)
    with warnings.catch_warnings(), arbiter_keys(keys):
        warnings.simplefilter("ignore", ConvergenceWarning)
        return module.fit(parties, net, p, rng=np.random.default_rng(seed)), net


def sgd(**overrides) -> paillier_sgd.Params:
    base = dict(batch_size=40, key_bits=BITS, eta=0.5, lam=0.05, max_epochs=3, tol=1e-12, frac_bits=FRAC)
    return paillier_sgd.Params(**{**base, **overrides})


def sqn(**overrides) -> paillier_sqn.Params:
    base = dict(batch_size=40, key_bits=BITS, eta=0.3, lam=0.05, max_epochs=4, tol=1e-12, L=2, M=3,
                frac_bits=FRAC)
    return paillier_sqn.Params(**{**base, **overrides})


def outcome(history) -> tuple:
    return (np.concatenate([history.extra["weights"]["host"], history.extra["weights"]["guest"]]).tolist(),
            [r["loss"] for r in history.records])


@pytest.mark.parametrize("update_at", ["parties", "coordinator"])
def test_packed_encrypted_sgd_equals_plaintext_and_unpacked_to_the_last_bit(keys, update_at):
    parties = vertical(2, n=130)  # the last batch (10 rows) is short, and not a multiple of t
    t = layout(40).slots
    packed, _ = run(paillier_sgd, parties, sgd(update_at=update_at, packing=t), keys["djn"], seed=5)
    plain, _ = run(paillier_sgd, parties, sgd(update_at=update_at, packing=t, encrypted=False),
                   keys["plaintext"], seed=5)
    unpacked, _ = run(paillier_sgd, parties, sgd(update_at=update_at), keys["djn"], seed=5)
    assert outcome(packed) == outcome(plain)
    # Slot t - 1 holds the very integers of the unpacked product: equal beyond the encoding precision.
    assert outcome(packed) == outcome(unpacked)
    assert max(abs(w) for w in outcome(packed)[0]) > 0.05


@pytest.mark.parametrize("S_H", [None, 60])
def test_packed_sqn_equals_unpacked(keys, S_H):
    parties = vertical(3, n=130)
    t = layout(60).slots
    packed, _ = run(paillier_sqn, parties, sqn(packing=t, S_H=S_H), keys["djn"], seed=2)
    unpacked, _ = run(paillier_sqn, parties, sqn(S_H=S_H), keys["djn"], seed=2)
    assert outcome(packed) == outcome(unpacked)
    assert packed.final["curvature_pairs"] > 0


@pytest.mark.parametrize("squares", ["rows", "sum"])
def test_packing_divides_the_per_row_ciphertexts(keys, squares):
    """A<->B per batch: [u_A] and [d] ceil(s/t) each packed, s each unpacked; A's squares (s or 1) and its
    penalty (1) are never packed. With C: one ciphertext per gradient entry either way."""
    parties = vertical(2, n=120)
    t = layout(40).slots
    packed, _ = run(paillier_sgd, parties, sgd(packing=t, host_squares=squares, encrypted=False), keys["plaintext"])
    unpacked, _ = run(paillier_sgd, parties, sgd(host_squares=squares, encrypted=False), keys["plaintext"])
    extra = (40 if squares == "rows" else 1) + 1
    assert packed.final["ab_ciphertexts_per_iteration"] == 2 * -(-40 // t) + extra
    assert unpacked.final["ab_ciphertexts_per_iteration"] == 2 * 40 + extra
    assert packed.final["ab_ciphertexts_per_iteration_unpacked"] == 2 * 40 + extra
    assert (packed.final["arbiter_ciphertexts_per_iteration"]
            == unpacked.final["arbiter_ciphertexts_per_iteration"])


def test_a_feature_beyond_the_factor_bound_is_a_param_error_naming_the_column(keys):
    guest, host = vertical(2, n=120)
    X = host.X.copy()
    X[3, 1] = 300.0
    host = Party(host.name, host.columns, host.ids, X, None, host.test_ids, host.X_test, None)
    with pytest.raises(ParamError, match=r"party 'host', column 'h1' has 300"):
        run(paillier_sgd, [guest, host], sgd(packing=layout(40).slots, encrypted=False), keys["plaintext"])


def test_a_diverging_score_is_refused_by_the_party_that_packs_it(keys):
    guest, host = vertical(2, n=120)
    X = host.X.copy()
    X[:, 0] = 200.0  # within the factor bound; u_A = X_A theta_A leaves the slot once theta moves
    host = Party(host.name, host.columns, host.ids, X, None, host.test_ids, host.X_test, None)
    with pytest.raises(ProtocolError, match=r"party 'host'.*u_A = X_A theta_A row \d+ is"):
        run(paillier_sgd, [guest, host], sgd(packing=layout(40).slots, eta=5.0, encrypted=False), keys["plaintext"])


def test_packing_beyond_the_key_is_a_param_error(keys):
    with pytest.raises(ParamError, match=r"packing.*at most \d+ fit"):
        run(paillier_sgd, vertical(2, n=120), sgd(packing=40, encrypted=False), keys["plaintext"])


def test_a_short_packed_vector_is_named_after_its_sender(keys):
    parties = vertical(2, n=120)
    p = sgd(packing=layout(40).slots, encrypted=False)
    net = paillier_sgd.network_for(parties, p, rng=None)
    send = net.send

    def short(src, dst, tag, payload):
        if tag == "host_forward":
            payload = payload[:-1]
        return send(src, dst, tag, payload)

    net.send = short
    with warnings.catch_warnings(), arbiter_keys(keys["plaintext"]), \
            pytest.raises(ProtocolError, match=r"'host' sent 'host_forward' of \d+ ciphertexts, expected"):
        warnings.simplefilter("ignore", ConvergenceWarning)
        paillier_sgd.fit(parties, net, p, rng=np.random.default_rng(0))


def test_products_shared_with_the_background_process_give_the_same_model(keys):
    """precompute_workers: 1 computes half of each product (half of its ciphertexts or of its columns) in the
    party's background process: the same ciphertexts, so the same model as everything in line."""
    parties = vertical(4, n=120)
    t = layout(40).slots
    shared, _ = run(paillier_sgd, parties, sgd(packing=t, precompute_workers=1, max_epochs=2), keys["djn"], seed=1)
    inline, _ = run(paillier_sgd, parties, sgd(packing=t, max_epochs=2), keys["djn"], seed=1)
    assert outcome(shared) == outcome(inline)
