"""scripts/bench-publisher --real-apiserver: what a publisher costs a real hub in Secret traffic.

Starts a real hub (scripts/envtest) and a private RabbitMQ node, writes a fleet the way Hive lays
it out (a namespace per cluster with its ClusterDeployment, admin kubeconfig Secret and unrelated
Secrets of its own; large unrelated Secrets elsewhere; one SelectorSyncSet for all clusters with a
secretMapping), then starts one publisher and measures:
  - the Secret bytes the hub sends it: the response sizes of its Secret lists
    (apiserver_response_sizes, verb LIST) while it starts, and the sizes of the watch events
    (apiserver_watch_events_sizes, kind Secret) while every Secret is touched once (a label).
    kube-apiserver watches every Secret itself (its service account token lookup, through its
    loopback client) and that watch counts in the same metric, so the publisher's share of the
    events is taken at the client: the bytes its connections to the hub received during the
    round (bytes_received of `ss -ti`, TLS included);
  - the publisher's memory (VmRSS and VmHWM from /proc) once its cache is synced and every
    cluster's request is confirmed, and after the touches.
--build-dir runs another build's publisher (an older commit's, to compare) on the same fleet.
"""

import argparse
import base64
import http.client
import json
import os
import queue
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

import yaml

from syncbus_tools import ROOT
from syncbus_tools.testbed import (Broker, Processes, RunError, admin_port, free_port, make_work_dir, memory_kib,
                                   metric_sum, parse_metrics, read_env_file, scrape)

HIVE = "/apis/hive.openshift.io/v1"
SHARED = "bench-shared"


def note(message):
    print(f"bench-publisher: {message}", file=sys.stderr, flush=True)


class Connection:
    """One keep-alive HTTPS connection to the API server (one per writer thread)."""

    def __init__(self, kubeconfig_file):
        with open(kubeconfig_file, encoding="utf-8") as f:
            config = yaml.safe_load(f)
        cluster = config["clusters"][0]["cluster"]
        self.token = config["users"][0]["user"]["token"]
        url = urllib.parse.urlparse(cluster["server"])
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        self.host, self.port = url.hostname, url.port
        self.context = ssl.create_default_context(cadata=ca)
        self.conn = None

    def call(self, method, path, body=None, content_type="application/json", accept=(200, 201)):
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        for attempt in range(3):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.context,
                                                            timeout=120)
                self.conn.request(method, path, body=data, headers=headers)
                response = self.conn.getresponse()
                text = response.read()
                break
            except (OSError, http.client.HTTPException):
                self.conn = None
                if attempt == 2:
                    raise
        if response.status not in accept:
            raise RunError(f"{method} {path}: HTTP {response.status} {text[:300].decode(errors='replace')}")
        return json.loads(text) if text else None


def run_parallel(kubeconfig, jobs, threads=8):
    """Runs every (method, path, body, content_type) of `jobs` on `threads` connections."""
    work = queue.Queue()
    for job in jobs:
        work.put(job)
    errors = []

    def worker():
        conn = Connection(kubeconfig)
        while not errors:
            try:
                method, path, body, content_type = work.get_nowait()
            except queue.Empty:
                return
            try:
                conn.call(method, path, body, content_type or "application/json", accept=(200, 201, 409))
            except Exception as e:  # noqa: BLE001 - reported below, stops the others
                errors.append(e)
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        raise RunError(str(errors[0]))


def blob(size):
    """A Secret value of `size` bytes: random, like the keys, certificates and tokens Secrets
    hold (the hub gzips large list responses, which would shrink anything repetitive)."""
    return base64.b64encode(os.urandom(size)).decode()


