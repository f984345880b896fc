#!/usr/bin/env python3
"""Tests of the chaos run's own checks (syncbus_tools.chaos_checks) and of what its faults and
checks rest on: each must fail on the bad case it is there to catch, and pass on the good one. A
real assert or heap corruption is not the planted poison crash; a poison parked by the broker, for
another reason or after the wrong count is not syncbus's quarantine path, and fewer planted crashes
than its unsettled deliveries less its returns from consumers' queues leave some unexplained; a
parked request of the victim cluster is not the poison's, even parked the same way; a journal
without writes proves nothing, and a lease taken from a live holder, a write after its lease lapsed
or (to a target) after it was given back, or by another than the holder, is a violation; so are,
with sticky claims, a claim taken while its holder lives in its epoch, a write by its holder once
that liveness lapsed and a claim by a consumer not alive, while a status write keeps a sticky claim
and a hand-over after its holder's death is legal; a lease holder no consumer logged is a violation
too; the fault picker counts a sticky claim as held while its holder's liveness Lease lives in its
epoch; the clusters whose sync a consumer fault's victim had in progress (with sticky claims:
written to after its last status write, not those it held idle; given the trace, those it held that
got a request soon after the fault, each stored after its request) are synced again only once each
has its status stored; a convergence check that compared fewer objects than the fleet holds proves
nothing; a secret scan with a hole in its inputs (the trace, a queue read in part or held
unacknowledged, a daemon not running or a metrics page not read, a missing broker log directory, an
unreadable file) has not shown that nothing leaked; a fault kind never injected, a recovery goal
missed, one judged on fewer undisturbed faults than asked or on none, and a consumer fault whose
victim held no cluster fail the run (one whose victim held clusters idle, with no sync in progress,
does not); the scheduler goes on until each goal has its samples."""

import copy
import datetime
import json
import os
import random
import tempfile
import unittest
from types import SimpleNamespace

from syncbus_tools import chaos_checks as cc, chaos_rollout
from syncbus_tools.chaos_faults import Chaos, Fault, held_claims
from syncbus_tools.chaos_system import Daemon, logged_identity, now

VICTIM = "cluster-0007/cluster-0007"
PLANTED = (f'{{"level":"error","msg":"{cc.PLANTED_CRASH}","cluster":"{VICTIM}",'
           '"annotation":"chaos.syncbus.io/crash-consumer"}')


def rfc3339(t):
    """The unix time `t` as the trace events write it."""
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def published(confirms):
    """Trace events of publishes confirmed at the unix times `confirms` (decided just before)."""
    return [{"step": "published", "at": rfc3339(c), "decidedAt": rfc3339(c - 0.01), "durationMs": 0} for c in confirms]


def fault(kind, at, target="", identity="", **recovery):
    return SimpleNamespace(kind=kind, at=at, ended=at + 1, lingers=0.0, recovery=dict(recovery), identity=identity,
                           target=target)


def parked(message_id, cluster=VICTIM, reason="delivery_limit", by="syncbus", unsettled=6, returns=0):
    return {"cluster": cluster, "messageId": message_id, "reason": reason, "parkedBy": by,
            "unsettled": unsettled, "returnsFromConsumers": returns, "lastError": "crashed"}


class ExitsTest(unittest.TestCase):
    def test_planted_aborts_are_explained(self):
        log = "\n".join([PLANTED, "other line", PLANTED])
        self.assertEqual(cc.planted_crashes(log, VICTIM), 2)
        check = cc.explain_exits({"consumer-1": ("consumer", ["signal SIGABRT", "signal SIGABRT"])},
                                 {"consumer-1": 2})
        self.assertTrue(check.ok, check.problems)

    def test_an_abort_without_its_planted_line_is_not(self):
        # An assert or heap corruption aborts too, but logs no planted crash.
        check = cc.explain_exits({"consumer-1": ("consumer", ["signal SIGABRT", "signal SIGABRT"])},
                                 {"consumer-1": 1})
        self.assertFalse(check.ok)
        self.assertIn("consumer-1: 2 SIGABRT, 1 of them the planted poison crash", check.problems)

    def test_a_publisher_abort_or_another_exit_is_not(self):
        check = cc.explain_exits({"publisher-1": ("publisher", ["signal SIGABRT"]),
                                  "consumer-2": ("consumer", ["exit 1"])}, {"consumer-2": 3})
        self.assertFalse(check.ok)
        self.assertEqual(len(check.problems), 2)

    def test_a_planted_line_of_another_cluster_does_not_count(self):
        self.assertEqual(cc.planted_crashes(PLANTED, "cluster-0008/cluster-0008"), 0)


class PoisonTest(unittest.TestCase):
    def test_a_request_whose_consumer_died_before_flushing_its_park_is_on_its_way_no_more(self):
        # fresh28 (RabbitMQ 4.0): consumer-2 parked request r3 and aborted before its trace events
        # went out; the trace's last word on r3 stayed "delivered", and the episode waited 300 s.
        def at(t):
            return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        actor = "syncbus-consumer/consumer-2-7f3a"
        events = [{"at": at(1000), "request": "r1", "step": "published"},
                  {"at": at(1001), "request": "r1", "step": "settled", "outcome": "dead-lettered"},
                  {"at": at(1002), "request": "r3", "step": "published"},
                  {"at": at(1005), "request": "r3", "step": "delivered", "actor": actor}]
        crashed = [("consumer-2", 1005.5)]
        self.assertEqual(cc.on_their_way(events, 999, crashed, 1006, quiet=40), ["r3"])
        self.assertEqual(cc.on_their_way(events, 999, crashed, 1046, quiet=40), [])
        # Not while consumers still crash (a copy given back may be running), nor when the consumer
        # that took it lives (in flight), nor for one waiting in a delay tier.
        self.assertEqual(cc.on_their_way(events, 999, crashed + [("consumer-1", 1030)], 1046, 40), ["r3"])
        self.assertEqual(cc.on_their_way(events, 999, [("consumer-1", 1005.5)], 1046, 40), ["r3"])
        retried = events + [{"at": at(1006), "request": "r3", "step": "settled", "outcome": "retry"}]
        self.assertEqual(cc.on_their_way(retried, 999, crashed, 1100, 40), ["r3"])
        # Requests seen only before `since` are another episode's.
        self.assertEqual(cc.on_their_way(events, 1010, [], 1006, 40), [])

    def test_parked_by_syncbus_after_the_limit(self):
        check = cc.judge_poison([parked("m1")], VICTIM, crashes=6, delivery_limit=5)
        self.assertTrue(check.ok, check.problems)

    def test_parked_by_the_broker(self):
        check = cc.judge_poison([parked("m1", by="broker")], VICTIM, crashes=6, delivery_limit=5)
        self.assertFalse(check.ok)

    def test_parked_for_another_reason(self):
        check = cc.judge_poison([parked("m1", reason="max-attempts")], VICTIM, crashes=6, delivery_limit=5)
        self.assertFalse(check.ok)

    def test_wrong_count(self):
        self.assertFalse(cc.judge_poison([parked("m1", unsettled=3)], VICTIM, 6, 5).ok)
        self.assertFalse(cc.judge_poison([parked("m1")], VICTIM, crashes=2, delivery_limit=5).ok)
        # No return from a consumer's queue (per-sync claims): one crash per unsettled delivery.
        self.assertFalse(cc.judge_poison([parked("m1")], VICTIM, crashes=5, delivery_limit=5).ok)
        self.assertFalse(cc.judge_poison([parked("m1")], VICTIM, crashes=13, delivery_limit=5).ok)
        self.assertTrue(cc.judge_poison([parked("m1"), parked("m2")], VICTIM, 12, 5).ok)
        # fresh23 (RabbitMQ 3.10, per-sync claims): 6 + 6 deliveries from 11 crashes, one of which
        # took both copies (one waiting for the other's run in the same process).
        self.assertTrue(cc.judge_poison([parked("m1"), parked("m2")], VICTIM, 11, 5).ok)
        # Each copy's own deliveries still need a crash each.
        self.assertFalse(cc.judge_poison([parked("m1"), parked("m2")], VICTIM, 5, 5).ok)

    def test_sticky_claims_a_return_from_a_holders_queue_covers_a_delivery(self):
        # Parked after 6 unsettled deliveries, one of them a return of a forward whose holder a
        # fault killed: 5 planted crashes account for the rest, ...
        self.assertTrue(cc.judge_poison([parked("m1", returns=1)], VICTIM, crashes=5, delivery_limit=5).ok)
        # ... or 6, when the holder that died was one of them.
        self.assertTrue(cc.judge_poison([parked("m1", returns=1)], VICTIM, crashes=6, delivery_limit=5).ok)
        # Returns counted per request: 6 + 6 deliveries, one return, 6 crashes at least (m2's).
        two = [parked("m1", returns=1), parked("m2")]
        self.assertTrue(cc.judge_poison(two, VICTIM, crashes=11, delivery_limit=5).ok)
        self.assertTrue(cc.judge_poison(two, VICTIM, crashes=6, delivery_limit=5).ok)

    def test_sticky_claims_too_few_crashes_for_the_returns(self):
        check = cc.judge_poison([parked("m1", returns=1)], VICTIM, crashes=4, delivery_limit=5)
        self.assertFalse(check.ok)
        self.assertIn("4 planted consumer crashes for 1 parked request(s): expected 5 to 6", check.problems)
        self.assertFalse(cc.judge_poison([parked("m1", returns=1)], VICTIM, crashes=1, delivery_limit=5).ok)
        two = [parked("m1", returns=1), parked("m2")]
        self.assertFalse(cc.judge_poison(two, VICTIM, crashes=5, delivery_limit=5).ok)
        self.assertFalse(cc.judge_poison([parked("m1", unsettled=5, returns=1)], VICTIM, 4, 5).ok)

    def test_nothing_parked(self):
        self.assertFalse(cc.judge_poison([parked("m1", cluster="other/other")], VICTIM, 6, 5).ok)


class DeadLettersTest(unittest.TestCase):
    def test_empty_or_the_poison(self):
        self.assertTrue(cc.explain_dead_letters([], {"m1"}).ok)
        self.assertTrue(cc.explain_dead_letters([parked("m1")], {"m1"}).ok)

    def test_another_request_of_the_victim_cluster(self):
        check = cc.explain_dead_letters([parked("m2", reason="max-attempts")], {"m1"})
        self.assertFalse(check.ok)

    def test_the_poison_request_parked_otherwise(self):
        self.assertFalse(cc.explain_dead_letters([parked("m1", by="broker")], {"m1"}).ok)

    def test_a_request_of_the_victim_parked_the_same_way_is_not_the_poisons(self):
        # Same cluster, same reason, parked by syncbus: only the message id tells it from the poison.
        check = cc.explain_dead_letters([parked("m1"), parked("m2")], {"m1"})
        self.assertFalse(check.ok)
        self.assertEqual(len(check.problems), 1)
        self.assertIn("request m2", check.problems[0])


