#!/usr/bin/env python3
"""Tests of syncbus_tools.testbed, the kit the chaos run and the benchmarks share: the Prometheus
text they read every figure from (labels with commas, braces and escapes, timestamps, comments,
lines that are no sample), the env files of the broker and the API servers, the /proc readings,
the children they start and stop, and the Kubernetes client against a local HTTP server (its
token, its request counts, an unexpected answer as one RunError line)."""

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

from syncbus_tools import testbed
from syncbus_tools.testbed import RunError

# A page as the daemons and kube-apiserver serve it.
METRICS = """\
# HELP syncbus_consumer_applies_total Applies by outcome.
# TYPE syncbus_consumer_applies_total counter
syncbus_consumer_applies_total{outcome="applied",lane="change"} 12
syncbus_consumer_applies_total{outcome="applied",lane="resync"} 30
syncbus_consumer_applies_total{outcome="failed",lane="change"} 2
syncbus_publisher_outstanding 7
apiserver_request_total{code="200",resource="secrets",verb="LIST",path="/a,b{c}"} 3 1700000000000
apiserver_request_duration_seconds_bucket{le="+Inf",verb="GET"} 41
process_start_time_seconds 1.7e+09
syncbus_slowest_seconds +Inf
weird{msg="say \\"hi\\", then \\\\ and\\nmore",x="y"} 1
not_a_sample
broken{le="1"} many
"""


class MetricsTest(unittest.TestCase):
    def setUp(self):
        self.samples = testbed.parse_metrics(METRICS)

    def test_every_sample_with_its_labels(self):
        self.assertEqual(self.samples[0],
                         ("syncbus_consumer_applies_total", {"outcome": "applied", "lane": "change"}, 12.0))
        self.assertEqual(self.samples[3], ("syncbus_publisher_outstanding", {}, 7.0))
        self.assertEqual(len(self.samples), 9)   # comments, a name alone and a word as value skipped

    def test_commas_and_braces_inside_a_value_and_the_timestamp(self):
        name, labels, value = self.samples[4]
        self.assertEqual(labels, {"code": "200", "resource": "secrets", "verb": "LIST", "path": "/a,b{c}"})
        self.assertEqual(value, 3.0)   # not the timestamp

    def test_special_values(self):
        self.assertEqual(self.samples[5], ("apiserver_request_duration_seconds_bucket",
                                           {"le": "+Inf", "verb": "GET"}, 41.0))
        self.assertEqual(self.samples[6][2], 1.7e9)
        self.assertEqual(self.samples[7][2], float("inf"))

    def test_escaped_label_values(self):
        self.assertEqual(self.samples[8][1], {"msg": 'say "hi", then \\ and\nmore', "x": "y"})

    def test_sum_over_the_labels_given(self):
        self.assertEqual(testbed.metric_sum(self.samples, "syncbus_consumer_applies_total"), 44)
        self.assertEqual(testbed.metric_sum(self.samples, "syncbus_consumer_applies_total", outcome="applied"), 42)
        self.assertEqual(testbed.metric_sum(self.samples, "syncbus_consumer_applies_total",
                                            outcome="applied", lane="change"), 12)
        self.assertEqual(testbed.metric_sum(self.samples, "syncbus_consumer_applies_total", outcome="none"), 0)
        self.assertEqual(testbed.metric_sum(self.samples, "no_such_metric"), 0)


class EnvFileTest(unittest.TestCase):
    def test_values_as_the_shell_would_read_them(self):
        with tempfile.NamedTemporaryFile("w", suffix=".env", delete=False) as f:
            f.write("# written by scripts/rabbitmq-node\n\n"
                    "SYNCBUS_AMQP_PORT=5672\n"
                    "SYNCBUS_MGMT_URL=http://127.0.0.1:15672/\n"
                    'SYNCBUS_NODES="rabbit@a rabbit@b"\n'
                    "SYNCBUS_QUOTED='x=y'\n"
                    "SYNCBUS_LONE_QUOTE=\"a\n"
                    "SYNCBUS_EMPTY=\n"
                    "no equals sign\n")
        self.addCleanup(os.unlink, f.name)
        self.assertEqual(testbed.read_env_file(f.name), {
            "SYNCBUS_AMQP_PORT": "5672",
            "SYNCBUS_MGMT_URL": "http://127.0.0.1:15672/",
            "SYNCBUS_NODES": "rabbit@a rabbit@b",
            "SYNCBUS_QUOTED": "x=y",
            "SYNCBUS_LONE_QUOTE": '"a',
            "SYNCBUS_EMPTY": "",
        })