def fleet_jobs(args):
    """The writes of the fleet, in an order the hub accepts (namespaces first)."""
    namespaces, objects = [], []
    fake_ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n" + b"A" * 1500 + b"\n").decode()
    for i in range(args.clusters):
        name = f"c-{i:05d}"
        namespaces.append(("POST", "/api/v1/namespaces",
                           {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, None))
        objects.append(("POST", f"{HIVE}/namespaces/{name}/clusterdeployments", {
            "apiVersion": "hive.openshift.io/v1", "kind": "ClusterDeployment",
            "metadata": {"name": name, "namespace": name, "labels": {"syncbus.io/bench": "publisher"}},
            "spec": {"baseDomain": "bench.syncbus.io", "clusterName": name, "platform": {"none": {}},
                     "installed": True,
                     "clusterMetadata": {"clusterID": f"5e1f0000-0000-4000-8000-{i:012d}", "infraID": name,
                                         "adminKubeconfigSecretRef": {"name": name + "-admin-kubeconfig"}}}},
            None))
        kubeconfig = (f"apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n"
                      f"    server: https://api.{name}.bench.syncbus.io:6443\n"
                      f"    certificate-authority-data: {fake_ca}\n"
                      f"users:\n- name: admin\n  user:\n    token: {'t' * 64}\n")
        objects.append(("POST", f"/api/v1/namespaces/{name}/secrets", {
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name + "-admin-kubeconfig", "namespace": name},
            "data": {"kubeconfig": base64.b64encode(kubeconfig.encode()).decode()}}, None))
        for k in range(args.unrelated_per_cluster):
            objects.append(("POST", f"/api/v1/namespaces/{name}/secrets", {
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": f"unrelated-{k}", "namespace": name},
                "data": {"payload": blob(args.unrelated_bytes)}}, None))
    namespaces.append(("POST", "/api/v1/namespaces",
                       {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SHARED}}, None))
    objects.append(("POST", f"/api/v1/namespaces/{SHARED}/secrets", {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pull-secret", "namespace": SHARED},
        "data": {"token": base64.b64encode(b"shared pull secret").decode()}}, None))
    for k in range(args.large):
        objects.append(("POST", f"/api/v1/namespaces/{SHARED}/secrets", {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"large-{k:02d}", "namespace": SHARED},
            "data": {"payload": blob(args.large_bytes)}}, None))
    objects.append(("POST", f"{HIVE}/selectorsyncsets", {
        "apiVersion": "hive.openshift.io/v1", "kind": "SelectorSyncSet",
        "metadata": {"name": "bench-publisher"},
        "spec": {"clusterDeploymentSelector": {"matchLabels": {"syncbus.io/bench": "publisher"}},
                 "resourceApplyMode": "Upsert",
                 "resources": [{"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "bench", "namespace": "default"}, "data": {"k": "v"}}],
                 "secretMappings": [{"sourceRef": {"name": "pull-secret", "namespace": SHARED},
                                     "targetRef": {"name": "pull-secret", "namespace": "default"}}]}},
        None))
    return namespaces, objects


# What Hive's controllers leave on a running cluster's ClusterDeployment status: without a False
# Unreachable condition Hive's skip rules (and the publisher's) skip the cluster.
REACHABLE = {"status": {"conditions": [{
    "type": "Unreachable", "status": "False", "reason": "ClusterReachable", "message": "cluster is reachable",
    "lastTransitionTime": "2024-01-01T00:00:00Z", "lastProbeTime": "2024-01-01T00:00:00Z"}]}}


def status_jobs(args):
    """The status writes that make every cluster reachable, as Hive's unreachable controller does."""
    return [("PATCH", f"{HIVE}/namespaces/c-{i:05d}/clusterdeployments/c-{i:05d}/status", REACHABLE,
             "application/merge-patch+json") for i in range(args.clusters)]


class HubMetrics:
    """The hub's Secret traffic counters, summed over every series."""

    def __init__(self, kubeconfig):
        self.conn = Connection(kubeconfig)

    def read(self):
        conn = http.client.HTTPSConnection(self.conn.host, self.conn.port, context=self.conn.context,
                                           timeout=60)
        conn.request("GET", "/metrics", headers={"Authorization": "Bearer " + self.conn.token})
        samples = parse_metrics(conn.getresponse().read().decode())
        conn.close()
        return {
            "list_bytes": metric_sum(samples, "apiserver_response_sizes_sum", resource="secrets", verb="LIST"),
            "lists": metric_sum(samples, "apiserver_response_sizes_count", resource="secrets", verb="LIST"),
            "event_bytes": metric_sum(samples, "apiserver_watch_events_sizes_sum", kind="Secret"),
            "events": metric_sum(samples, "apiserver_watch_events_sizes_count", kind="Secret"),
        }


def socket_bytes(pid, port):
    """Bytes the established TCP connections of process `pid` to `port` received so far."""
    out = subprocess.run(["ss", "-tinpH", "state", "established", f"( dport = :{port} )"],
                         capture_output=True, text=True, check=True).stdout
    total, mine = 0, False
    for line in out.splitlines():
        if not line.startswith((" ", "\t")):
            mine = f"pid={pid}," in line
            continue
        if mine:
            for field in line.split():
                if field.startswith("bytes_received:"):
                    total += int(field.split(":", 1)[1])
    return total


def mib(kib):
    return kib / 1024


def wait_log(procs, name, path, text, timeout):
    """Seconds until `text` shows in the log at `path` of process `name`."""
    start = time.monotonic()
    while True:
        procs.check_alive(name)
        with open(path, encoding="utf-8", errors="replace") as f:
            if text in f.read():
                return time.monotonic() - start
        if time.monotonic() - start > timeout:
            raise RunError(f"{name}: no '{text}' after {timeout} s (log: {path})")
        time.sleep(0.2)


def consumer_mirror(args, procs, kubeconfig, work):
    """Starts one consumer on the same hub and measures how long its hub mirror takes to list
    everything (the consumer logs "hub mirror synced" before it consumes). Its broker address is
    a port nothing listens on, so it never takes a request (the fleet's clusters are not
    reachable)."""
    config = os.path.join(work, "consumer.yaml")
    with open(config, "w", encoding="utf-8") as f:
        f.write(f"amqp: {{host: 127.0.0.1, port: {free_port()}, vhost: /, user: nobody, password: nobody}}\n"
                f"hub: {{kubeconfig: {kubeconfig}}}\n"
                "admin: {listen: \"127.0.0.1:0\"}\nlog: {level: info}\n"
                f"topology: {{maxLength: {args.clusters * 2}}}\n")
    child = procs.start("consumer", [os.path.join(args.build_dir, "consumer", "syncbus-consumer"),
                                     "--config", config])
    seconds = wait_log(procs, "consumer", os.path.join(work, "consumer.log"), "hub mirror synced", args.timeout)
    rss, _ = memory_kib(child.pid)
    procs.stop("consumer")
    return seconds, rss


def run(args):
    if not os.environ.get("KUBEBUILDER_ASSETS"):
        raise RunError("--real-apiserver needs KUBEBUILDER_ASSETS (a directory with kube-apiserver 1.26)")
    publisher_bin = os.path.join(args.build_dir, "publisher", "syncbus-publisher")
    if not os.access(publisher_bin, os.X_OK):
        raise RunError(f"{publisher_bin} is missing: run scripts/build (or pass --build-dir)")
    work = make_work_dir()
    procs = Processes(work)
    envtest = os.path.join(ROOT, "scripts", "envtest")
    env_dir = os.path.join(work, "envtest")
    broker = None
    note(f"work directory {work}")
    try:
        note("starting a real hub (scripts/envtest) and a private RabbitMQ node")
        with open(os.path.join(work, "envtest.log"), "wb") as log:
            if subprocess.call([envtest, "start", "--dir", env_dir], stdout=log, stderr=subprocess.STDOUT) != 0:
                raise RunError(f"scripts/envtest start failed (log: {work}/envtest.log)")
        broker = Broker(ROOT, work)
        env = read_env_file(os.path.join(env_dir, "envtest.env"))
        kubeconfig = env["SYNCBUS_ENVTEST_HUB_KUBECONFIG"]
        namespaces, objects = fleet_jobs(args)
        secrets = [o for o in objects if o[1].endswith("/secrets")]
        secret_bytes = sum(sum(len(v) for v in o[2]["data"].values()) * 3 // 4 for o in secrets)
        started = time.monotonic()
        run_parallel(kubeconfig, namespaces, args.threads)
        run_parallel(kubeconfig, objects, args.threads)
        run_parallel(kubeconfig, status_jobs(args), args.threads)
        note(f"fleet written in {time.monotonic() - started:.0f} s: {args.clusters} clusters, "
             f"{len(secrets)} Secrets holding {secret_bytes / 2**20:.0f} MiB")

        config = os.path.join(work, "publisher.yaml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(broker.amqp_yaml() + f"hub: {{kubeconfig: {kubeconfig}}}\n"
                    "admin: {listen: \"127.0.0.1:0\"}\nlog: {level: info}\n"
                    f"topology: {{maxLength: {args.clusters * 2}}}\n"
                    f"publisher: {{maxPublishRate: 100000, maxOutstanding: {args.clusters * 2}, "
                    "leaderElection: {enabled: false}}\n")
        hub = HubMetrics(kubeconfig)

        hub_port = int(urllib.parse.urlparse(env["SYNCBUS_ENVTEST_HUB_URL"]).port)
        before = hub.read()
        start = time.monotonic()
        child = procs.start("publisher", [publisher_bin, "--config", config])
        log_path = os.path.join(work, "publisher.log")
        synced_at = None
        deadline = start + args.timeout
        while True:
            procs.check_alive("publisher")
            if time.monotonic() > deadline:
                raise RunError(f"timed out (log: {log_path})")
            if synced_at is None:
                with open(log_path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
                port = admin_port(text)
                if port and "hub cache synced" in text:
                    synced_at = time.monotonic() - start
            if synced_at is not None:
                try:
                    enqueued = metric_sum(scrape(f"http://127.0.0.1:{port}/metrics"),
                                          "syncbus_publisher_enqueued_total")
                except OSError:
                    enqueued = 0
                if enqueued >= args.clusters:
                    break
            time.sleep(0.2)
        confirmed_at = time.monotonic() - start
        listed = hub.read()
        rss_listed, hwm_listed = memory_kib(child.pid)

        mirror_synced, mirror_rss = consumer_mirror(args, procs, kubeconfig, work)

        note(f"touching each of the {len(secrets)} Secrets once (a label)")
        received = socket_bytes(child.pid, hub_port)
        touches = [("PATCH", path + "/" + body["metadata"]["name"],
                    {"metadata": {"labels": {"syncbus.io/touched": "yes"}}}, "application/merge-patch+json")
                   for _, path, body, _ in secrets]
        run_parallel(kubeconfig, touches, args.threads)
        # Every event reaches the apiserver's own watch and the publisher's: wait for both.
        deadline = time.monotonic() + 600
        while hub.read()["events"] - listed["events"] < 2 * len(touches):
            procs.check_alive("publisher")
            if time.monotonic() > deadline:
                raise RunError("the hub did not send the watchers an event for every touched Secret")
            time.sleep(1)
        time.sleep(2)
        touched = hub.read()
        touch_received = socket_bytes(child.pid, hub_port) - received
        rss_touched, hwm_touched = memory_kib(child.pid)
        procs.stop("publisher")

        list_bytes = listed["list_bytes"] - before["list_bytes"]
        rows = [
            ("build", args.build_dir),
            ("fleet", f"{args.clusters} clusters, {len(secrets)} Secrets, {secret_bytes / 2**20:.1f} MiB of "
                      f"Secret data ({args.unrelated_per_cluster} x {args.unrelated_bytes} B unrelated per "
                      f"cluster, {args.large} x {args.large_bytes} B elsewhere)"),
            ("cache synced / every request confirmed", f"{synced_at:.1f} s / {confirmed_at:.1f} s"),
            ("a consumer's hub mirror synced (its RSS then)", f"{mirror_synced:.1f} s ({mib(mirror_rss):.0f} MiB)"),
            ("Secret list responses at start", f"{list_bytes / 2**20:.2f} MiB in "
                                               f"{int(listed['lists'] - before['lists'])} pages"),
            ("Secret watch events (each Secret touched once): received by the publisher",
             f"{touch_received / 2**20:.2f} MiB (the hub sent "
             f"{(touched['event_bytes'] - listed['event_bytes']) / 2**20:.2f} MiB in "
             f"{int(touched['events'] - listed['events'])} events to all Secret watchers, its own included)"),
            ("Secret bytes the hub sent the publisher in all", f"{(list_bytes + touch_received) / 2**20:.2f} MiB"),
            ("publisher RSS once synced and published (peak so far)",
             f"{mib(rss_listed):.0f} MiB ({mib(hwm_listed):.0f} MiB)"),
            ("publisher RSS after the touches (peak)", f"{mib(rss_touched):.0f} MiB ({mib(hwm_touched):.0f} MiB)"),
        ]
        width = max(len(r[0]) for r in rows)
        print(f"bench-publisher --real-apiserver (kube-apiserver 1.26.4, {os.cpu_count()} CPUs)")
        for label, value in rows:
            print(f"  {label:<{width}}  {value}")
        return 0
    finally:
        procs.stop_all()
        if broker:
            broker.stop()
        subprocess.call([envtest, "stop", "--dir", env_dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not args.keep:
            subprocess.call(["rm", "-rf", work])


def main(argv):
    p = argparse.ArgumentParser(prog="bench-publisher --real-apiserver", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clusters", type=int, default=10000)
    p.add_argument("--unrelated-per-cluster", type=int, default=2,
                   help="Secrets in each cluster's namespace that no set reads (default 2)")
    p.add_argument("--unrelated-bytes", type=int, default=16384, help="their size (default 16384)")
    p.add_argument("--large", type=int, default=40, help="large unrelated Secrets (default 40)")
    p.add_argument("--large-bytes", type=int, default=943718, help="their size (default 0.9 MiB)")
    p.add_argument("--threads", type=int, default=8, help="parallel writers of the fleet (default 8)")
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--timeout", type=int, default=1800, help="seconds for the publisher to confirm everything")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = p.parse_args(argv)
    args.build_dir = os.path.abspath(args.build_dir)
    try:
        return run(args)
    except RunError as e:
        note(f"error: {e}")
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
