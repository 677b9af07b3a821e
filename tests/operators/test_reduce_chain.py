"""The chain kernel of count and distinct (`operators.reduce_chain`): it evaluates the
keys whose times form a chain below their one pending time, declines the others,
and agrees with the general replay at every time."""

from __future__ import annotations

import random

from hypothesis import given, settings, strategies as st

import ddflow
from ddflow import columnar
from lattice import Product
from operators.reduce import count_logic, distinct_logic, sum_logic
from operators.reduce_chain import chain_corrections, supports


def test_chain_and_declined_keys():
    stored = {1: [((), 0, 2), ((), 1, -1)], 2: [((), 0, 1), ((), 5, 1)], 3: [(7, 0, 1)]}
    outs = {1: [(2, 0, 1)]}
    made: list = []
    declined, work = chain_corrections([(1, 2), (2, 2), (3, 2)], lambda k: stored[k],
                                       lambda k: outs.get(k, []), count_logic, made)
    assert made == [((1, 1), 2, 1), ((1, 2), 2, -1)]
    assert declined == [(2, 2), (3, 2)]          # a later stored time; a value not ()
    assert work == 6
    made = []
    declined, _ = chain_corrections([(1, Product(1, 1))], lambda k: [((), Product(0, 1), 1)],
                                    lambda k: [((), Product(1, 0), 1)], distinct_logic, made)
    assert declined == [] and made == []         # present before and after: no change
    assert supports(count_logic) and supports(distinct_logic) and not supports(sum_logic)


def _stream(seed: int, epochs: int, product: bool) -> list:
    rng = random.Random(seed)
    live: list = []
    out = []
    for e in range(epochs):
        batch = []
        for _ in range(rng.randrange(1, 30)):
            if live and rng.random() < 0.3:
                batch.append((live.pop(rng.randrange(len(live))), -1))
            else:
                rec = (rng.randrange(6), rng.randrange(4))
                live.append(rec)
                batch.append((rec, 1))
        out.append(batch)
    return out


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), epochs=st.integers(1, 8))
def test_bulk_path_agrees_with_the_row_path(seed, epochs):
    """count and distinct of a stream with deletions: the same outputs at every epoch
    with the chain kernel and columns on (threshold 0) and off."""
    answers = []
    for threshold in (None, 0):
        with columnar.columnar(threshold):
            df = ddflow.Dataflow()
            s, c = df.new_collection("xs")
            keys = c.map(lambda kv: kv[0])
            counts, distinct = keys.count().capture(), keys.distinct().capture()
            got = []
            for e, batch in enumerate(_stream(seed, epochs, False)):
                for rec, d in batch:
                    s.update(rec, d)
                s.advance_to(e + 1)
                df.run()
                got.append((counts.at(e), distinct.at(e)))
            answers.append(got)
    assert answers[0] == answers[1]


@settings(max_examples=40, deadline=None)
@given(data=st.data(), product=st.booleans(), split=st.integers(0, 3),
       encode_rows=st.booleans(), vector=st.booleans())
def test_column_reads_agree_with_key_reads(data, product, split, encode_rows, vector):
    """`chain_corrections_columns` (the traces' columnar batches read by vectorized
    kernels, the row batches encoded too or read key by key; the emitted outputs
    subtracted in numpy or key by key) makes the same corrections, declines the
    same keys and counts the same work as `chain_corrections` over `Trace.get`."""
    from ddflow.batch import Batch
    from lattice import Antichain
    from operators.reduce_chain import chain_corrections_columns, set_chain_vector

    time = st.builds(Product, st.integers(0, 2), st.integers(0, 2)) if product \
        else st.integers(0, 4)
    ins = data.draw(st.lists(st.tuples(st.tuples(st.integers(0, 5), st.just(())), time,
                                       st.integers(-2, 2)), max_size=30))
    # Outputs as count makes them (ints) or as distinct does (`()`).
    out_val = st.just(()) if data.draw(st.booleans()) else st.integers(0, 3)
    outs = data.draw(st.lists(st.tuples(st.tuples(st.integers(0, 5), out_val),
                                        time, st.integers(-2, 2)), max_size=15))
    keys = sorted(set(data.draw(st.lists(st.integers(0, 6), min_size=1, max_size=7))))
    u = data.draw(time)
    lower = Antichain([Product(0, 0)] if product else [0])
    upper = Antichain()

    class TwoBatches:
        """A columnar batch and a row batch, read as a trace is (`get`, `column_view`)."""

        def __init__(self, updates: list) -> None:
            cut = max(0, len(updates) - split)     # the last `split` updates in rows
            with columnar.columnar(0):
                self.cols = Batch.from_updates(updates[:cut], lower, upper)
            with columnar.columnar(None):
                self.rows = Batch.from_updates(updates[cut:], lower, upper)

        def get(self, key) -> list:
            return list(self.cols.get(key)) + list(self.rows.get(key))

        def column_batches(self, limit: int):
            if not encode_rows or self.rows.len > limit:
                return None        # the mixed reading: columns, then rows key by key
            parts = [b.cols if b.cols is not None else columnar.encode(b.update_list())
                     for b in (self.cols, self.rows) if b.len]
            return None if any(c is None for c in parts) else parts

        def column_view(self):
            cols = [self.cols.cols] if self.cols.cols is not None else []
            return cols, lambda key: list(self.rows.get(key))
    trace = TwoBatches
    tin, tout = trace(ins), trace(outs)
    for logic in (count_logic, distinct_logic):
        single = [(k, u) for k in keys]
        made_rows: list = []
        expected = chain_corrections(single, tin.get, tout.get, logic, made_rows)
        made_cols: list = []
        old = set_chain_vector(vector)
        try:
            got = chain_corrections_columns(single, tin, tout, logic, made_cols)
        finally:
            set_chain_vector(old)
        if got is None:
            continue
        assert sorted(got[0], key=repr) == sorted(expected[0], key=repr)
        assert got[1] == expected[1]
        assert sorted(made_cols, key=repr) == sorted(made_rows, key=repr)


def test_column_totals_past_int64_are_summed_in_python_ints():
    """Three columnar batches of one key, each diff just inside `encode`'s bound: each
    batch's sum fits int64, theirs does not.  The kernel's totals must leave int64
    (the bound read per batch) and count 3 * (2**62 - 1), as the row path does."""
    from ddflow.batch import Batch
    from lattice import Antichain
    from operators.reduce_chain import chain_corrections_columns

    d = (1 << 62) - 1
    lower, upper = Antichain([0]), Antichain()

    class Batches:
        def __init__(self, parts: list) -> None:
            with columnar.columnar(0):
                self.batches = [Batch.from_updates(p, lower, upper) for p in parts]
            assert all(b.cols is not None for b in self.batches)

        def get(self, key) -> list:
            return [e for b in self.batches for e in b.get(key)]

        def column_batches(self, _limit: int) -> list:
            return [b.cols for b in self.batches]

        def column_view(self):
            return [b.cols for b in self.batches], lambda _key: []

    tin = Batches([[((7, ()), t, d)] for t in range(3)])
    tout = Batches([])
    made_rows: list = []
    expected = chain_corrections([(7, 2)], tin.get, tout.get, count_logic, made_rows)
    made: list = []
    got = chain_corrections_columns([(7, 2)], tin, tout, count_logic, made)
    assert got is not None and got[0] == expected[0]
    assert sorted(made, key=repr) == sorted(made_rows, key=repr)
    assert ((7, 3 * d), 2, 1) in made