class JournalTest(unittest.TestCase):
    def journal(self, entries):
        f = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
        with f:
            for e in entries:
                f.write(json.dumps(e) + "\n")
        self.addCleanup(os.unlink, f.name)
        return f.name

    @staticmethod
    def lease(t, cluster, holder, seconds=20, renewed=None):
        """The journal line of a consumer writing its claim on cluster `cluster`'s
        ClusterSyncLease (a fleet cluster's namespace is its name), renewed at `renewed` (Unix
        ms; the journal time when None)."""
        return {"t": t, "cluster": "hub", "resource": "clustersyncleases", "namespace": cluster,
                "name": cluster, "holder": holder, "leaseDurationSeconds": seconds,
                "renewTime": None if renewed is None else rfc3339(renewed / 1000.0), "verb": "update",
                "userAgent": f"syncbus-consumer/{holder}"}

    @staticmethod
    def status(t, cluster, who):
        """A consumer storing cluster `cluster`'s ClusterSync status: a sync's last write."""
        return {"t": t, "cluster": "hub", "resource": "clustersyncs", "namespace": cluster,
                "subresource": "status", "userAgent": f"syncbus-consumer/{who}", "verb": "update", "name": cluster}

    @staticmethod
    def target(t, cluster, who):
        return {"t": t, "cluster": cluster, "resource": "configmaps", "userAgent": f"syncbus-consumer/{who}",
                "verb": "apply", "name": "cm"}

    @staticmethod
    def liveness(t, who, epoch, seconds=15, renewed=None, verb="update"):
        """The journal line of consumer `who` writing (or deleting) its liveness Lease in `epoch`,
        renewed at `renewed` (Unix ms; the journal time when None)."""
        return {"t": t, "cluster": "hub", "resource": "leases", "namespace": "syncbus", "name": f"live-{who}",
                "holder": who, "leaseDurationSeconds": seconds, "liveness": True, "epoch": epoch,
                "renewTime": rfc3339((t if renewed is None else renewed) / 1000.0), "verb": verb,
                "userAgent": f"syncbus-consumer/{who}"}

    @classmethod
    def sticky(cls, t, cluster, holder, epoch):
        """A sticky claim by `holder` in its liveness `epoch` on cluster `cluster`."""
        return dict(cls.lease(t, cluster, holder), claim="sticky", epoch=epoch)

    def alive(self, who, epoch, start, end, every=5000):
        """`who`'s liveness Lease in `epoch`, renewed every `every` ms from `start` until `end`."""
        return [self.liveness(t, who, epoch) for t in range(start, end, every)]

    def replay(self, entries, faults=(), work=None):
        """The entries replayed in journal order (by time), the fleet the clusters they claim; with
        the trace `work` (a WorkTimes), at a lease of 10 s."""
        clusters = sorted({e["namespace"] for e in entries if e["resource"] == "clustersyncleases"})
        return cc.analyse_journal(self.journal(sorted(entries, key=lambda e: e["t"])), faults, clusters,
                                  work=work, lease_seconds=10)

    def test_no_writes_proves_nothing(self):
        check = cc.analyse_journal(self.journal([]), [], ["c1", "c2"])
        self.assertFalse(check.ok)
        self.assertIn("journal is incomplete", check.problems[0])

    def test_writes_under_the_writers_lease(self):
        entries = []
        for i, c in enumerate(("c1", "c2")):
            t = 1000000 + i * 10
            entries += [self.lease(t, c, "w"), self.target(t + 1, c, "w"), self.status(t + 2, c, "w")]
        entries += [self.lease(1000100, "c1", "x"), self.status(1000101, "c1", "x")]   # taken after it was given back
        check = cc.analyse_journal(self.journal(entries), [], ["c1", "c2"], identities={"w", "x"})
        self.assertTrue(check.ok, check.problems)
        self.assertIn("3 hand-overs", check.detail)   # w takes c1 and c2, x takes c1

    def test_a_write_by_another_than_the_holder(self):
        entries = [self.lease(1000, "c1", "w"), self.target(1001, "c1", "x")]
        check = cc.analyse_journal(self.journal(entries), [], ["c1"])
        self.assertFalse(check.ok)
        self.assertIn("c1: target apply configmaps cm by x at 1001: lease held by w", check.problems)

    def test_a_coordination_lease_is_no_cluster_claim(self):
        # The claim lives on the cluster's ClusterSyncLease; a coordination Lease (the scheme of
        # older versions: namespace syncbus, "<namespace>.<name>") covers no write.
        entries = [dict(self.lease(1000, "c1", "w"), resource="leases", namespace="syncbus", name="c1.c1"),
                   self.status(1001, "c1", "w")]
        check = cc.analyse_journal(self.journal(entries), [], ["c1"])
        self.assertFalse(check.ok)
        self.assertIn("lease held by nobody", check.problems[0])

    def test_the_cluster_sync_made_before_the_claim_needs_none(self):
        made = {"t": 999, "cluster": "hub", "resource": "clustersyncs", "namespace": "c1", "subresource": "",
                "userAgent": "syncbus-consumer/w", "verb": "create", "name": "c1"}
        entries = [made, self.lease(1000, "c1", "w"), self.target(1001, "c1", "w"), self.status(1002, "c1", "w")]
        self.assertTrue(cc.analyse_journal(self.journal(entries), [], ["c1"]).ok)
        # Its status, though, is written under the claim only.
        unclaimed = [made, self.status(1000, "c1", "w")]
        self.assertIn("lease held by nobody", cc.analyse_journal(self.journal(unclaimed), [], ["c1"]).problems[0])

    def test_a_live_lease_taken(self):
        # x takes c1's lease 5 s into w's 20 s, before w gave it back: two holders at once.
        entries = [self.lease(1000, "c1", "w"), self.target(2000, "c1", "w"), self.lease(6000, "c1", "x"),
                   self.status(6500, "c1", "x")]
        check = cc.analyse_journal(self.journal(entries), [], ["c1"])
        self.assertFalse(check.ok)
        self.assertEqual(check.problems, ["c1: lease taken by x at 6000 while w held it (renewed 1000, 20s)"])
        # Once it lapsed (renewed at 1000, 20 s), or once w's status gave it back, it is free.
        lapsed = [self.lease(1000, "c1", "w"), self.lease(21001, "c1", "x"), self.status(21002, "c1", "x")]
        self.assertTrue(cc.analyse_journal(self.journal(lapsed), [], ["c1"]).ok)
        given_back = [self.lease(1000, "c1", "w"), self.status(2000, "c1", "w"), self.lease(3000, "c1", "x"),
                      self.status(3001, "c1", "x")]
        self.assertTrue(cc.analyse_journal(self.journal(given_back), [], ["c1"]).ok)

    def test_a_write_after_the_lease_lapsed(self):
        # Renewed at 1000 for 20 s, by the holder's clock: a write at 21001 is past it.
        entries = [self.lease(1000, "c1", "w"), self.target(21001, "c1", "w"), self.status(21002, "c1", "w")]
        check = cc.analyse_journal(self.journal(entries), [], ["c1"])
        self.assertFalse(check.ok)
        self.assertIn("c1: target apply configmaps cm by w at 21001: lease lapsed", check.problems)
        # The lease runs from its renewTime, not from when the hub stored it.
        late = [self.lease(5000, "c1", "w", renewed=1000), self.target(21500, "c1", "w")]
        self.assertIn("lease lapsed", cc.analyse_journal(self.journal(late), [], ["c1"]).problems[0])

    def test_a_target_write_after_the_lease_was_given_back(self):
        entries = [self.lease(1000, "c1", "w"), self.status(2000, "c1", "w"), self.target(3000, "c1", "w")]
        check = cc.analyse_journal(self.journal(entries), [], ["c1"])
        self.assertFalse(check.ok)
        self.assertEqual(check.problems, ["c1: target apply configmaps cm by w at 3000: lease given back"])

    def test_a_holder_no_consumer_logged(self):
        entries = [self.lease(1000, "c1", "w"), self.status(2000, "c1", "w")]
        self.assertTrue(cc.analyse_journal(self.journal(entries), [], ["c1"], identities={"w"}).ok)
        check = cc.analyse_journal(self.journal(entries), [], ["c1"], identities={"consumer-1-host-7"})
        self.assertFalse(check.ok)
        self.assertIn("lease holder(s) w are no identity a consumer logged", check.problems[0])

    def test_clusters_synced_again(self):
        # The victim w holds c1 and c2 at t=10 s (c3 it gave back); x stores c1's status 12 s
        # later, c2's 25 s later: every cluster it held is synced again after 25 s.
        entries = [self.lease(1000, "c1", "w", seconds=60), self.lease(1100, "c2", "w", seconds=60),
                   self.lease(1200, "c3", "w"), self.status(1300, "c3", "w"),
                   self.lease(15000, "c3", "x"), self.status(16000, "c3", "x"),
                   self.lease(21000, "c1", "x"), self.status(22000, "c1", "x"),
                   self.lease(34000, "c2", "x"), self.status(35000, "c2", "x")]
        victim = Fault("consumer-kill", "consumer-1", at=10.0, identity="w")
        cc.analyse_journal(self.journal(entries), [victim], ["c1", "c2", "c3"])
        self.assertEqual(victim.recovery, {"held clusters": 2, "clusters synced again": 25.0})
        # One that never had its status stored again: never recovered.
        never = Fault("consumer-kill", "consumer-1", at=10.0, identity="w")
        cc.analyse_journal(self.journal(entries[:-1]), [never], ["c1", "c2", "c3"])
        self.assertEqual(never.recovery, {"held clusters": 2, "clusters synced again": None})
        # A status stored before the fault does not count; the victim's own, after it, does (a
        # write it had sent before it froze).
        own = Fault("consumer-pause", "consumer-1", at=10.0, identity="w")
        cc.analyse_journal(self.journal(entries[:2] + [self.status(10500, "c1", "w"), self.status(11000, "c2", "w")]),
                           [own], ["c1", "c2"])
        self.assertEqual(own.recovery, {"held clusters": 2, "clusters synced again": 1.0})

    def test_a_victim_that_held_nothing_is_not_timed(self):
        entries = [self.lease(1000, "c1", "w"), self.status(1500, "c1", "w"), self.lease(3000, "c1", "x"),
                   self.status(4000, "c1", "x")]
        wrong = Fault("consumer-kill", "consumer-1", at=2.0, identity="consumer-1-host-7")   # not the holder's
        idle = Fault("consumer-kill", "consumer-1", at=2.0, identity="w")                    # gave it back
        cc.analyse_journal(self.journal(entries), [wrong, idle], ["c1"])
        self.assertEqual(wrong.recovery, {"held clusters": 0})
        self.assertEqual(idle.recovery, {"held clusters": 0})
        rows, notes = cc.recovery_table([wrong, idle], 20)
        self.assertIn("consumer-kill: clusters synced again: 2 of 2: the victim held no cluster", notes)
        check = cc.goals_met(rows, notes)
        self.assertFalse(check.ok)
        self.assertIn("consumer-kill: clusters synced again: 2 of 2: the victim held no cluster", check.problems)

    def test_one_reading_of_the_lease_scheme(self):
        # ClusterLeaseJournal is where the journal's lease writes are read: what it says a
        # consumer holds is what the checks above rest on.
        leases = cc.ClusterLeaseJournal(["c1", "c2"])
        self.assertEqual(leases.apply(self.lease(1000, "c1", "w")), "")
        self.assertEqual(leases.apply(self.lease(1000, "c2", "w")), "")
        self.assertEqual(sorted(leases.held_by("w", 1050)), ["c1", "c2"])
        self.assertEqual(leases.apply(self.status(1100, "c1", "w")), "")
        self.assertEqual(leases.held_by("w", 1150), ["c2"])
        self.assertEqual(leases.apply(dict(self.lease(1200, "c2", ""), userAgent="syncbus-consumer/w")), "")
        self.assertEqual(leases.held_by("w", 1250), [])   # an empty holder gives it back too
        self.assertEqual(leases.holders, {"w"})
        # A sticky claim is held while its holder's liveness Lease is alive in its epoch.
        self.assertEqual(leases.apply(self.liveness(2000, "w", 1)), "")
        self.assertEqual(leases.apply(self.sticky(2100, "c1", "w", 1)), "")
        self.assertEqual(leases.apply(self.status(2200, "c1", "w")), "")
        self.assertEqual(leases.held_by("w", 16999), ["c1"])
        self.assertEqual(leases.held_by("w", 17000), [])   # renewed at 2000 for 15 s

    def test_sticky_claims_survive_status_writes(self):
        # w claims c1 and c2 sticky in epoch 1 and syncs them again and again, one status write
        # each, with no claim write, while its liveness Lease is renewed: all its own.
        entries = self.alive("w", 1, 1000, 60000)
        entries += [self.sticky(1100, "c1", "w", 1), self.sticky(1200, "c2", "w", 1)]
        for t in range(2000, 58000, 4000):
            for c in ("c1", "c2"):
                entries += [self.target(t, c, "w"), self.status(t + 1, c, "w")]
        check = self.replay(entries)
        self.assertTrue(check.ok, check.problems)
        self.assertIn("2 hand-overs", check.detail)
        # The victim of a fault at 30 s held both.
        victim = Fault("consumer-kill", "consumer-1", at=30.0, identity="w")
        self.replay(entries, [victim])
        self.assertEqual(victim.recovery["held clusters"], 2)

    def test_clusters_synced_again_with_sticky_claims(self):
        # w holds c1, c2 and c3 sticky, each synced by 3 s; at 9 s it writes c2's objects again (an
        # edit): at the fault (10 s) c2's sync is in progress, c1 and c3 are held idle. w dies (its
        # liveness, renewed at 6 s, ends at 21 s); x takes c2 and stores its status at 22 s, and c1's
        # at 40 s on an edit; c3 gets none. The figure is timed on c2 only: 12 s.
        entries = self.alive("w", 1, 1000, 10000) + self.alive("x", 1, 1000, 60000)
        for i, c in enumerate(("c1", "c2", "c3")):
            entries += [self.sticky(1100 + i, c, "w", 1), self.target(2000 + i, c, "w"), self.status(3000 + i, c, "w")]
        entries += [self.target(9000, "c2", "w"),
                    self.sticky(21001, "c2", "x", 1), self.target(21002, "c2", "x"), self.status(22000, "c2", "x"),
                    self.sticky(39000, "c1", "x", 1), self.target(39001, "c1", "x"), self.status(40000, "c1", "x")]
        victim = Fault("consumer-kill", "consumer-1", at=10.0, identity="w")
        check = self.replay(entries, [victim])
        self.assertTrue(check.ok, check.problems)
        self.assertEqual(victim.recovery, {"held clusters": 3, "clusters synced again": 12.0})
        self.assertEqual(victim.in_progress, ("c2",))
        # c2 stuck (never synced again): never recovered, whatever happens to the idle ones.
        stuck = Fault("consumer-kill", "consumer-1", at=10.0, identity="w")
        self.replay([e for e in entries if e != self.status(22000, "c2", "x")], [stuck])
        self.assertEqual(stuck.recovery, {"held clusters": 3, "clusters synced again": None})
        # A fault at 5 s, all three held idle: nothing to time, which is no fault of the run's.
        idle = Fault("consumer-pause", "consumer-1", at=5.0, identity="w")
        self.replay(entries, [idle])
        self.assertEqual((idle.recovery, idle.in_progress), ({"held clusters": 3}, ()))
        rows, notes = cc.recovery_table([idle], 20)
        self.assertEqual(notes, ["consumer-pause: clusters synced again: 1 of 1: " + cc.NONE_IN_PROGRESS])
        self.assertNotIn(notes[0], cc.goals_met(rows, notes).problems)

    def test_clusters_synced_again_after_a_request_with_sticky_claims(self):
        # w holds c1..c4 sticky, all idle at the fault (10 s); its liveness ends at 21 s. With the
        # trace the figure times the held clusters that got a request within request_window (20 s
        # at a lease of 10 s): c1's decided at 12 s (w's own status at 10.5 s, before it, does not
        # count) stored by x at 30 s; c2's, whose publish the trace lost, delivered at 26 s after
        # 2 s queued, stored at 27 s. c3's requests, one before the fault and one at 35 s, past the
        # window, and c4 without one are not timed: 20 s, from the fault.
        self.assertEqual(cc.request_window("consumer-kill", 10), 20)
        entries = self.alive("w", 1, 1000, 10000) + self.alive("x", 1, 1000, 60000)
        for i, c in enumerate(("c1", "c2", "c3", "c4")):
            entries += [self.sticky(1100 + i, c, "w", 1), self.target(2000 + i, c, "w"), self.status(3000 + i, c, "w")]
        entries += [self.status(10500, "c1", "w"),
                    self.sticky(21001, "c2", "x", 1), self.target(21002, "c2", "x"), self.status(27000, "c2", "x"),
                    self.sticky(29000, "c1", "x", 1), self.target(29001, "c1", "x"), self.status(30000, "c1", "x"),
                    self.sticky(35100, "c3", "x", 1), self.target(35101, "c3", "x"), self.status(36000, "c3", "x")]
        events = [dict(published([t])[0], cluster=f"{c}/{c}") for c, t in (("c1", 12.01), ("c3", 9.01), ("c3", 35.01))]
        events.append({"step": "delivered", "at": rfc3339(26.0), "queuedMs": 2000, "cluster": "c2/c2"})
        work = cc.WorkTimes(events)
        victim = Fault("consumer-kill", "consumer-1", at=10.0, identity="w")
        check = self.replay(entries, [victim], work)
        self.assertTrue(check.ok, check.problems)
        self.assertEqual((victim.requested, victim.in_progress), (("c1", "c2"), ()))
        self.assertEqual(victim.recovery, {"held clusters": 4, "clusters synced again": 20.0})
        # c2 never stored after its request: never recovered.
        stuck = Fault("consumer-kill", "consumer-1", at=10.0, identity="w")
        self.replay([e for e in entries if e != self.status(27000, "c2", "x")], [stuck], work)
        self.assertEqual(stuck.recovery, {"held clusters": 4, "clusters synced again": None})
        # No request within the window: the syncs in progress (none here) as without the trace.
        quiet = Fault("consumer-pause", "consumer-1", at=10.0, identity="w")
        self.replay(entries, [quiet], cc.WorkTimes(events[1:3]))
        self.assertEqual((quiet.recovery, quiet.requested), ({"held clusters": 4}, ()))
        # Claims of one sync: the trace changes nothing.
        per_sync = [self.lease(1000, "c1", "w", seconds=60), self.lease(21000, "c1", "x"),
                    self.status(22000, "c1", "x")]
        one = Fault("consumer-kill", "consumer-1", at=10.0, identity="w")
        self.replay(per_sync, [one], work)
        self.assertEqual((one.recovery, one.requested), ({"held clusters": 1, "clusters synced again": 12.0}, ()))

    def test_a_sticky_holders_syncs_in_progress(self):
        # A sticky claim's holder has a cluster's sync in progress from its claim write (taken, or
        # renewTime written for a full reapply) or its write to the cluster, until its status write.
        leases = cc.ClusterLeaseJournal(["c1", "c2"])
        leases.apply(self.liveness(1000, "w", 1))
        for entry, in_progress in [(self.sticky(1100, "c1", "w", 1), ["c1"]), (self.status(1200, "c1", "w"), []),
                                   (self.target(1300, "c1", "w"), ["c1"]), (self.status(1400, "c1", "w"), []),
                                   (self.sticky(1500, "c1", "w", 1), ["c1"]), (self.status(1600, "c1", "w"), [])]:
            self.assertEqual(leases.apply(entry), "")
            self.assertEqual(leases.syncs_in_progress("w", entry["t"]), in_progress, entry)
            self.assertEqual(leases.held_by("w", entry["t"]), ["c1"])
        # A claim of one sync is in progress for as long as it is held, written to or not.
        for entry in [self.lease(2000, "c2", "w"), self.target(2100, "c2", "w"), self.status(2200, "c2", "w")]:
            leases.apply(entry)
            held = [c for c in leases.held_by("w", entry["t"]) if c == "c2"]
            self.assertEqual([c for c in leases.syncs_in_progress("w", entry["t"]) if c == "c2"], held)
            self.assertEqual(held, [] if entry["resource"] == "clustersyncs" else ["c2"])

    def test_a_write_while_another_consumers_sticky_claim_holds(self):
        entries = self.alive("w", 1, 1000, 30000) + self.alive("x", 1, 1000, 30000)
        entries += [self.sticky(1100, "c1", "w", 1), self.status(1200, "c1", "w"),
                    self.target(20000, "c1", "x"), self.status(20001, "c1", "x")]
        check = self.replay(entries)
        self.assertFalse(check.ok)
        self.assertEqual(check.problems, ["c1: target apply configmaps cm by x at 20000: lease held by w",
                                          "c1: ClusterSync update clustersyncs c1 by x at 20001: lease held by w"])

    def test_a_live_sticky_claim_taken(self):
        # w lives in epoch 1 throughout: neither a sticky claim nor one of a sync may take its
        # claim, although the claim's own renew time is long past (a sticky claim is not renewed).
        entries = self.alive("w", 1, 1000, 60000) + self.alive("x", 1, 1000, 60000)
        entries += [self.sticky(1100, "c1", "w", 1), self.status(1200, "c1", "w"),
                    self.sticky(40000, "c1", "x", 1), self.sticky(1100, "c2", "w", 1), self.status(1200, "c2", "w"),
                    self.lease(50000, "c2", "x")]
        check = self.replay(entries)
        self.assertFalse(check.ok)
        self.assertEqual(check.problems, ["c1: lease taken by x at 40000 while w held it (epoch 1, alive)",
                                          "c2: lease taken by x at 50000 while w held it (epoch 1, alive)"])

    def test_a_legal_hand_over_after_the_holders_death(self):
        # x takes w's sticky claims once w is dead in their epoch: c1 once w's liveness expired
        # (last renewed at 6000, 15 s), c2 once w's Lease was deleted; then y takes c1 from x,
        # claimed in x's epoch 1, once x lives in epoch 2 only (its Lease re-created).
        entries = self.alive("w", 1, 1000, 7000) + self.alive("x", 1, 1000, 40000) + self.alive("y", 1, 1000, 90000)
        entries += [self.sticky(1100, "c1", "w", 1), self.sticky(1200, "c2", "w", 1),
                    self.target(2000, "c1", "w"), self.status(2001, "c1", "w")]
        entries += [self.sticky(21001, "c1", "x", 1), self.target(21002, "c1", "x"), self.status(21003, "c1", "x")]
        entries[entries.index(self.liveness(6000, "w", 1))] = self.liveness(6000, "w", 1, verb="delete")
        entries += [self.sticky(6001, "c2", "x", 1), self.target(6002, "c2", "x"), self.status(6003, "c2", "x")]
        entries += self.alive("x", 2, 41000, 90000)
        entries += [self.sticky(42000, "c1", "y", 1), self.target(42001, "c1", "y"), self.status(42002, "c1", "y")]
        check = self.replay(entries)
        self.assertTrue(check.ok, check.problems)
        self.assertIn("5 hand-overs", check.detail)

    def test_a_write_after_the_holders_liveness_lapsed(self):
        # w's liveness, renewed at 1000 for 15 s, lapsed at 16000: its claim of epoch 1 no longer
        # covers its writes, nor after a renewal that came too late in the same epoch, nor in a
        # new epoch before it claims again, nor after its Lease was deleted.
        entries = [self.liveness(1000, "w", 1), self.sticky(1100, "c1", "w", 1), self.target(15999, "c1", "w"),
                   self.target(16000, "c1", "w"), self.liveness(17000, "w", 1), self.target(18000, "c1", "w")]
        check = self.replay(entries)
        self.assertFalse(check.ok)
        lapsed = "lease its holder's liveness lapsed in epoch 1"
        self.assertEqual(check.problems, [f"c1: target apply configmaps cm by w at 16000: {lapsed}",
                                          f"c1: target apply configmaps cm by w at 18000: {lapsed}"])
        moved = [self.liveness(1000, "w", 1), self.sticky(1100, "c1", "w", 1), self.liveness(5000, "w", 2),
                 self.status(6000, "c1", "w"), self.sticky(7000, "c1", "w", 2), self.status(8000, "c1", "w")]
        self.assertEqual(self.replay(moved).problems,
                         [f"c1: ClusterSync update clustersyncs c1 by w at 6000: {lapsed}"])
        deleted = [self.liveness(1000, "w", 1), self.sticky(1100, "c1", "w", 1),
                   self.liveness(2000, "w", 1, verb="delete"), self.target(3000, "c1", "w")]
        self.assertEqual(self.replay(deleted).problems, [f"c1: target apply configmaps cm by w at 3000: {lapsed}"])

    def test_a_sticky_claim_by_a_consumer_not_alive(self):
        # x never had a liveness Lease; y lives in epoch 2 but claims in epoch 1; z's lapsed.
        entries = [self.sticky(1000, "c1", "x", 1), self.liveness(1000, "y", 2), self.sticky(2000, "c2", "y", 1),
                   self.liveness(1000, "z", 1), self.sticky(16500, "c3", "z", 1)]
        check = self.replay(entries)
        self.assertFalse(check.ok)
        self.assertEqual(check.problems[:3], [
            "c1: sticky claim written by x at 1000 in epoch 1, in which it is not alive",
            "c2: sticky claim written by y at 2000 in epoch 1, in which it is not alive",
            "c3: sticky claim written by z at 16500 in epoch 1, in which it is not alive"])


