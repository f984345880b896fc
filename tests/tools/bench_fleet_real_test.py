#!/usr/bin/env python3
"""Tests of the pure parts of syncbus_tools.bench_fleet_real: when the fleet counts as synced (every
cluster's ClusterSync shows each of its sets applied at its generation), what the hub served less
the benchmark's own reads, and the per-cluster request tables."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "lib"))
from syncbus_tools import bench_fleet_real as bfr  # noqa: E402


def entry(name, generation, result="Success"):
    return {"name": name, "observedGeneration": generation, "result": result}


def cluster_sync(i, sss_generation=None, ss_generation=1, result="Success"):
    name = bfr.cluster_name(i)
    status = {"syncSets": [entry(f"{name}-ss-{s}", ss_generation, result) for s in range(3)]}
    if sss_generation is not None:
        status["selectorSyncSets"] = [entry(bfr.SSS, sss_generation)]
    return {"metadata": {"name": name}, "status": status}


class FakeHub:
    """Answers the ClusterSync list with `items`, as the hub and as its kept-alive connection
    (asked for the watch cache's copy); counts the benchmark's own requests."""

    def __init__(self, items):
        self.items = items
        self.sent = {}

    def call(self, method, path):
        assert method == "GET" and path.endswith("/clustersyncs?resourceVersion=0"), path
        return {"items": self.items}

    def count(self, verb, resource):
        self.sent[(verb, resource)] = self.sent.get((verb, resource), 0) + 1


def pending(items, n, sss_generation):
    hub = FakeHub(items)
    return bfr.pending_clusters(hub, hub, n, sss_generation)


class PendingClusters(unittest.TestCase):
    def test_every_set_applied_at_its_generation_is_synced(self):
        items = [cluster_sync(i, 2 if bfr.selected(i) else None) for i in range(4)]
        hub = FakeHub(items)
        self.assertEqual(bfr.pending_clusters(hub, hub, 4, 2), 0)
        self.assertEqual(hub.sent, {("list", "clustersyncs"): 1})

    def test_a_selected_cluster_at_the_old_selector_generation_is_pending(self):
        items = [cluster_sync(i, 1 if bfr.selected(i) else None) for i in range(4)]
        self.assertEqual(pending(items, 4, 2), 2)

    def test_a_missing_cluster_sync_a_failed_set_or_a_missing_set_is_pending(self):
        items = [cluster_sync(0, 2), cluster_sync(1, result="Failure")]
        items.append(cluster_sync(2, 2))
        items[2]["status"]["syncSets"].pop()
        self.assertEqual(pending(items, 4, 2), 3)   # 1 failed, 2 short, 3 missing

    def test_an_unselected_cluster_needs_no_selector_entry(self):
        self.assertEqual(pending([cluster_sync(1)], 2, 5), 1)   # cluster 0 missing only


class Requests(unittest.TestCase):
    def test_subtract_drops_own_requests_and_zeroes(self):
        after = {("get", "secrets"): 10, ("list", "clustersyncs"): 7, ("update", "leases"): 3}
        before = {("get", "secrets"): 4, ("update", "leases"): 3}
        own = {("list", "clustersyncs"): 7}
        self.assertEqual(bfr.subtract(after, before, own), {("get", "secrets"): 6})

    def test_per_cluster_and_by_kind(self):
        requests = {("update", "clustersyncs/status"): 50, ("get", "secrets"): 25}
        self.assertEqual(bfr.per_cluster(requests, 50), (75, 1.5))
        self.assertEqual(bfr.by_kind(requests, 50), "update clustersyncs/status 1.00, get secrets 0.50")
        self.assertEqual(bfr.by_kind({}, 50), "none")


class ReapplyOverlap(unittest.TestCase):
    def test_windows_that_close_before_the_second_reapply_are_clean(self):
        # 1,000 clusters: syncbus converged in 18 s; 18 + 10 + 20 + 5 = 53 <= 54.
        self.assertEqual(bfr.reapply_overlap(18.1, 10, 20, 60), "")

    def test_a_long_edit_window_or_a_slow_converge_overlaps(self):
        # The same fleet with a 60 s edit window: its second reapply round falls in the window.
        why = bfr.reapply_overlap(18.1, 10, 60, 60)
        self.assertIn("edit window 60 s", why)
        self.assertIn("--reapply-interval 104 or more", why)
        # Hive converging 1,000 clusters in 139 s, longer than the interval itself.
        self.assertIn("--reapply-interval 194 or more", bfr.reapply_overlap(139.3, 10, 20, 60))


if __name__ == "__main__":
    unittest.main()
