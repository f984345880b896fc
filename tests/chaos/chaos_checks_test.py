#!/usr/bin/env python3
"""Tests of the chaos run's own checks (syncbus_tools.chaos_checks): each must fail on the bad
case it is there to catch, and pass on the good one. A real assert or heap corruption is not the
planted poison crash; a poison parked by the broker, for another reason or after the wrong count
is not syncbus's quarantine path; a parked message of the victim cluster is not the poison's
request; a journal without writes proves nothing; a scan that could not read the trace or a
queue has not shown that nothing leaked; a fault kind never injected, or a recovery goal missed,
fails the run."""

import datetime
import json
import os
import tempfile
import unittest
from types import SimpleNamespace

from syncbus_tools import chaos_checks as cc
from syncbus_tools.chaos_faults import Fault

VICTIM = "cluster-0007/cluster-0007"
PLANTED = (f'{{"level":"error","msg":"{cc.PLANTED_CRASH}","cluster":"{VICTIM}",'
           '"annotation":"chaos.syncbus.io/crash-consumer"}')


def rfc3339(t):
    """The unix time `t` as the trace events write it."""
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def published(confirms):
    """Trace events of publishes confirmed at the unix times `confirms` (decided just before)."""
    return [{"step": "published", "at": rfc3339(c), "decidedAt": rfc3339(c - 0.01), "durationMs": 0} for c in confirms]


def fault(kind, at, target="", **recovery):
    return SimpleNamespace(kind=kind, at=at, ended=at + 1, recovery=dict(recovery), identity="", target=target)


def parked(message_id, cluster=VICTIM, reason="delivery_limit", by="syncbus", unsettled=6):
    return {"cluster": cluster, "messageId": message_id, "reason": reason, "parkedBy": by,
            "unsettled": unsettled, "lastError": "crashed"}


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
        self.assertFalse(cc.judge_poison([parked("m1")], VICTIM, crashes=13, delivery_limit=5).ok)
        self.assertTrue(cc.judge_poison([parked("m1"), parked("m2")], VICTIM, 12, 5).ok)

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


class JournalTest(unittest.TestCase):
    def journal(self, entries):
        f = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
        with f:
            for e in entries:
                f.write(json.dumps(e) + "\n")
        self.addCleanup(os.unlink, f.name)
        return f.name

    @staticmethod
    def lease(t, cluster, holder):
        """The journal line of a consumer writing cluster `cluster`'s Lease (in namespace syncbus,
        named "<namespace>.<name>"; a fleet cluster's namespace is its name)."""
        return {"t": t, "cluster": "hub", "resource": "leases", "namespace": "syncbus",
                "name": f"{cluster}.{cluster}", "holder": holder, "leaseDurationSeconds": 20,
                "renewTime": None, "verb": "update"}

    def test_no_writes_proves_nothing(self):
        check = cc.analyse_journal(self.journal([]), [], ["c1", "c2"])
        self.assertFalse(check.ok)
        self.assertIn("journal is incomplete", check.problems[0])

    def test_writes_under_the_writers_lease(self):
        entries = []
        for i, c in enumerate(("c1", "c2")):
            t = 1000000 + i * 10
            entries.append(self.lease(t, c, "w"))
            entries.append({"t": t + 1, "cluster": "hub", "resource": "clustersyncs", "namespace": c,
                            "subresource": "status", "userAgent": "syncbus-consumer/w", "verb": "update",
                            "name": c})
        check = cc.analyse_journal(self.journal(entries), [], ["c1", "c2"])
        self.assertTrue(check.ok, check.problems)

    def test_a_write_by_another_than_the_holder(self):
        entries = [self.lease(1000, "c1", "w"),
                   {"t": 1001, "cluster": "c1", "resource": "configmaps", "userAgent": "syncbus-consumer/x",
                    "verb": "apply", "name": "cm"}]
        check = cc.analyse_journal(self.journal(entries), [], ["c1"])
        self.assertFalse(check.ok)
        self.assertIn("c1: target apply configmaps cm by x at 1001: lease held by w", check.problems)

    def test_a_lease_of_another_namespace_is_no_cluster_lease(self):
        # The consumers' cluster Leases live in syncbus's namespace; a Lease elsewhere (a
        # cluster's own namespace, as older versions had it) covers no write.
        entries = [dict(self.lease(1000, "c1", "w"), namespace="c1", name="c1"),
                   {"t": 1001, "cluster": "hub", "resource": "clustersyncs", "namespace": "c1",
                    "subresource": "status", "userAgent": "syncbus-consumer/w", "verb": "update", "name": "c1"}]
        check = cc.analyse_journal(self.journal(entries), [], ["c1"])
        self.assertFalse(check.ok)
        self.assertIn("lease held by nobody", check.problems[0])


class ScanInputsTest(unittest.TestCase):
    def test_all_read(self):
        self.assertEqual(cc.scan_inputs(0, [{"step": "published"}], []), [])

    def test_trace_failed_or_empty_or_a_queue_unread(self):
        self.assertTrue(cc.scan_inputs(1, [], []))
        self.assertTrue(cc.scan_inputs(0, [], []))
        self.assertTrue(cc.scan_inputs(0, [{"step": "published"}], ["syncbus.work.change: 404"]))


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

    def test_never_recovered_fails(self):
        rows, notes = cc.recovery_table([fault("consumer-kill", 0, **{"clusters synced again": None})], 30)
        self.assertFalse(cc.goals_met(rows, notes).ok)


class FakeWork:
    """WorkTimes' answers, given per fault time; records what it was asked."""

    def __init__(self, published=None, consumed=None):
        self.published_at = published or {}
        self.consumed_at = consumed or {}
        self.asked = []

    def published(self, after):
        self.asked.append(("published", after))
        return self.published_at.get(after)

    def consumed(self, after, actor=None, lanes=None):
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
        self.assertEqual(notes, ["consumer-kill: clusters synced again: 1 of 2: the victim held no cluster",
                                 "broker-kill: publishing again: no undisturbed sample to judge the goal on",
                                 "broker-kill: consuming again: no undisturbed sample to judge the goal on"])
        self.assertTrue(cc.goals_met(rows, notes).ok)

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