class HeldClaimsTest(unittest.TestCase):
    """What the fault picker reads from the hub: who holds which cluster's claim now."""

    T = 1000.0   # now, Unix seconds

    @staticmethod
    def claim(cluster, holder, renewed, rv, **more):
        annotations = dict({"syncbus.io/holder": holder, "syncbus.io/renew-time": rfc3339(renewed),
                            "syncbus.io/lease-duration-seconds": "20"}, **more)
        return {"metadata": {"namespace": cluster, "name": cluster, "resourceVersion": str(rv),
                             "annotations": annotations}}

    @staticmethod
    def synced(cluster, rv):
        return {"metadata": {"namespace": cluster, "name": cluster, "resourceVersion": str(rv)}}

    @staticmethod
    def liveness(who, epoch, renewed):
        return {"metadata": {"name": f"live-{who}", "labels": {"syncbus.io/consumer-liveness": "true"},
                             "annotations": {"syncbus.io/epoch": str(epoch)}},
                "spec": {"holderIdentity": who, "leaseDurationSeconds": 15, "renewTime": rfc3339(renewed)}}

    def test_claims_of_one_sync(self):
        # c1 live; c2 lapsed; c3 given back by its status write (a newer ClusterSync).
        leases = [self.claim("c1", "w", self.T - 5, 10), self.claim("c2", "w", self.T - 30, 11),
                  self.claim("c3", "w", self.T - 5, 12)]
        self.assertEqual(held_claims(leases, [self.synced("c1", 9), self.synced("c3", 13)], [], self.T), {"w": ["c1"]})

    def test_a_sticky_claim_held_while_its_holder_lives_in_its_epoch(self):
        # Status writes keep a sticky claim, its renew time long past: w lives in epoch 2 (c1 and
        # c2 held, c3 was claimed in epoch 1); x's liveness expired, y's Lease is gone.
        sticky = {"syncbus.io/claim": "sticky"}
        leases = [self.claim("c1", "w", self.T - 300, 10, **sticky, **{"syncbus.io/epoch": "2"}),
                  self.claim("c2", "w", self.T - 300, 11, **sticky, **{"syncbus.io/epoch": "2"}),
                  self.claim("c3", "w", self.T - 300, 12, **sticky, **{"syncbus.io/epoch": "1"}),
                  self.claim("c4", "x", self.T - 300, 13, **sticky, **{"syncbus.io/epoch": "1"}),
                  self.claim("c5", "y", self.T - 300, 14, **sticky, **{"syncbus.io/epoch": "1"})]
        syncs = [self.synced(c, 20) for c in ("c1", "c2", "c3", "c4", "c5")]
        liveness = [self.liveness("w", 2, self.T - 5), self.liveness("x", 1, self.T - 16)]
        self.assertEqual(held_claims(leases, syncs, liveness, self.T), {"w": ["c1", "c2"]})


