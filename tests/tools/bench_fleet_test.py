#!/usr/bin/env python3
"""Tests of the pure parts of syncbus_tools.bench_fleet: the report (a MISSED goal counted and
shown first on its line), the hub request table per cluster sync, the subtraction of request
counts (the benchmark's own requests taken out), the percentile, and the option parsers."""

import argparse
import contextlib
import io
import math
import unittest

from syncbus_tools import bench_fleet as bf


class ReportTest(unittest.TestCase):
    def test_rows_verdicts_and_the_final_table(self):
        report = bf.Report()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            report.add("converge: time", "12.0 s")
            report.add("converge: applies/s", "250", "<= 3", met=True)
            report.add("memory: consumer peak RSS", "600 MiB", "<= 512 MiB", met=False)
            report.print("bench-fleet")
        self.assertEqual(report.missed, 1)
        self.assertEqual(out.getvalue().splitlines(), [
            "  converge: time: 12.0 s",
            "  converge: applies/s: 250   goal <= 3: met",
            "  memory: consumer peak RSS: 600 MiB   goal <= 512 MiB: MISSED",
            "",
            "==== bench-fleet",
            "-       converge: time             12.0 s",
            "met     converge: applies/s        250  (goal <= 3)",
            "MISSED  memory: consumer peak RSS  600 MiB  (goal <= 512 MiB)",
            "==== 3 figures, 1 goal(s) MISSED",
        ])


class RequestCountsTest(unittest.TestCase):
    def test_table_per_sync_most_first(self):
        counts = {("update", "clustersyncs/status"): 200, ("get", "secrets"): 100,
                  ("list", "syncsets"): 0, ("create", "leases"): 50}
        self.assertEqual(bf.requests_table(counts, 100),
                         "update clustersyncs/status 2.00, get secrets 1.00, create leases 0.50")
        self.assertEqual(bf.requests_table(counts, 100, limit=1), "update clustersyncs/status 2.00")
        self.assertEqual(bf.requests_table(counts, 0), "update clustersyncs/status 200.00, get secrets 100.00, "
                                                       "create leases 50.00")   # no sync: per 1
        self.assertEqual(bf.requests_table({}, 10), "none")

    def test_subtract_before_and_own(self):
        after = {"a": 10, "b": 5, "c": 3}
        self.assertEqual(bf.subtract(after, {"a": 4, "b": 5}), {"a": 6, "c": 3})
        self.assertEqual(bf.subtract(after, {"a": 4}, own={"a": 1, "c": 3}), {"a": 5, "b": 5})


class PercentileTest(unittest.TestCase):
    def test_nearest_rank(self):
        values = [5.0, 1.0, 4.0, 2.0, 3.0]
        self.assertEqual(bf.percentile(values, 50), 3.0)
        self.assertEqual(bf.percentile(values, 0), 1.0)
        self.assertEqual(bf.percentile(values, 100), 5.0)
        self.assertEqual(bf.percentile(values, 99), 5.0)
        self.assertEqual(bf.percentile([7.0], 99), 7.0)
        self.assertTrue(math.isnan(bf.percentile([], 50)))


class ArgumentsTest(unittest.TestCase):
    def test_latency(self):
        self.assertEqual(bf.latency_arg("27,230"), (27, 230))
        self.assertEqual(bf.latency_arg("0,0"), (0, 0))
        for bad in ("27", "27,x", "230,27", "-1,5", "1,2,3"):
            with self.subTest(bad), self.assertRaises(argparse.ArgumentTypeError):
                bf.latency_arg(bad)

    def test_positive(self):
        self.assertEqual(bf.positive("3"), 3)
        with self.assertRaises(argparse.ArgumentTypeError):
            bf.positive("0")
        with self.assertRaises(ValueError):   # argparse reports it as an invalid value
            bf.positive("x")


if __name__ == "__main__":
    unittest.main()
