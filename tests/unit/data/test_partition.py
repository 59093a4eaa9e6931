"""Dealing data out: column blocks, each party's own table, stratified and horizontal splits."""

import numpy as np
import pytest

from ppml.data.partition import Table, column_blocks, deal_rows, stratified_test_mask, vertical_holdings


def make_table(n=1000, d=10):
    g = np.random.default_rng(0)
    return Table(ids=np.array([f"e{k:05d}" for k in range(n)]), X=g.normal(size=(n, d)),
                 columns=tuple(f"c{j}" for j in range(d)), y=(g.random(n) < 0.3).astype(np.int8))


@pytest.mark.parametrize("split, total", [([66, 57], 123), ([2000, 2000, 1000], 5000), ([13, 10], 23),
                                          ([5, 5], 10), ([167, 167, 166], 500)])
def test_column_blocks_cover_the_columns_in_order(split, total):
    blocks = column_blocks(split, total)
    assert [b.stop - b.start for b in blocks] == split
    assert blocks[0].start == 0 and blocks[-1].stop == total
    assert all(a.stop == b.start for a, b in zip(blocks, blocks[1:]))


def test_column_blocks_refuse_a_split_that_does_not_fit():
    with pytest.raises(ValueError, match=r"adds up to 122, but the data has 123 columns"):
        column_blocks([66, 56], 123)
    with pytest.raises(ValueError, match="block without columns"):
        column_blocks([123, 0], 123)


def test_each_party_holds_its_own_order_and_private_ids():
    table = make_table()
    parties = ["party1", "party2", "party3"]
    holdings = vertical_holdings(table, parties=parties, split=[4, 3, 3], private_fraction=0.02,
                                 rng=np.random.default_rng(1))
    held = [set(h.ids) for h in holdings]
    shared = set.intersection(*held)
    private = [h - set.union(*(o for o in held if o is not h)) for h in held]
    assert [len(p) for p in private] == [20, 20, 20]
    assert len(shared) == 1000 - 60
    assert all(len(h) == 1000 - 40 for h in held)  # every party lacks the others' private ids
    for h in holdings:
        assert np.array_equal(table.ids[h.rows], h.ids)
        assert len(set(h.ids)) == len(h.ids)
    assert [(h.columns.start, h.columns.stop) for h in holdings] == [(0, 4), (4, 7), (7, 10)]
    assert not np.array_equal(holdings[0].ids[:50], holdings[1].ids[:50])  # own row orders


def test_holdings_are_seeded():
    table = make_table()
    a, b = (vertical_holdings(table, parties=["a", "b"], split=[5, 5], private_fraction=0.01,
                              rng=np.random.default_rng(9)) for _ in range(2))
    assert all(np.array_equal(x.ids, y.ids) for x, y in zip(a, b))


def test_without_private_ids_every_party_holds_every_entity():
    table = make_table(n=50)
    holdings = vertical_holdings(table, parties=["a", "b"], split=[5, 5], private_fraction=0.0,
                                 rng=np.random.default_rng(2))
    assert all(set(h.ids) == set(table.ids) for h in holdings)


def test_private_fraction_must_leave_shared_entities():
    with pytest.raises(ValueError, match="leaves no entity shared"):
        vertical_holdings(make_table(), parties=["a", "b"], split=[5, 5], private_fraction=0.5,
                          rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="2 parties but 3 column blocks"):
        vertical_holdings(make_table(), parties=["a", "b"], split=[4, 3, 3], private_fraction=0.0,
                          rng=np.random.default_rng(0))


def test_stratified_split_keeps_class_proportions():
    y = np.r_[np.zeros(777, np.int8), np.ones(223, np.int8)]
    test = stratified_test_mask(y, test_fraction=0.2, rng=np.random.default_rng(3))
    assert test.sum() == round(0.2 * 777) + round(0.2 * 223)
    assert y[test].sum() == round(0.2 * 223)
    again = stratified_test_mask(y, test_fraction=0.2, rng=np.random.default_rng(3))
    assert np.array_equal(test, again)
    with pytest.raises(ValueError, match="test_fraction must be in"):
        stratified_test_mask(y, test_fraction=1.0, rng=np.random.default_rng(3))


def test_deal_rows_gives_equal_disjoint_shares_and_the_rest_for_testing():
    agents, test = deal_rows(45222, train_rows=35000, agents=5, rng=np.random.default_rng(4))
    assert [len(a) for a in agents] == [7000] * 5
    everything = np.concatenate(agents + [test])
    assert np.array_equal(np.sort(everything), np.arange(45222))
    assert len(test) == 10222 and np.all(np.diff(test) > 0)
    uneven, _ = deal_rows(20, train_rows=12, agents=5, rng=np.random.default_rng(4))
    assert [len(a) for a in uneven] == [3, 3, 2, 2, 2]
    with pytest.raises(ValueError, match="train_rows must be"):
        deal_rows(100, train_rows=100, agents=5, rng=np.random.default_rng(4))


def test_table_checks_its_shapes():
    with pytest.raises(ValueError, match="3 columns, but 2 column names"):
        Table(ids=np.array(["a"]), X=np.zeros((1, 3)), columns=("x", "y"), y=np.zeros(1, np.int8))
    with pytest.raises(ValueError, match="party blocks"):
        Table(ids=np.array(["a"]), X=np.zeros((1, 3)), columns=("x", "y", "z"), y=np.zeros(1, np.int8),
              blocks=(1, 1))