class RolloutTest(unittest.TestCase):
    """The rollout in waves: the hold, a wave boundary during faults, the end. Clusters c0..c9 in
    waves by count of 1, 30%, then the rest: c7; c1, c4, c5; the others (pinned to the C++ below)."""

    BOUNDS = ["143ad8baac815aa8", "5e31f16fddcc86f1", "ffffffffffffffff"]
    CLUSTERS = [f"c{i}" for i in range(10)]
    WAVES = {"c7": 1, "c1": 2, "c4": 2, "c5": 2, "c0": 3, "c2": 3, "c3": 3, "c6": 3, "c8": 3, "c9": 3}
    MARKS = {"mark-1": 1, "mark-2": 2}

    @classmethod
    def state(cls, generation, wave, phase="Progressing", **more):
        return dict({"generation": generation, "wave": wave, "waves": 3, "phase": phase, "bounds": cls.BOUNDS},
                    **more)

    def rollout(self, generation, start, mark):
        """A clean rollout of `generation` from `start` (unix s): each wave released 10 s after the
        last, its clusters written 1 s after their release. (states, writes)"""
        states = [(start + 10 * (w - 1), self.state(generation, w)) for w in (1, 2, 3)]
        states.append((start + 30, self.state(generation, 3, "Complete")))
        writes = [(start + 10 * (self.WAVES[c] - 1) + 1, c, mark, "consumer-1") for c in self.CLUSTERS]
        return states, sorted(writes)

    def history(self, *rollouts):
        h = cc.RolloutHistory()
        for states, writes in rollouts:
            h.states += states
            h.writes += writes
        return h

    def test_ranks_and_waves_as_the_cpp_computes_them(self):
        # The same figures as tests/unit/core/rollout_test.cc pins RankOf, BoundsFor and WaveOf to.
        self.assertEqual(cc.rank_of("c0/c0"), 0xde1b193ca899e231)
        self.assertEqual(cc.rank_of("c1/c1"), 0x3c972e102601add0)
        self.assertEqual(cc.rank_of("cluster-0007/cluster-0007"), 0x02e0dfaccb17a2a6)
        state = self.state(1, 1)
        self.assertEqual([cc.wave_of(f"c{i}/c{i}", state) for i in range(10)], [3, 2, 3, 3, 2, 2, 3, 1, 3, 3])
        self.assertTrue(cc.released_to("c7/c7", state, 1))
        self.assertFalse(cc.released_to("c1/c1", state, 1))
        self.assertTrue(cc.released_to("c1/c1", self.state(1, 3, "Complete"), 1))

    def test_writes_after_their_waves_release(self):
        h = self.history(self.rollout(1, 1000.0, "mark-1"), self.rollout(2, 2000.0, "mark-2"))
        check = cc.check_rollout_held(h, self.MARKS, self.CLUSTERS)
        self.assertTrue(check.ok, check.problems)
        self.assertIn("20 writes of 2 generations", check.detail)
        self.assertIn("wave 1: 2, wave 2: 6, wave 3: 12", check.detail)

    def test_a_write_before_its_wave_was_released(self):
        states, writes = self.rollout(2, 2000.0, "mark-2")
        writes.append((2012.0, "c0", "mark-2", "consumer-2"))   # c0 is in wave 3, released at 2020
        check = cc.check_rollout_held(self.history(self.rollout(1, 1000.0, "mark-1"), (states, writes)),
                                      self.MARKS, self.CLUSTERS)
        self.assertFalse(check.ok)
        self.assertEqual(len(check.problems), 1)
        self.assertIn("c0: mark-2 (generation 2) written by consumer-2 at 2012.000, its wave 3 not released "
                      "(wave 2 of 3 released, Progressing)", check.problems[0])

    def test_a_new_generation_is_not_released_by_the_old_ones_state(self):
        # Generation 1 complete; generation 2 written to wave 2 while its own state is in wave 1.
        states, writes = self.rollout(2, 2000.0, "mark-2")
        writes.append((2001.5, "c1", "mark-2", "consumer-1"))
        check = cc.check_rollout_held(self.history(self.rollout(1, 1000.0, "mark-1"), (states, writes)),
                                      self.MARKS, self.CLUSTERS)
        self.assertFalse(check.ok)
        self.assertIn("c1: mark-2 (generation 2)", check.problems[0])
        # ... nor before its own state exists.
        check = cc.check_rollout_held(self.history(self.rollout(1, 1000.0, "mark-1"),
                                                   (states, writes + [(1999.0, "c7", "mark-2", "consumer-1")])),
                                      self.MARKS, self.CLUSTERS)
        self.assertFalse(check.ok)
        self.assertTrue(any("no state for it yet" in p for p in check.problems), check.problems)

    def test_too_few_writes_or_one_generation_prove_nothing(self):
        states, writes = self.rollout(1, 1000.0, "mark-1")
        check = cc.check_rollout_held(self.history((states, writes[:5])), self.MARKS, self.CLUSTERS)
        self.assertFalse(check.ok)
        self.assertTrue(any("only 5 writes" in p for p in check.problems), check.problems)
        self.assertTrue(any("no generation rolled out over another" in p for p in check.problems), check.problems)

    def test_the_history_from_the_journal(self):
        state = json.dumps(self.state(1, 1))
        entries = [
            {"t": 1000000, "cluster": "hub", "resource": "selectorsyncsets", "name": "rolled", "rolloutState": state},
            {"t": 1000500, "cluster": "hub", "resource": "selectorsyncsets", "name": "rolled", "rolloutState": state},
            {"t": 1000600, "cluster": "hub", "resource": "selectorsyncsets", "name": "other",
             "rolloutState": json.dumps(self.state(1, 2))},
            {"t": 1001000, "cluster": "c7", "resource": "configmaps", "name": "mark-1", "verb": "apply",
             "userAgent": "syncbus-consumer/consumer-1"},
            {"t": 1001100, "cluster": "c7", "resource": "configmaps", "name": "not-a-mark", "verb": "apply",
             "userAgent": "syncbus-consumer/consumer-1"},
            {"t": 1001200, "cluster": "hub", "resource": "configmaps", "name": "mark-1", "verb": "apply"},
        ]
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write("".join(json.dumps(e) + "\n" for e in entries))
        self.addCleanup(os.unlink, f.name)
        h = cc.rollout_history(f.name, "rolled", self.MARKS, self.CLUSTERS)
        self.assertEqual(h.states, [(1000.0, self.state(1, 1))])
        self.assertEqual(h.writes, [(1001.0, "c7", "mark-1", "consumer-1")])

    @staticmethod
    def faults():
        return [SimpleNamespace(kind="broker-kill", target="rabbit-2", at=1008.0, ended=1015.0, node_back=1018.0,
                                lingers=0.0),
                SimpleNamespace(kind="connection-close", target="consumer-1", at=1020.0, ended=0.0, lingers=0.0)]

    def test_a_boundary_during_a_fault(self):
        check = cc.check_boundary_during_faults(self.history(self.rollout(1, 1000.0, "mark-1")), self.faults())
        self.assertTrue(check.ok, check.problems)
        self.assertIn("2 wave releases, 1 during a fault", check.detail)
        self.assertIn("generation 1 wave 2 at +2.0s during broker-kill rabbit-2 (+0.0s..+10.0s)", check.detail)

    def test_no_boundary_during_a_fault(self):
        # The releases at 1010 and 1020: the first between faults, the second at a connection's close.
        faults = self.faults()
        faults[0].at, faults[0].ended, faults[0].node_back = 1011.0, 1015.0, 1016.0
        check = cc.check_boundary_during_faults(self.history(self.rollout(1, 1000.0, "mark-1")), faults)
        self.assertFalse(check.ok)
        self.assertIn("none of the 2 wave releases fell in a fault", check.problems[0])
        states = [(1000.0, self.state(1, 1)), (1005.0, self.state(1, 1, "Halted"))]
        check = cc.check_boundary_during_faults(self.history((states, [])), self.faults())
        self.assertFalse(check.ok)
        self.assertIn("no wave boundary at all", check.problems[0])

    def test_complete_never_halted(self):
        h = self.history(self.rollout(1, 1000.0, "mark-1"), self.rollout(2, 2000.0, "mark-2"))
        check = cc.check_rollout_complete(h, self.state(2, 3, "Complete"), 2)
        self.assertTrue(check.ok, check.problems)
        self.assertIn("2 generations rolled out; the last, 2, Complete", check.detail)
        check = cc.check_rollout_complete(h, self.state(2, 2), 2)
        self.assertFalse(check.ok)
        self.assertIn("did not complete: generation 2, Progressing in wave 2 of 3", check.problems[0])

    def test_a_halt_fails_and_names_the_faults_then(self):
        states, writes = self.rollout(1, 1000.0, "mark-1")
        halted = self.state(1, 2, "Halted", message="wave 2 of 3: 2 of 3 clusters failed; the wave tolerates 1",
                            failing=[{"cluster": "c1/c1", "message": "refused"}])
        states.insert(2, (1012.0, halted))
        check = cc.check_rollout_complete(self.history((states, writes)), self.state(1, 3, "Complete"), 1,
                                          self.faults())
        self.assertFalse(check.ok)
        self.assertEqual(check.problems, ["generation 1 halted in wave 2 of 3: wave 2 of 3: 2 of 3 clusters failed; "
                                          "the wave tolerates 1 (c1/c1: refused); during broker-kill rabbit-2"])