class ProcReadingsTest(unittest.TestCase):
    def test_own_cpu_and_memory(self):
        busy = sum(i * i for i in range(200000))   # some CPU time of our own
        self.assertGreater(busy, 0)
        self.assertGreater(testbed.cpu_seconds(os.getpid()), 0)
        rss, hwm = testbed.memory_kib(os.getpid())
        self.assertGreater(rss, 1000)   # a Python interpreter: some MiB
        self.assertLessEqual(rss, hwm)

    def test_admin_port_from_a_daemons_log(self):
        self.assertIsNone(testbed.admin_port("x info consumer starting\n"))
        text = ("2026-11-29T08:04:00.910Z info consumer starting version=0.1.0\n"
                "2026-11-29T08:04:00.911Z info consumer admin endpoint listening port=57431\n")
        self.assertEqual(testbed.admin_port(text), 57431)
        self.assertEqual(testbed.admin_port('{"msg":"admin endpoint listening","port":4000}\n'), 4000)

    def test_a_free_port_can_be_bound(self):
        port = testbed.free_port()
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


class ProcessesTest(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.TemporaryDirectory(prefix="testbed-test.")
        self.addCleanup(self.work.cleanup)
        self.procs = testbed.Processes(self.work.name)
        self.addCleanup(self.procs.stop_all)

    def test_an_exited_child_is_one_error_line_with_its_log(self):
        child = self.procs.start("daemon", ["sh", "-c", "echo starting; exit 3"])
        child.wait()
        with self.assertRaises(RunError) as e:
            self.procs.check_alive("daemon")
        log = os.path.join(self.work.name, "daemon.log")
        self.assertEqual(str(e.exception), f"daemon exited with 3 (log: {log})")
        with open(log, encoding="utf-8") as f:
            self.assertEqual(f.read(), "starting\n")

    def test_stop_ends_a_running_child(self):
        child = self.procs.start("sleeper", ["sleep", "600"])
        self.procs.check_alive("sleeper")
        self.procs.stop("sleeper")
        self.assertEqual(child.returncode, -signal.SIGTERM)
        self.procs.check_alive("sleeper")   # no longer one of its children
        self.procs.stop("sleeper")          # nor stopped twice

    def test_a_child_that_ignores_sigterm_is_killed(self):
        child = subprocess.Popen([sys.executable, "-c",
                                  "import signal, sys, time\n"
                                  "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                  "print('ready', flush=True)\n"
                                  "time.sleep(600)\n"], stdout=subprocess.PIPE)
        self.addCleanup(child.stdout.close)
        self.assertEqual(child.stdout.readline(), b"ready\n")   # its handler is in place
        child.terminate()
        testbed.wait_or_kill(child, 0.2)
        self.assertEqual(child.returncode, -signal.SIGKILL)


class KubeHandler(http.server.BaseHTTPRequestHandler):
    """GET /api/v1/namespaces/x answers 200 with a body, POST 409, anything else 500; every
    request's Authorization header is kept."""
    seen = []

    def log_message(self, *args):
        pass

    def answer(self, code, body):
        KubeHandler.seen.append((self.command, self.path, self.headers.get("Authorization")))
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/api/v1/namespaces/x":
            self.answer(200, {"kind": "Namespace", "metadata": {"name": "x"}})
        else:
            self.answer(500, {"message": "boom"})

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.answer(409, {"reason": "AlreadyExists"})


class KubeClientTest(unittest.TestCase):
    def setUp(self):
        KubeHandler.seen = []
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), KubeHandler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.addCleanup(self.server.server_close)
        self.addCleanup(self.server.shutdown)
        url = f"http://127.0.0.1:{self.server.server_address[1]}"
        with tempfile.NamedTemporaryFile("w", suffix=".kubeconfig", delete=False) as f:
            f.write(f"clusters:\n- cluster: {{server: '{url}/'}}\n  name: hub\n"
                    "users:\n- user: {token: t0ken}\n  name: admin\n")
        self.addCleanup(os.unlink, f.name)
        self.kube = testbed.KubeClient(f.name)

    def test_from_a_kubeconfig_with_its_token_and_counts(self):
        self.assertEqual(self.kube.get("/api/v1/namespaces/x", resource="namespaces")["metadata"]["name"], "x")
        self.assertEqual(self.kube.create("/api/v1/namespaces", {"metadata": {"name": "x"}}, resource="namespaces"),
                         409)   # an existing object is no error for create
        self.assertEqual(KubeHandler.seen, [("GET", "/api/v1/namespaces/x", "Bearer t0ken"),
                                            ("POST", "/api/v1/namespaces", "Bearer t0ken")])
        self.assertEqual(self.kube.sent, {("get", "namespaces"): 1, ("create", "namespaces"): 1})

    def test_an_unexpected_answer_is_one_error_line(self):
        with self.assertRaises(RunError) as e:
            self.kube.get("/api/v1/secrets")
        self.assertEqual(str(e.exception), 'GET /api/v1/secrets: HTTP 500 {"message": "boom"}')
        self.assertEqual(self.kube.sent, {})   # no resource named: not counted


if __name__ == "__main__":
    unittest.main()
