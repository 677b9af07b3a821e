"""A growing dataflow driven at random: questions added after `run()`, runs, failing
runs, `discard(err)`, `drop`, more runs (issue 24).

A hypothesis state machine over one input.  Some questions fail on some records (a
map dividing by `x - 13`, a loop that never converges once a record reaches 20):
fed those records, a run fails and names them (`err.inputs`), `discard(err)` takes
them out; added when such a record is already loaded, a question fails on its import,
no input is to blame (`err.inputs == ()`), and `drop` takes it out.  An update accepted
while its time was incomplete that a question chokes on once an `advance_to`
completes it is blamed too (`err.accepted`), and `discard(err)` retracts it.  Whatever
happens, the engine raises nothing but `DataflowError`s, and after every successful
run each live question's answer equals a fresh dataflow's, built with that question
before its first run and fed the same committed updates, at every final time in
advance of the question's `since`.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import ddflow
from ddflow.engine.bsp import InProcessShards
from ddflow.engine.local import LocalEngine

ENGINES = {
    "local": LocalEngine,
    "w3": lambda: LocalEngine(workers=3),
    "bsp": lambda: InProcessShards(2),
}

POISON = (13, 21)       # what `inverse` and `spin` choke on
SAFE = ["double", "mod_count", "distinct", "sums", "pairs"]   # choke on nothing


def _spin(c, name):
    return c.iterate(lambda x: x.map(lambda y: y + 1 if y >= 20 else y).concat(x).distinct(),
                     max_rounds=8, name=name)


#: Questions by kind, each built under a name (what its errors name).
QUESTIONS = {
    "double": lambda c, n: c.map(lambda x: 2 * x),
    "mod_count": lambda c, n: c.map(lambda x: x % 3).count(),
    "distinct": lambda c, n: c.distinct(),
    "sums": lambda c, n: c.map(lambda x: (x % 2, x)).reduce(
        lambda k, vs: [(sum(v * r for v, r in vs), 1)]),
    "pairs": lambda c, n: c.map(lambda x: (x % 2, x)).join(
        c.map(lambda x: (x % 2, -x))).count(),
    "inverse": lambda c, n: c.map(lambda x: 12 // (x - 13), name=n),
    "spin": _spin,
}


class GrowingDataflow(RuleBasedStateMachine):
    make_engine = staticmethod(LocalEngine)
    #: What the examples did, summed over a test: that the rarer paths were taken.
    seen: dict = {}

    @initialize(first=st.sampled_from(SAFE))
    def build(self, first):
        self.df = ddflow.Dataflow(engine=self.make_engine())
        self.session, self.coll = self.df.new_collection("xs")
        self.live: dict = {}            # name -> (kind, capture)
        self.unrun: list = []           # questions added since the last successful run
        self.pending: list = []         # the model of the session's pending updates
        self.committed: list = []
        self.n = 0
        self.ran_at = None              # the session's time at the last successful run
        self.add(first)

    # -- rules -------------------------------------------------------------------------
    @rule(kind=st.sampled_from(sorted(QUESTIONS)))
    def add(self, kind):
        name = f"q{self.n}"
        self.n += 1
        self.live[name] = (kind, QUESTIONS[kind](self.coll, name).capture(name))
        self.unrun.append(name)

    @rule(x=st.integers(0, 5), diff=st.sampled_from([1, 1, -1]), later=st.integers(0, 2))
    def feed(self, x, diff, later):
        t = self.session.time + later
        self.session.update_at(x, t, diff)
        self.pending.append((x, t, diff))

    @rule(x=st.sampled_from(POISON))
    def poison(self, x):
        self.session.insert(x)
        self.pending.append((x, self.session.time, 1))

    @rule(by=st.integers(1, 2))
    def advance(self, by):
        self.session.advance_to(self.session.time + by)

    @rule(x=st.integers(0, 5))
    def step(self, x):
        """The common rhythm: an update, the input moved on, a run."""
        self.feed(x, 1, 0)
        self.advance(1)
        self.run()

    @rule(kind=st.sampled_from(["inverse", "spin"]), x=st.sampled_from(POISON))
    def ask_about_poison(self, kind, x):
        """A record that a question chokes on is loaded (committed while no live
        question chokes on it, or blamed and withdrawn), then the question is asked."""
        self.poison(x)
        self.advance(1)
        self.run()
        self.add(kind)
        self.advance(1)
        self.run()

    @rule(kind=st.sampled_from(["inverse", "spin"]), x=st.sampled_from(POISON))
    def ask_about_unfinished_poison(self, kind, x):
        """A record a question chokes on is accepted by a run that does not complete
        its time; the question is asked, and the run that completes the time meets
        it: blamed as accepted (`err.accepted`), retracted by `discard(err)`."""
        self.poison(x)
        self.run()
        self.add(kind)
        self.advance(1)
        self.run()

    @rule(data=st.data())
    def drop(self, data):
        if len(self.live) <= 1:
            return
        name = data.draw(st.sampled_from(sorted(self.live)), label="drop")
        self.df.drop(self.live.pop(name)[1])
        if name in self.unrun:
            self.unrun.remove(name)

    @rule()
    def run(self):
        # Each recovery withdraws an update or drops a question: progress, bounded.
        for _attempt in range(len(self.live) + len(self.pending) + 2):
            try:
                self.df.run()
            except ddflow.DataflowError as err:     # anything else fails the test
                self.recover(err)
                continue
            self.committed += self.pending
            self.pending = []
            self.unrun = []
            self.ran_at = self.session.time
            return
        raise AssertionError("recoveries did not make run() succeed")

    def recover(self, err):
        assert err.inputs is not None, err
        self.seen["blamed" if err.inputs else "question_failed"] += 1
        if err.inputs:
            gone = self.session.discard(err)
            accepted = list(err.accepted)
            retracted = []
            for entry in gone:
                _s, d, t, r = entry
                assert d in POISON, (d, err)
                if entry in accepted:           # taken by an earlier run: retracted
                    accepted.remove(entry)
                    retracted.append((d, t, -r))
                else:
                    self.pending.remove((d, t, r))
            self.pending += retracted
            self.seen["retracted"] += bool(retracted)
        else:
            # Data already held: a new question meeting what it imported.  The
            # error names the question, which goes.
            with pytest.warns(ddflow.NothingDiscardedWarning):
                self.session.discard(err)
            names = [n for n in self.live if n == err.operator]
            assert len(names) == 1, err
            name = names[0]
            assert self.live[name][0] in ("inverse", "spin"), err
            self.df.drop(self.live.pop(name)[1])
            if name in self.unrun:
                self.unrun.remove(name)
        assert self.session.pending == self.pending

    # -- the invariant ---------------------------------------------------------------------
    @invariant()
    def answers_equal_a_fresh_dataflow(self):
        if not hasattr(self, "df") or self.unrun or self.ran_at is None:
            return
        frontier = self.ran_at
        committed = [u for u in self.committed if u[1] < frontier]
        for name, (kind, cap) in self.live.items():
            since = cap.since if cap.since is not None else 0
            times = sorted({since} | {t for _d, t, _r in committed if since <= t})
            times = [t for t in times if t < frontier]
            if not times:
                continue
            fresh = ddflow.Dataflow(engine=self.make_engine())
            s, c = fresh.new_collection("xs")
            want = QUESTIONS[kind](c, name).capture()
            for d, t, r in committed:
                s.update_at(d, t, r)
            s.advance_to(frontier)
            fresh.run()
            for t in times:
                assert cap.is_final(t), (name, t)
                assert cap.at(t) == want.at(t), (name, kind, t)
                self.seen["compared"] += bool(want.at(t))
                self.seen["compared_grown"] += bool(want.at(t)) and cap.since is not None


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_a_growing_dataflow_never_poisons_and_agrees_with_a_fresh_one(engine):
    seen = dict.fromkeys(("blamed", "retracted", "question_failed", "compared",
                          "compared_grown"), 0)
    machine = type(f"GrowingDataflow_{engine}", (GrowingDataflow,),
                   {"make_engine": staticmethod(ENGINES[engine]), "seen": seen})
    from hypothesis.stateful import run_state_machine_as_test
    run_state_machine_as_test(machine, settings=settings(
        max_examples={"local": 60, "w3": 30, "bsp": 20}[engine], stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow]))
    assert all(seen.values()), seen     # every path taken: blamed, dropped, compared