class RolloutStreamTest(unittest.TestCase):
    """The run's rollout driver (chaos_rollout.RolloutStream) on a hub that keeps one set."""

    class Hub:
        def __init__(self):
            self.template = {"spec": {"clusterDeploymentSelector": {"matchLabels": {"fleet": "yes"}},
                                      "resources": [{"apiVersion": "v1", "kind": "ConfigMap",
                                                     "metadata": {"name": "x", "namespace": "sim-ns"}}]}}
            self.obj = None
            self.refuse = False
            self.requests = []

        def get(self, path, timeout=60):
            return copy.deepcopy(self.template if path.endswith("/fleet-sss-00") else self.obj)

        def request(self, method, path, body=None, content_type="application/json", timeout=60, accept_codes=()):
            self.requests.append((method, body))
            if self.refuse:
                raise RuntimeError("HTTP 409")
            meta = body["metadata"]
            if method == "POST":
                self.obj = copy.deepcopy(body)
                self.obj["metadata"].update(generation=1, resourceVersion="1")
            elif method == "PUT":
                changed = body["spec"] != self.obj["spec"]
                self.obj = copy.deepcopy(body)
                self.obj["metadata"]["generation"] = meta["generation"] + changed
            else:
                self.obj["metadata"]["annotations"].update(meta["annotations"])
            self.obj["metadata"]["resourceVersion"] = str(int(self.obj["metadata"]["resourceVersion"]) + 1)
            return 201, copy.deepcopy(self.obj)

        def set_state(self, **state):
            state.setdefault("generation", self.obj["metadata"]["generation"])
            self.obj["metadata"]["annotations"][chaos_rollout.STATE_ANNOTATION] = json.dumps(state)

    def stream(self):
        hub = self.Hub()
        stream = chaos_rollout.RolloutStream(hub, random.Random(1))
        stream.create()
        return hub, stream

    def test_the_set_it_makes(self):
        hub, stream = self.stream()
        meta, spec = hub.obj["metadata"], hub.obj["spec"]
        self.assertEqual(json.loads(meta["annotations"][chaos_rollout.SPEC_ANNOTATION]), chaos_rollout.SPEC)
        self.assertEqual(spec["clusterDeploymentSelector"], hub.template["spec"]["clusterDeploymentSelector"])
        self.assertEqual([r["metadata"]["name"] for r in spec["resources"]], ["chaos-rollout", "chaos-rollout-g000"])
        self.assertEqual(len(spec["resources"]), chaos_rollout.RESOURCES)
        self.assertEqual(stream.marks, {"chaos-rollout-g000": 1})

    def test_edits_when_complete_once_mid_rollout_and_after_a_halt(self):
        hub, stream = self.stream()
        stream.step()   # no state yet: nothing
        hub.set_state(wave=2, waves=3, phase="Progressing")
        stream.step()   # generation 1 in wave 2, but no edit of its own yet: not the time to restart
        hub.set_state(wave=3, waves=3, phase="Complete")
        stream.step()
        self.assertEqual(stream.marks, {"chaos-rollout-g000": 1, "chaos-rollout-g001": 2})
        hub.set_state(wave=2, waves=3, phase="Progressing")
        stream.step()   # in the middle: a new generation, once
        self.assertTrue(stream.restarted)
        hub.set_state(wave=2, waves=3, phase="Progressing")
        stream.step()
        self.assertEqual(stream.edits, 2)
        hub.set_state(wave=1, waves=3, phase="Halted", message="wave 1 of 3: 3 of 5 failed")
        stream.step()
        self.assertEqual(stream.edits, 3)
        self.assertEqual(len(stream.halts), 1)
        self.assertEqual(stream.marks["chaos-rollout-g003"], 4)
        hub.refuse = True   # a refused edit leaves no mark
        hub.obj["metadata"]["annotations"][chaos_rollout.STATE_ANNOTATION] = json.dumps(
            {"generation": 4, "wave": 3, "waves": 3, "phase": "Complete"})
        stream.step()
        self.assertEqual((stream.edits, stream.failed, len(stream.marks)), (3, 1, 4))

    def test_a_halt_at_the_end_is_resumed_and_kept(self):
        hub, stream = self.stream()
        hub.set_state(wave=2, waves=3, phase="Halted", message="m", failing=[{"cluster": "c/c"}])
        self.assertEqual(hub.obj["metadata"]["resourceVersion"], "2")
        real_sleep = chaos_rollout.time.sleep
        chaos_rollout.time.sleep = lambda s: hub.set_state(wave=3, waves=3, phase="Complete") \
            if hub.requests[-1][0] == "PATCH" else None
        self.addCleanup(setattr, chaos_rollout.time, "sleep", real_sleep)
        final, _ = stream.wait_complete(2)
        self.assertEqual(final["phase"], "Complete")
        self.assertEqual(len(stream.halts), 1)
        patch = [b for m, b in hub.requests if m == "PATCH"][0]
        resumed = json.loads(patch["metadata"]["annotations"][chaos_rollout.STATE_ANNOTATION])
        self.assertEqual(resumed, {"generation": 1, "wave": 2, "waves": 3, "phase": "Progressing"})
        self.assertEqual(patch["metadata"]["resourceVersion"], "2")   # the halted state's: no blind write


class FleetTest(unittest.TestCase):
    """verify_fleet on a hub and targets served from dictionaries."""

    class Hub:
        def __init__(self, syncsets, selector, clustersyncs):
            self.lists = {cc.HIVE + "/syncsets": syncsets, cc.HIVE + "/selectorsyncsets": selector,
                          "/apis/hiveinternal.openshift.io/v1alpha1/clustersyncs": clustersyncs}

        def get(self, path):
            return {"items": self.lists[path]}

    class Target:
        def __init__(self, configmaps):
            self.configmaps = configmaps   # path -> items

        def get(self, path):
            return {"items": self.configmaps.get(path, [])}

    @staticmethod
    def set_of(name, ns, generation, payloads):
        meta = {"name": name, "generation": generation}
        if ns:
            meta["namespace"] = ns
        return {"metadata": meta, "spec": {"resources": [
            {"metadata": {"name": f"{name}-{i}", "namespace": "default"}, "data": {"payload": p}}
            for i, p in enumerate(payloads)]}}

    def fleet(self, clusters=("c1", "c2"), payload="v2"):
        syncsets = [self.set_of(f"{c}-ss", c, 2, [payload, payload]) for c in clusters]
        selector = [self.set_of("fleet-sss", "", 5, [payload])]
        syncs = [{"metadata": {"namespace": c}, "status": {
            "syncSets": [{"name": f"{c}-ss", "observedGeneration": 2, "result": "Success"}],
            "selectorSyncSets": [{"name": "fleet-sss", "observedGeneration": 5, "result": "Success"}]}}
            for c in clusters]
        configmaps = {f"/clusters/{c}/api/v1/namespaces/default/configmaps": [
            {"metadata": {"name": n}, "data": {"payload": "v2"}} for n in ("fleet-sss-0", f"{c}-ss-0", f"{c}-ss-1")]
            for c in clusters}
        target = self.Target(configmaps)
        return self.Hub(syncsets, selector, syncs), (lambda token: target)

    def test_every_object_compared(self):
        hub, target = self.fleet()
        check = cc.verify_fleet(hub, ["c1", "c2"], {}, 6, target)
        self.assertTrue(check.ok, check.problems)
        self.assertIn("6 objects (of 6)", check.detail)

    def test_an_object_behind(self):
        hub, target = self.fleet(payload="v3")
        check = cc.verify_fleet(hub, ["c1", "c2"], {}, 6, target)
        self.assertFalse(check.ok)
        self.assertIn("c1: ConfigMap default/c1-ss-0 has 'v2', wants 'v3'", check.problems)

    def test_fewer_objects_than_the_fleet_holds(self):
        # The fleet holds 2 clusters x 3 ConfigMaps, but the set lists came back empty, or a
        # cluster was left out: whatever was compared agreed, and that proves nothing.
        hub, target = self.fleet()
        hub.lists[cc.HIVE + "/syncsets"], hub.lists[cc.HIVE + "/selectorsyncsets"] = [], []
        check = cc.verify_fleet(hub, ["c1", "c2"], {}, 6, target)
        self.assertFalse(check.ok)
        self.assertEqual(check.problems, ["only 0 objects compared, the fleet holds 6: the rest was not checked"])
        hub, target = self.fleet()
        check = cc.verify_fleet(hub, ["c1"], {}, 6, target)
        self.assertFalse(check.ok)
        self.assertIn("only 3 objects compared", check.problems[0])


class ScanInputsTest(unittest.TestCase):
    @staticmethod
    def complete():
        """Inputs of a scan that read everything."""
        return cc.ScanInputs(trace_rc=0, trace_events=120,
                             queues={"syncbus.work.change": (3, 103, 3, 0), "syncbus.delay.1s": (0, 100, 0, 0)},
                             daemons={"consumer-1": True, "publisher-1": True},
                             pages={"http://127.0.0.1:1/metrics": None, "http://127.0.0.1:2/metrics": None},
                             log_dirs={"/run/rabbitmq/node-1/log": True})

    def test_all_read(self):
        self.assertEqual(self.complete().problems(), [])

    def assert_hole(self, change, expected):
        inputs = self.complete()
        change(inputs)
        problems = inputs.problems()
        self.assertTrue(any(expected in p for p in problems), problems)

    def test_the_trace_failed_or_was_empty(self):
        self.assert_hole(lambda i: setattr(i, "trace_rc", 1), "trace --all exited 1")
        self.assert_hole(lambda i: setattr(i, "trace_events", 0), "returned no event")

    def test_a_queue_unread_read_in_part_or_held(self):
        self.assert_hole(lambda i: i.queues.update({"syncbus.work.change": "HTTP 404"}),
                         "queue syncbus.work.change: not scanned: HTTP 404")
        self.assert_hole(lambda i: i.queues.update({"syncbus.work.change": (2, 103, 3, 0)}),
                         "read 2 of its 3 ready messages")
        self.assert_hole(lambda i: i.queues.update({"syncbus.work.change": (10000, 10000, 12000, 0)}),
                         "read 10000 of its 12000")
        self.assert_hole(lambda i: i.queues.update({"syncbus.work.change": (103, 103, 3, 0)}),
                         "as many as asked: more may be there")
        self.assert_hole(lambda i: i.queues.update({"syncbus.work.change": (3, 110, 3, 7)}),
                         "7 message(s) held unacknowledged")
        self.assert_hole(lambda i: i.queues.clear(), "none was listed")

    def test_a_daemon_not_running_or_a_page_not_read(self):
        self.assert_hole(lambda i: i.daemons.update({"consumer-2": False}),
                         "consumer-2: not running, its metrics page was not scanned")
        self.assert_hole(lambda i: i.pages.update({"http://127.0.0.1:2/metrics": "connection refused"}),
                         "metrics page http://127.0.0.1:2/metrics: not scanned: connection refused")
        self.assert_hole(lambda i: i.pages.clear(), "no metrics page")

    def test_a_broker_log_directory_missing_or_a_file_unreadable(self):
        self.assert_hole(lambda i: i.log_dirs.update({"/run/rabbitmq/node-2/log": False}),
                         "RabbitMQ log directory /run/rabbitmq/node-2/log: missing")
        self.assert_hole(lambda i: i.log_dirs.clear(), "no RabbitMQ log directory")
        self.assert_hole(lambda i: i.unreadable.append("cannot read x.log: Permission denied"),
                         "not scanned: cannot read x.log")


class IdentityTest(unittest.TestCase):
    """A consumer's lease identity, as the run reads it from the consumer's log."""

    def log(self, text):
        f = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False)
        with f:
            f.write(text)
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_text_and_json_lines(self):
        text = ("2026-11-25T10:00:00.000Z info consumer admin endpoint listening port=4000\n"
                "2026-11-25T10:00:01.000Z info consumer consuming brokers=a:1,b:2 vhost=/ prefetch=10 "
                "identity=consumer-1-host-4242\n")
        self.assertEqual(logged_identity(self.log(text), 0), "consumer-1-host-4242")
        quoted = 'x info consumer consuming vhost=/ identity="consumer 1"\n'
        self.assertEqual(logged_identity(self.log(quoted), 0), "consumer 1")
        line = '{"msg":"consuming","vhost":"/","identity":"consumer-2-host-7"}\n'
        self.assertEqual(logged_identity(self.log(line), 0), "consumer-2-host-7")

    def test_only_the_running_process_lines(self):
        first = "x info consumer consuming identity=consumer-1-host-1\n"
        path = self.log(first + "x info consumer stopped consuming unsettled=0\n")
        self.assertEqual(logged_identity(path, len(first)), "")   # the restarted one has not logged yet
        self.assertEqual(logged_identity(path, 0), "consumer-1-host-1")

    def test_every_process_of_a_daemon(self):
        # Three starts: the second crashed before it consumed; the third logged its own identity.
        starts = ["x info consumer consuming identity=consumer-1-host-1\n", "x info consumer starting\n",
                  "x info consumer consuming identity=consumer-1-host-3\n"]
        d = Daemon("consumer-1", "consumer", [], {}, self.log("".join(starts)), "")
        d.log_offsets = [0, len(starts[0]), len(starts[0]) + len(starts[1])]
        self.assertEqual(d.identities(), ["consumer-1-host-1", "consumer-1-host-3"])
        self.assertEqual(d.identity(), "consumer-1-host-3")
        self.assertEqual(logged_identity(d.log_path, d.log_offsets[1], d.log_offsets[2]), "")


class SchedulerTest(unittest.TestCase):
    """What the fault scheduler decides on its own: when it is done, which faults are protected."""

    def chaos(self, total=4, samples=2):
        return Chaos(SimpleNamespace(), total, 1.0, 10, None, samples=samples)

    def test_done_only_with_every_goals_samples(self):
        chaos = self.chaos()
        chaos.faults = [fault("target-burst", i) for i in range(4)]
        self.assertFalse(chaos.done())                 # 4 faults, but no protected sample yet
        chaos._protected_counts = {k: 2 for k in Chaos.GOAL_KINDS}
        self.assertTrue(chaos.done())
        chaos._protected_counts["consumer-pause"] = 1
        self.assertFalse(chaos.done())
        self.assertEqual(chaos._wanting(), {"consumer-pause"})
        self.assertTrue(chaos._protected("consumer-pause"))
        chaos.faults = [fault("target-burst", i) for i in range(100)]
        self.assertFalse(chaos.done())                 # however many faults, while there is time
        chaos._deadline = 0.0
        self.assertTrue(chaos.done())                  # its time is up: it stops, and goals_met fails

    def test_calm_waits_for_a_lingering_burst(self):
        chaos = self.chaos()
        burst = fault("hub-burst", 0.0)
        chaos.faults = [burst]
        self.assertTrue(chaos._calm())
        burst.lingers = 1e12   # a request it left unanswered may still hold a daemon up
        self.assertFalse(chaos._calm())

    def test_a_protected_consumer_fault_waits_for_a_target_burst_to_end(self):
        running = SimpleNamespace(running=lambda: True, stopped=False)
        chaos = Chaos(SimpleNamespace(consumers=lambda: [running, running]), 4, 1.0, 10, None)
        self.assertTrue(chaos._eligible("consumer-kill"))
        chaos._bursting.add("target")
        self.assertFalse(chaos._eligible("consumer-kill"))
        self.assertFalse(chaos._eligible("consumer-pause"))
        chaos._protected_counts = {"consumer-kill": 1}   # sampled, and not the next to protect:
        chaos._protect = False                          # an unprotected one may overlap
        self.assertTrue(chaos._eligible("consumer-kill"))

    def test_a_target_burst_spares_the_clusters_a_recovering_victim_held(self):
        struck = []
        sim = SimpleNamespace(names=[f"cluster-{i:04d}" for i in range(60)],
                              set_faults=lambda clusters, **spec: struck.append(set(clusters)) if spec else None,
                              clear_faults=lambda clusters: None)
        chaos = Chaos(SimpleNamespace(sim=sim), 4, 1.0, 10, random.Random(7))
        chaos._later = lambda delay, action: None   # the burst is not cleared in this test
        victim = Fault("consumer-kill", "consumer-1", now(), held=tuple(sim.names[:57]))
        chaos.faults = [victim]
        burst = chaos._target_burst()
        self.assertEqual(set(burst.clusters), set(sim.names[57:]))   # all it could take: 3 clusters
        self.assertEqual(struck, [set(burst.clusters)])
        victim.at -= 3 * 10 + 10 + 1                                # its window is over
        self.assertEqual(chaos._recovering_holds(), set())


class KindsAndGoalsTest(unittest.TestCase):
    KINDS = ["consumer-kill", "broker-kill"]

    def test_every_kind(self):
        self.assertTrue(cc.every_kind_injected([fault("consumer-kill", 0), fault("broker-kill", 100)],
                                               self.KINDS).ok)
        check = cc.every_kind_injected([fault("consumer-kill", 0)], self.KINDS)
        self.assertFalse(check.ok)
        self.assertEqual(check.problems, ["broker-kill: never injected"])

    def test_a_missed_goal_fails(self):
        met = [fault("consumer-kill", 0, **{"clusters synced again": 30.0})]
        rows, notes = cc.recovery_table(met, 20)
        self.assertTrue(cc.goals_met(rows, notes).ok)
        missed = [fault("consumer-kill", 0, **{"clusters synced again": 62.2})]
        rows, notes = cc.recovery_table(missed, 20)
        check = cc.goals_met(rows, notes)
        self.assertFalse(check.ok)
        self.assertIn("62.2s", check.problems[0])

    def test_a_publisher_connection_closed_meanwhile_disturbs_publishing(self):
        # A node death that did not stop publishing, then the leader's connection closed 10 s
        # later: the stall that follows is the second fault's, so the first is not judged by it.
        node = fault("broker-kill", 0, **{"publishing again": 21.0, "consuming again": 0.5})
        closed = fault("connection-close", 10, target="publisher-2")
        rows, notes = cc.recovery_table([node, closed], 10)
        publishing = next(r for r in rows if r[1] == "publishing again")
        self.assertEqual(publishing[3][0], 0)        # no undisturbed sample
        self.assertIsNone(publishing[5])
        consuming = next(r for r in rows if r[1] == "consuming again")
        self.assertTrue(consuming[5])                  # judged, and met
        # A consumer's connection does not stall publishing: the 21 s is judged, and missed.
        rows, notes = cc.recovery_table([node, fault("connection-close", 10, target="consumer-1")], 10)
        self.assertFalse(cc.goals_met(rows, notes).ok)

    def test_a_gap_without_work_is_no_stall(self):
        # Publishing went on through a node death at t=100, but for one 3.3 s gap at +27 s.
        confirms = [100.5 + 0.5 * i for i in range(54)] + [130.8 + 0.5 * i for i in range(40)]
        events = published(confirms)
        # Without knowing the work, the gap counts: "publishing again" at its end.
        self.assertAlmostEqual(cc.WorkTimes(events).published(100) - 100, 30.8, places=1)
        # The edit stream made no edit in the gap (its thread held up): publishing was back at once.
        edits = [c - 0.3 for c in confirms]
        self.assertAlmostEqual(cc.WorkTimes(events, edits).published(100) - 100, 0.5, places=1)
        # An edit made in the gap that waited past it: a stall of the system's.
        self.assertAlmostEqual(cc.WorkTimes(events, edits + [127.6]).published(100) - 100, 30.8, places=1)

    def test_a_fleet_wide_edit_excuses_no_publishing_stall(self):
        # A node death at t=100; 12 s later a fleet-wide edit's requests are all confirmed, then
        # nothing for 13 s while the edit stream goes on editing single clusters: those edits
        # waited (behind the fleet's requests), a stall that is judged as the node death's.
        confirms = [100.5 + 0.5 * i for i in range(24)] + [112.2] * 1000 + [125.3 + 0.5 * i for i in range(20)]
        edits = [100.3 + 0.5 * i for i in range(60)]
        back = cc.WorkTimes(published(confirms), edits).published(100)
        self.assertAlmostEqual(back - 100, 25.3, places=1)
        node = fault("broker-kill", 100, **{"publishing again": back - 100, "consuming again": 1.0})
        rows, notes = cc.recovery_table([node], 20)
        self.assertFalse(next(r for r in rows if r[1] == "publishing again")[5])
        self.assertFalse(cc.goals_met(rows, notes).ok)

    def test_deliveries_show_publishing_when_the_publishers_events_are_missing(self):
        # A node death at t=100; the publisher's trace events stop for 70 s (lost with the trace
        # stream's leader), but requests decided after the fault reach consumers from +0.3 s on.
        confirms = [90 + 0.5 * i for i in range(20)] + [170.5 + 0.5 * i for i in range(20)]
        edits = [90.3 + 0.5 * i for i in range(180)]
        self.assertAlmostEqual(cc.WorkTimes(published(confirms), edits).published(100) - 100, 70.5, places=1)
        deliveries = [{"step": "delivered", "at": rfc3339(100.3 + 0.5 * i), "queuedMs": 100,
                       "request": f"r{i}", "actor": "syncbus-consumer/c-1"} for i in range(150)]
        back = cc.WorkTimes(published(confirms) + deliveries, edits).published(100)
        self.assertAlmostEqual(back - 100, 0.3, places=1)
        # A delivery of a request decided before the fault shows nothing about publishing after it.
        stale = [dict(d, queuedMs=60000) for d in deliveries[:100]]
        self.assertAlmostEqual(cc.WorkTimes(published(confirms) + stale, edits).published(100) - 100, 70.5,
                               places=1)

    def test_a_consuming_gap_without_waiting_work_is_no_stall(self):
        # A node death at t=100; change-lane settles twice a second, but none from +25.2 to +28.6.
        def request(i, decided, settled):
            return [{"step": "published", "at": rfc3339(decided), "decidedAt": rfc3339(decided), "lane": "change"},
                    {"step": "delivered", "at": rfc3339(decided + 0.1), "queuedMs": 100, "request": f"r{i}",
                     "actor": "c-1", "lane": "change"},
                    {"step": "settled", "at": rfc3339(settled), "outcome": "applied", "request": f"r{i}",
                     "actor": "c-1", "lane": "change"}]
        steady = [request(i, 100.3 + 0.5 * i, 100.6 + 0.5 * i) for i in range(50)]   # up to +25.1
        # No request decided in the gap until +26.5: a lull of the edit stream, back at once.
        lull = sum(steady, []) + sum((request(100 + i, 126.5 + 0.5 * i, 128.6 + 0.2 * i) for i in range(5)), [])
        self.assertAlmostEqual(cc.WorkTimes(lull).consumed(100, lanes=("change",)) - 100, 0.6, places=1)
        # Requests decided at +25.4 that waited until +28.6: a stall.
        stalled = sum(steady, []) + sum((request(100 + i, 125.4 + 0.3 * i, 128.6 + 0.2 * i) for i in range(5)), [])
        self.assertAlmostEqual(cc.WorkTimes(stalled).consumed(100, lanes=("change",)) - 100, 28.6, places=1)

    def test_a_stall_after_the_next_disturbing_fault_is_that_faults(self):
        # The leader killed at t=100, publishing back at +11 s and steady, then a hub burst at
        # +26 s and nothing published from +27.6 s to +33.8 s while edits waited.
        confirms = [111.0 + 0.5 * i for i in range(34)] + [133.8 + 0.5 * i for i in range(20)]
        edits = [100.3 + 0.5 * i for i in range(90)]
        work = cc.WorkTimes(published(confirms), edits)
        self.assertAlmostEqual(work.published(100) - 100, 33.8, places=1)          # the stall counted
        self.assertAlmostEqual(work.published(100, until=126.0) - 100, 11.0, places=1)  # the burst's
        kill, burst = fault("publisher-kill", 100), fault("hub-burst", 126)
        self.assertEqual(cc.next_disturbance(kill, [kill, burst], "publishing again"), 126)
        self.assertIsNone(cc.next_disturbance(kill, [kill, fault("target-burst", 110)]))
        cc.measure_recovery([kill, burst], work, [], work_ended=200.0)
        self.assertAlmostEqual(kill.recovery["publishing again"], 11.0, places=1)
        # A stall that began before the next fault is still this one's.
        work = cc.WorkTimes(published([111.0, 125.0] + [130.0 + 0.5 * i for i in range(10)]), edits)
        self.assertAlmostEqual(work.published(100, until=126.0) - 100, 30.0, places=1)

    def test_never_recovered_fails(self):
        rows, notes = cc.recovery_table([fault("consumer-kill", 0, **{"clusters synced again": None})], 30)
        self.assertFalse(cc.goals_met(rows, notes).ok)


class FakeWork:
    """WorkTimes' answers, given per fault time; records what it was asked."""

    def __init__(self, published=None, consumed=None):
        self.published_at = published or {}
        self.consumed_at = consumed or {}
        self.asked = []

    def published(self, after, until=None):
        self.asked.append(("published", after))
        return self.published_at.get(after)

    def consumed(self, after, actor=None, lanes=None, until=None):
        self.asked.append(("consumed", after, actor, lanes))
        return self.consumed_at.get(after)


class RecoveryTest(unittest.TestCase):
    """The recovery figures of each kind of fault, the table they make (all faults, and the
    undisturbed ones the goals are judged on) and how it is printed."""

    def test_figures_measured_per_kind(self):
        publisher = Fault("publisher-kill", "publisher-1", at=100.0)
        node = Fault("broker-kill", "rabbit-2", at=200.0, lanes=("change", "resync"), ended=205.0, node_back=231.5)
        resync_node = Fault("broker-kill", "rabbit-3", at=300.0, lanes=("resync",), ended=301.0)
        consumer_conn = Fault("connection-close", "consumer-2", at=400.0)
        publisher_conn = Fault("connection-close", "publisher-1", at=500.0)
        consumer = Fault("consumer-kill", "consumer-1", at=600.0, recovery={"clusters synced again": 40.0})
        work = FakeWork(published={100.0: 104.5, 200.0: 201.0, 300.0: 300.5, 500.0: 502.0},
                        consumed={200.0: 203.0, 300.0: 309.0, 400.0: 400.75})
        faults = [publisher, node, resync_node, consumer_conn, publisher_conn, consumer]
        cc.measure_recovery(faults, work, ["consumer-1", "consumer-2"], work_ended=900.0)
        self.assertEqual(publisher.recovery, {"publishing again": 4.5})
        self.assertEqual(node.recovery, {"publishing again": 1.0, "consuming again": 3.0,
                                         "back in the cluster": 26.5})
        self.assertEqual(resync_node.recovery, {"publishing again": 0.5, "consuming again": 9.0})
        self.assertEqual(consumer_conn.recovery, {"working again": 0.75})
        self.assertEqual(publisher_conn.recovery, {"working again": 2.0})
        self.assertEqual(consumer.recovery, {"clusters synced again": 40.0})   # from the journal
        # The change lane when its queue's leader was on the node, every lane otherwise; a
        # consumer's own settles after its connection closed.
        self.assertIn(("consumed", 200.0, None, ("change",)), work.asked)
        self.assertIn(("consumed", 300.0, None, None), work.asked)
        self.assertIn(("consumed", 400.0, "/consumer-2-", None), work.asked)

    def test_never_back_unless_the_work_had_ended(self):
        early = Fault("publisher-kill", "publisher-1", at=100.0)
        late = Fault("publisher-kill", "publisher-2", at=880.0)
        cc.measure_recovery([early, late], FakeWork(), [], work_ended=900.0)
        self.assertEqual(early.recovery, {"publishing again": None})   # never recovered
        self.assertEqual(late.recovery, {})                           # nothing left to publish

    def test_disturbed_by_what_it_must_wait_for(self):
        victim = fault("consumer-kill", 100)
        self.assertFalse(cc.disturbed(victim, 30.0, [victim]))
        self.assertTrue(cc.disturbed(victim, 30.0, [victim, fault("broker-kill", 120)]))      # during
        self.assertFalse(cc.disturbed(victim, 30.0, [victim, fault("broker-kill", 131)]))     # after
        self.assertTrue(cc.disturbed(victim, 30.0, [victim, fault("hub-burst", 99.5)]))       # not over
        self.assertFalse(cc.disturbed(victim, 30.0, [victim, fault("target-burst", 110)]))    # no matter
        self.assertFalse(cc.disturbed(victim, 30.0, [victim, fault("publisher-kill", 110)]))
        # A hub-burst with timeouts over 19 s before: a request it left unanswered may still wait.
        burst = fault("hub-burst", 80)
        self.assertFalse(cc.disturbed(victim, 30.0, [victim, burst]))
        burst.lingers = burst.ended + 30
        self.assertTrue(cc.disturbed(victim, 30.0, [victim, burst]))
        burst.lingers = 99.0
        self.assertFalse(cc.disturbed(victim, 30.0, [victim, burst]))

    def test_a_planted_crash_disturbs_a_consumer_fault_as_a_kill(self):
        # As a run had it: consumer-1 frozen for 20 s; consumer-3 took over one of its clusters,
        # then died on the planted poison 29.7 s after the freeze holding that cluster's request,
        # which its next incarnation synced 52.1 s after the freeze.
        pause = fault("consumer-pause", 100, target="consumer-1", **{"clusters synced again": 52.1})
        rows, notes = cc.recovery_table([pause], 10)
        self.assertFalse(cc.goals_met(rows, notes).ok)            # judged alone: missed
        crash = SimpleNamespace(kind="consumer-kill", target="consumer-3", at=129.7, ended=129.7, lingers=0.0)
        rows, notes = cc.recovery_table([pause], 10, [crash])
        row = next(r for r in rows if r[0] == "consumer-pause")
        self.assertEqual(row[2][0], 1)                             # reported
        self.assertEqual(row[3][0], 0)                             # not judged
        self.assertEqual(len(rows), 1)                             # and the crash is no row of its own
        # A crash once the goal's time was up stretches nothing judged: missed.
        late = SimpleNamespace(kind="consumer-kill", target="consumer-3", at=131.0, ended=131.0, lingers=0.0)
        rows, notes = cc.recovery_table([pause], 10, [late])
        self.assertFalse(cc.goals_met(rows, notes).ok)

    def test_planted_crash_times_from_text_and_json_logs(self):
        text = "\n".join([f"2026-12-01T01:02:38.953Z error consumer {cc.PLANTED_CRASH} cluster={VICTIM}",
                          "2026-12-01T01:02:39.000Z info consumer consuming",
                          f"2026-12-01T01:02:40.000Z error consumer {cc.PLANTED_CRASH} cluster=cluster-0008/x"])
        self.assertEqual(cc.planted_crash_times(text, VICTIM), [cc.unix_ms("2026-12-01T01:02:38.953Z", 0) / 1000.0])
        json_line = PLANTED[:-1] + ',"ts":"2026-12-01T01:02:38.953Z"}'
        self.assertEqual(cc.planted_crash_times(json_line, VICTIM), [1796086958.953])
        self.assertEqual(cc.planted_crash_times(PLANTED, VICTIM), [])   # no time: left out

    def test_target_burst_disturbs_a_consumer_fault_only_on_a_cluster_its_victim_held(self):
        # As a run had it: the victim's cluster-0116, taken over 8 s after the kill, synced slowly
        # under a burst on 10 clusters that included it; a burst on the others does not matter.
        victim = fault("consumer-kill", 100)
        victim.held = ("cluster-0116", "cluster-0200")
        burst = fault("target-burst", 110.6)
        burst.ended = 127.1
        burst.clusters = ("cluster-0003", "cluster-0116")
        self.assertTrue(cc.disturbed(victim, 38.4, [victim, burst]))                          # began during
        elsewhere = fault("target-burst", 110.6)
        elsewhere.clusters = ("cluster-0003", "cluster-0117")
        self.assertFalse(cc.disturbed(victim, 38.4, [victim, elsewhere]))
        before = fault("target-burst", 95.0)
        before.ended = 105.0
        before.clusters = ("cluster-0200",)
        self.assertTrue(cc.disturbed(victim, 38.4, [victim, before]))                         # not over
        self.assertEqual(cc.next_disturbance(victim, [victim, elsewhere, burst]), 110.6)
        publisher = fault("publisher-kill", 100)
        self.assertFalse(cc.disturbed(publisher, 30.0, [publisher, burst]))

    def test_table_all_and_undisturbed_with_goals(self):
        slow_restart = fault("publisher-kill", 100, **{"publishing again": 8.0})
        slow_restart.ended = 110.0   # its process back only then
        faults = [fault("publisher-kill", 0, **{"publishing again": 4.0}),
                  slow_restart,
                  fault("broker-kill", 102, **{"publishing again": 1.0, "consuming again": 2.0,
                                               "back in the cluster": 20.0}),
                  fault("consumer-kill", 300, **{"clusters synced again": 35.0}),
                  fault("consumer-kill", 400)]   # its victim held no cluster
        rows, notes = cc.recovery_table(faults, 20)
        self.assertEqual([(kind, figure) for kind, figure, *_ in rows], [
            ("consumer-kill", "clusters synced again"), ("publisher-kill", "publishing again"),
            ("broker-kill", "publishing again"), ("broker-kill", "consuming again"),
            ("broker-kill", "back in the cluster")])
        consumer, publisher, node_publishing, _, node_back = rows
        self.assertEqual(consumer[2:], ((1, 35.0, 35.0), (1, 35.0, 35.0), "<= 3 x lease duration (60 s)", True))
        # The second publisher death was disturbed by the node death 2 s later: reported, not judged.
        self.assertEqual(publisher[2:], ((2, 6.0, 8.0), (1, 4.0, 4.0), "<= 15 s", True))
        # ... and the node death by that publisher death, still down when it struck.
        self.assertEqual(node_publishing[2:], ((1, 1.0, 1.0), (0, None, None), "<= 10 s", None))
        self.assertEqual(node_back[2:], ((1, 20.0, 20.0), (0, None, None), "(from its start)", None))
        self.assertEqual(notes, ["consumer-kill: clusters synced again: 1 of 2: the victim held no cluster"])
        # A consumer fault whose victim held nothing, and the node death's two goals that no
        # undisturbed fault judged: each fails the run.
        check = cc.goals_met(rows, notes)
        self.assertFalse(check.ok)
        self.assertEqual(check.problems, ["consumer-kill: clusters synced again: 1 of 2: the victim held no cluster",
                                          "broker-kill: publishing again: not judged: no undisturbed fault",
                                          "broker-kill: consuming again: not judged: no undisturbed fault"])

    def test_every_goal_judged_on_enough_undisturbed_faults(self):
        faults = [fault("consumer-kill", 100 * i, **{"clusters synced again": 30.0}) for i in range(3)]
        rows, notes = cc.recovery_table(faults, 20)
        self.assertTrue(cc.goals_met(rows, notes, samples=3).ok)
        # The third disturbed by a node death 5 s after it: two undisturbed, three asked for.
        rows, notes = cc.recovery_table(faults + [fault("broker-kill", 205, **{
            "publishing again": 1.0, "consuming again": 1.0})], 20)
        check = cc.goals_met(rows, notes, samples=3)
        self.assertFalse(check.ok)
        self.assertIn("consumer-kill: clusters synced again: judged on 2 undisturbed fault(s), fewer than 3",
                      check.problems)
        # Kinds without a goal need no sample.
        rows, notes = cc.recovery_table(faults + [fault("connection-close", 400, target="consumer-1")], 20)
        self.assertTrue(cc.goals_met(rows, notes, samples=3).ok)

    def test_a_recovery_past_its_goal_is_judged_although_a_fault_followed(self):
        # A leader death that took 25 s to recover from (goal 15 s), and a node death 20 s after
        # it: the goal was missed before the node died, so it is judged, and missed.
        slow = fault("publisher-kill", 0, **{"publishing again": 25.0})
        node = fault("broker-kill", 20, **{"publishing again": 1.0, "consuming again": 1.0})
        rows, notes = cc.recovery_table([slow, node], 20)
        publisher = next(r for r in rows if r[0] == "publisher-kill")
        self.assertEqual(publisher[3][0], 1)
        self.assertFalse(publisher[5])
        # A node death 10 s after it, within the goal's 15 s, stretched it: shown, not judged.
        rows, notes = cc.recovery_table([slow, fault("broker-kill", 10)], 20)
        self.assertIsNone(next(r for r in rows if r[0] == "publisher-kill")[5])

    def test_table_as_printed(self):
        rows = [("publisher-kill", "publishing again", (2, 6.0, 8.0), (1, 4.0, 4.0), "<= 15 s", True),
                ("broker-kill", "consuming again", (1, 12.25, 12.25), (1, 12.25, 12.25), "<= 10 s", False),
                ("broker-kill", "back in the cluster", (0, None, None), (0, None, None), "(from its start)", None)]
        self.assertEqual(cc.format_recovery(rows).splitlines(), [
            "fault             recovery               all: n     p50     max   undisturbed: n     p50     max  goal",
            "publisher-kill    publishing again            2    6.0s    8.0s                1    4.0s    4.0s  "
            "<= 15 s  met",
            "broker-kill       consuming again             1   12.2s   12.2s                1   12.2s   12.2s  "
            "<= 10 s  MISSED",
            "broker-kill       back in the cluster         0       -       -                0       -       -  "
            "(from its start)"])
        self.assertEqual(cc.summary([]), (0, None, None))
        self.assertEqual(cc.summary([3.0, 1.0, 2.0, 10.0]), (4, 2.5, 10.0))


if __name__ == "__main__":
    unittest.main()
