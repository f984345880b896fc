"""scripts/bench-fleet: the whole system through the broker (see scripts/bench-fleet --help).

Simulator mode runs a private RabbitMQ node, syncbus-kubesim (hub + fleet, real-cluster latency),
one publisher and N consumers, and measures: time to converge, applies/s, CPU and peak RSS per
consumer, hub requests per cluster sync by verb and resource (start-up and steady state), what a
preview of an edit costs beside its sync (bench_preview.py), what rolling an edit out in waves costs
the hub beside one at once (bench_rollout.py), edit latency while the whole fleet resyncs, and
throughput per consumer at 1, 2 and 4 consumers.
--real-apiserver measures what syncbus and upstream Hive's clustersync each cost a real hub, side by
side (bench_fleet_real.py).
Every figure with a goal is printed with "met" or "MISSED"."""

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import string
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from syncbus_tools import ROOT, bench_fleet_real, bench_preview, bench_rollout
from syncbus_tools.chaos_system import RabbitCluster
from syncbus_tools.testbed import (Broker, KubeClient, Processes, RunError, admin_port, cpu_seconds,
                                   make_work_dir, memory_kib, metric_sum, subtract,
                                   scrape, claims_yaml)

HIVE = "/apis/hive.openshift.io/v1"

GOAL_REQUESTS_PER_SYNC = 3.0
GOAL_EDIT_SECONDS = 5.0
GOAL_SCALE_OUT = 0.90
GOAL_CONSUMER_MIB = 512
GOAL_HUB_CPU_MS = 25.0
# A fleet of 100,000 clusters on one hub (and a 3-node broker):
LARGE_FLEET = 50000          # from this size on, the defaults are those of a large fleet (parse_args)
GOAL_LARGE_FLEET = 100000    # the size the goals below hold at
GOAL_PUBLISHER_KIB_PER_CLUSTER = 4.0
GOAL_CONFIRM_SECONDS = 30.0
GOAL_LARGE_CONSUMER_MIB = 1024


def note(message):
    print(f"bench-fleet: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Daemons


class Daemons:
    """The publisher and consumers of one run: config files, processes, metrics endpoints."""

    def __init__(self, procs, bin_dir, broker, hub_kubeconfig, extra_publisher="", extra_consumer="", common=""):
        self.procs = procs
        self.bin = bin_dir
        self.broker = broker
        self.hub_kubeconfig = hub_kubeconfig
        self.extra_publisher = extra_publisher
        self.extra_consumer = extra_consumer
        self.common = common   # sections every daemon gets (topology)
        self.metrics = {}

    def _config(self, name, section):
        # Port 0: the daemon binds a free port itself and logs it (a port picked here could be
        # taken by another process before the daemon binds it).
        path = os.path.join(self.procs.work, name + ".yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write("log: {level: info}\n")
            f.write("admin: {listen: \"127.0.0.1:0\"}\n")
            f.write(self.broker.amqp_yaml())
            f.write(f"hub: {{kubeconfig: {self.hub_kubeconfig}}}\n")
            f.write(self.common)
            f.write(section)
        self.metrics[name] = None  # until the daemon logged its port (admin_url)
        return path

    def admin_url(self, name, timeout=60):
        """The daemon's admin endpoint, from its "admin endpoint listening" log line."""
        if self.metrics[name] is None:
            log = os.path.join(self.procs.work, name + ".log")
            deadline = time.monotonic() + timeout
            while self.metrics[name] is None:
                self.procs.check_alive(name)
                with open(log, encoding="utf-8", errors="replace") as f:
                    port = admin_port(f.read())
                if port:
                    self.metrics[name] = f"http://127.0.0.1:{port}"
                elif time.monotonic() > deadline:
                    raise RunError(f"{name} logged no admin endpoint in {timeout}s (log: {log})")
                else:
                    time.sleep(0.05)
        return self.metrics[name]

    def start_publisher(self, name="publisher", publisher_yaml=None):
        section = publisher_yaml if publisher_yaml is not None else self.extra_publisher
        config = self._config(name, section)
        return self.procs.start(name, [os.path.join(self.bin, "publisher", "syncbus-publisher"), "--config", config])

    def start_consumer(self, name):
        config = self._config(name, self.extra_consumer)
        return self.procs.start(name, [os.path.join(self.bin, "consumer", "syncbus-consumer"),
                                       "--config", config, "--name", "syncbus-" + name])

    def stop(self, name):
        self.procs.stop(name)
        self.metrics.pop(name, None)

    def pid(self, name):
        return self.procs.children[name].pid

    def consumers(self):
        return sorted(n for n in self.metrics if n.startswith("consumer"))

    def scrape(self, name):
        return scrape(self.admin_url(name) + "/metrics")

    def wait_ready(self, names, timeout=300):
        deadline = time.monotonic() + timeout
        pending = set(names)
        why = {}
        while pending:
            for name in list(pending):
                self.procs.check_alive(name)
                try:
                    with urllib.request.urlopen(self.admin_url(name) + "/readyz", timeout=5) as r:
                        if r.status == 200:
                            pending.discard(name)
                except urllib.error.HTTPError as e:
                    why[name] = e.read().decode(errors="replace").strip()
                except (urllib.error.URLError, OSError) as e:
                    why[name] = str(e)
            if pending and time.monotonic() > deadline:
                raise RunError(f"not ready after {timeout}s: " +
                               "; ".join(f"{n} ({why.get(n, 'no answer')})" for n in sorted(pending)))
            if pending:
                time.sleep(0.2)


# ---------------------------------------------------------------------------------------------
# Brokers


class ClusterBroker:
    """A RabbitMQ cluster of several nodes (scripts/rabbitmq-cluster, as the chaos run starts it),
    with the calls the run makes of a single node (Broker)."""

    def __init__(self, root, work, nodes, version):
        self.rabbit = RabbitCluster(root, work, nodes, None, version)
        self.password_file = os.path.join(work, "broker-password")
        with open(os.open(self.password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(self.rabbit.password + "\n")

    def amqp_yaml(self):
        return self.rabbit.amqp_yaml(None, self.password_file, 10)

    def set_policy(self, policy):
        self.rabbit.set_policy(policy)

    def _call(self, method, path, body=None):
        return self.rabbit.api(method, path, body)

    # A single node's, through the cluster's management API.
    queue_depth = Broker.queue_depth
    purge = Broker.purge

    def node_envs(self):
        return [self.rabbit.node_env(k) for k in range(len(self.rabbit.node_dirs))]

    def stop(self):
        self.rabbit.stop(wipe=True)


def start_broker(args, work):
    if args.broker_nodes == 1:
        return Broker(ROOT, work)
    version = args.rabbitmq or os.environ.get("SYNCBUS_RABBITMQ", "3.10")
    note(f"starting a {args.broker_nodes}-node RabbitMQ {version} cluster (scripts/rabbitmq-cluster)")
    return ClusterBroker(ROOT, work, args.broker_nodes, version)


def broker_nodes(broker):
    """[(node name, Erlang VM pid, data directory)] of the broker's nodes."""
    envs = broker.node_envs() if isinstance(broker, ClusterBroker) else [broker.env]
    return [(e["SYNCBUS_BROKER_NODE"], int(e["SYNCBUS_BROKER_PID"]), os.path.join(e["SYNCBUS_BROKER_DIR"], "mnesia"))
            for e in envs]


def directory_bytes(path):
    total = 0
    for top, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(top, name)).st_blocks * 512
            except OSError:
                pass   # a segment file rolled over meanwhile
    return total


class Sampler:
    """Peaks of readings taken every `interval` seconds on a thread: a broker's memory and disk
    while its queues fill and drain."""

    def __init__(self, readings, interval=2.0):
        self.readings = readings   # name -> callable returning a number
        self.peaks = {}
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def _loop(self):
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def sample(self):
        for name, read in self.readings.items():
            try:
                value = read()
            except (OSError, ValueError):
                continue
            self.peaks[name] = max(self.peaks.get(name, 0), value)

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.sample()


# ---------------------------------------------------------------------------------------------
# Reports


class Report:
    """Rows of (figure, value, goal, verdict), printed as one table at the end."""

    def __init__(self):
        self.rows = []
        self.missed = 0

    def add(self, figure, value, goal="", met=None):
        verdict = "" if met is None else ("met" if met else "MISSED")
        if met is False:
            self.missed += 1
        self.rows.append((figure, value, goal, verdict))
        print(f"  {figure}: {value}" + (f"   goal {goal}: {verdict}" if goal else ""), flush=True)

    def print(self, title):
        """One line per figure: verdict first, so a MISSED goal stands out."""
        width = max(len(r[0]) for r in self.rows)
        print(f"\n==== {title}")
        for figure, value, goal, verdict in self.rows:
            tail = f"  (goal {goal})" if goal else ""
            print(f"{verdict or '-':<6}  {figure:<{width}}  {value}{tail}")
        print(f"==== {len(self.rows)} figures, {self.missed} goal(s) MISSED", flush=True)


def requests_table(counts, syncs, limit=12):
    """'update clustersyncs/status 1.00, ...' sorted by count, per sync."""
    items = sorted(((n, k) for k, n in counts.items() if n > 0), reverse=True)[:limit]
    return ", ".join(f"{verb} {res} {n / max(syncs, 1):.2f}" for n, (verb, res) in items) or "none"


def percentile(values, p):
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, int(round(p / 100.0 * (len(ordered) - 1)))))
    return ordered[index]


# ---------------------------------------------------------------------------------------------
# The pipeline's own view: publisher and consumer metrics


class Pipeline:
    def __init__(self, daemons, broker, clusters):
        self.d = daemons
        self.broker = broker
        self.clusters = clusters
        self.confirmed_at = None

    def publisher_state(self, name="publisher"):
        s = self.d.scrape(name)
        return {
            "in_sync": metric_sum(s, "syncbus_publisher_clusters", state="in_sync"),
            "outstanding": metric_sum(s, "syncbus_publisher_outstanding"),
            "pending": metric_sum(s, "syncbus_publisher_pending"),
            "enqueued": metric_sum(s, "syncbus_publisher_enqueued_total"),
            "rounds": metric_sum(s, "syncbus_publisher_reconcile_seconds_count"),
        }

    def consumer_totals(self):
        """Summed over the running consumers: settled deliveries, applies, apply seconds, clusters in
        flight."""
        totals = {"syncs": 0.0, "applied": 0.0, "applies": 0.0, "apply_sum": 0.0, "apply_count": 0.0,
                  "in_flight": 0.0}
        for name in self.d.consumers():
            s = self.d.scrape(name)
            totals["syncs"] += sum(v for n, l, v in s if n == "syncbus_consumer_deliveries_total"
                                   and l.get("outcome") != "retried")
            totals["applied"] += metric_sum(s, "syncbus_consumer_deliveries_total", outcome="applied")
            totals["applies"] += metric_sum(s, "syncbus_consumer_resources_applied_total")
            totals["apply_sum"] += metric_sum(s, "syncbus_consumer_apply_duration_seconds_sum")
            totals["apply_count"] += metric_sum(s, "syncbus_consumer_apply_duration_seconds_count")
            totals["in_flight"] += metric_sum(s, "syncbus_consumer_in_flight_clusters")
        return totals

    def settle(self, timeout=60):
        """Until no consumer has a cluster in flight and their counters stop moving: a consumer
        acks (and counts) a sync just after the status write that the publisher already saw."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            totals = self.consumer_totals()
            if totals["in_flight"] == 0 and totals == last:
                return
            last = totals
            time.sleep(0.3)

    def wait_converged(self, expect_enqueued=0, enqueued_base=0.0, timeout=3600, label="", publisher="publisher",
                       started=None, confirm=0, probe=None):
        """Until the publisher sees every cluster in sync with nothing outstanding or pending (and
        at least `expect_enqueued` requests confirmed since `enqueued_base`). Prints progress;
        returns the seconds since `started` (default: now). With `confirm`, self.confirmed_at is
        when the publisher first counted that many requests confirmed since `enqueued_base`, and
        self.probed_at_confirm what `probe()` returned then."""
        start = started if started is not None else time.monotonic()
        self.confirmed_at = None
        self.probed_at_confirm = None
        # A round counts its publishes as it sends them but sets the in-sync and outstanding
        # gauges at its end: believe them only from a round that began after the publishes.
        armed_at_round = None
        last_print = start
        last_applies = self.consumer_totals()["applies"]
        while True:
            for name in [publisher] + self.d.consumers():
                self.d.procs.check_alive(name)
            try:
                p = self.publisher_state(publisher)
            except OSError:
                p = None
            now = time.monotonic()
            if p and confirm and self.confirmed_at is None and p["enqueued"] - enqueued_base >= confirm:
                self.confirmed_at = now
                self.probed_at_confirm = probe() if probe else None
            if p and armed_at_round is None and p["enqueued"] - enqueued_base >= expect_enqueued:
                armed_at_round = p["rounds"]
            if p and armed_at_round is not None and p["rounds"] >= armed_at_round + 2 \
                    and p["in_sync"] >= self.clusters and p["outstanding"] == 0 and p["pending"] == 0:
                seconds = now - start
                self.settle()
                return seconds
            if now - last_print >= 5:
                applies = self.consumer_totals()["applies"]
                depth = self.broker.queue_depth("syncbus.work.change") + self.broker.queue_depth("syncbus.work.resync")
                state = (f"in sync {int(p['in_sync'])}/{self.clusters}, outstanding {int(p['outstanding'])}"
                         if p else "publisher not answering")
                note(f"{label} {now - start:5.0f}s: {state}, queued {depth}, "
                     f"{(applies - last_applies) / (now - last_print):.0f} applies/s")
                last_print, last_applies = now, applies
            if now - start > timeout:
                raise RunError(f"{label}: not converged after {timeout}s (logs: {self.d.procs.work})")
            time.sleep(0.25)


# ---------------------------------------------------------------------------------------------
# Edits


def edit_token():
    return "edit-" + "".join(random.choices(string.ascii_lowercase + string.digits, k=10))


def edit_set(hub, path, resource, value):
    """Sets data.payload of the set's first resource to `value` (GET + PUT); returns that
    resource's (namespace, name)."""
    obj = hub.get(path, resource)
    first = obj["spec"]["resources"][0]
    first.setdefault("data", {})["payload"] = value
    hub.update(path, obj, resource)
    return first["metadata"].get("namespace", "default"), first["metadata"]["name"]


# ---------------------------------------------------------------------------------------------
# Simulator mode


def sim_hub_requests(hub):
    stats = hub.get("/_sim/stats")
    return {(verb, res): n for verb, by_res in stats["hubRequests"].items() for res, n in by_res.items()}


def start_sim(procs, bin_dir, name, clusters, syncsets, sss, resources, latency, threads):
    work = procs.work
    kubeconfig = os.path.join(work, name + ".kubeconfig")
    p50, p99 = latency
    procs.start(name, [os.path.join(bin_dir, "tests", "kubesim", "syncbus-kubesim"),
                       "--clusters", str(clusters), "--syncsets", str(syncsets),
                       "--selector-syncsets", str(sss), "--resources", str(resources),
                       "--latency-p50-ms", str(p50), "--latency-p99-ms", str(p99),
                       "--threads", str(threads), "--log-level", "warn", "--host-per-cluster",
                       "--kubeconfig-out", kubeconfig])
    deadline = time.monotonic() + 900
    while not (os.path.exists(kubeconfig) and os.path.getsize(kubeconfig) > 0):
        procs.check_alive(name)
        if time.monotonic() > deadline:
            raise RunError(f"the simulator did not come up (log: {work}/{name}.log)")
        time.sleep(0.2)
    return kubeconfig, KubeClient(kubeconfig)


def consumer_yaml(args, prefetch=None):
    return (f"consumer: {{prefetch: {prefetch or args.prefetch}, maxAttempts: 8, "
            f"maxInFlight: {args.max_in_flight}, clusterLease: {{{claims_yaml(args.per_sync_claims)}}}}}\n")


def publisher_yaml(args, extra=""):
    """The publisher's section: its cap on outstanding requests and its publish rate let a start
    publish the whole fleet at once (at least 10,000 outstanding and 500/s, the defaults)."""
    n = args.clusters
    return (f"publisher: {{leaderElection: {{enabled: false}}, maxOutstanding: {max(10000, 2 * n)}, "
            f"maxPublishRate: {max(500, n // 10)}{extra}}}\n")


def topology_yaml(args):
    """Work queues that hold the whole fleet's requests twice over (at least the default 100,000)."""
    return f"topology: {{maxLength: {max(100000, 2 * args.clusters)}}}\n"


def apply_policies(args, d, broker):
    """The broker's policies for the run's topology, as `syncbusctl topology` prints them (as a
    deployment has them: the daemons cannot set policies)."""
    config = d._config("syncbusctl", "")
    out = subprocess.run([os.path.join(args.build_dir, "ctl", "syncbusctl"), "topology", "-c", config],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RunError(f"syncbusctl topology exited {out.returncode}: {out.stderr.strip()[-300:]}")
    for policy in json.loads(out.stdout)["policies"]:
        broker.set_policy(policy)


def verify_with_syncbusctl(args, kubeconfig, report):
    """`syncbusctl wait` over the whole fleet: it must find every cluster synced. Its own time and
    peak RSS are figures too (it reads the fleet from the hub, page by page)."""
    n = args.clusters
    argv = [os.path.join(args.build_dir, "ctl", "syncbusctl"), "wait", "--kubeconfig", kubeconfig,
            "--timeout", "10m", "-q", "-o", "json"]
    started = time.monotonic()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = Sampler({"rss": lambda: memory_kib(child.pid)[1]}, interval=0.5).start()
    out, err = child.communicate(timeout=900)
    peak.stop()
    seconds = time.monotonic() - started
    try:
        result = json.loads(out)
    except ValueError:
        raise RunError(f"syncbusctl wait exited {child.returncode} without its JSON summary: {err.strip()[-300:]}")
    synced = int(result.get("synced", 0))
    report.add("verified: syncbusctl wait", f"synced {synced}/{result.get('clusters')} clusters, "
               f"failing {result.get('failing')}, pending {result.get('pending')}, exit {child.returncode}; "
               f"{seconds:.1f} s, peak RSS {peak.peaks.get('rss', 0) / 1024:.0f} MiB",
               f"all {n} synced", child.returncode == 0 and synced == n)


def run_simulator(args, procs, broker, report):
    n = args.clusters
    large = n >= GOAL_LARGE_FLEET
    note(f"simulator: {n} clusters x ({args.syncsets} SyncSets + {args.selector_syncsets} SelectorSyncSets)"
         f" x {args.resources} ConfigMaps, target latency p50 {args.latency[0]} ms p99 {args.latency[1]} ms; "
         f"{args.consumers} consumers, a {args.broker_nodes}-node broker")
    t0 = time.monotonic()
    kubeconfig, hub = start_sim(procs, args.build_dir, "kubesim", n, args.syncsets, args.selector_syncsets,
                                args.resources, args.latency, args.sim_threads)
    note(f"fleet ready in {time.monotonic() - t0:.1f}s")
    d = Daemons(procs, args.build_dir, broker, kubeconfig, publisher_yaml(args), consumer_yaml(args),
                common=topology_yaml(args))
    apply_policies(args, d, broker)
    pipe = Pipeline(d, broker, n)
    nodes = broker_nodes(broker)
    readings = {}
    for name, pid, data in nodes:
        readings[name + " rss"] = lambda pid=pid: memory_kib(pid)[0]
        readings[name + " disk"] = lambda data=data: directory_bytes(data)
    broker_peaks = Sampler(readings).start()

    # 1. Converge from nothing synced: the consumers first (their hub mirrors listed), then the
    # publisher, timed until the broker confirmed a request for every cluster.
    print(f"\n---- converge: {n} clusters, {args.consumers} consumers (prefetch {args.prefetch})", flush=True)
    before = sim_hub_requests(hub)
    start = time.monotonic()
    for i in range(1, args.consumers + 1):
        d.start_consumer(f"consumer-{i}")
    d.wait_ready(d.consumers(), timeout=1800)
    listed = time.monotonic() - start
    mirrors = {name: memory_kib(d.pid(name))[0] for name in d.consumers()}

    def cpu_by_part():
        parts = {"consumers": sum(cpu_seconds(d.pid(c)) for c in d.consumers()),
                 "broker": sum(cpu_seconds(pid) for _, pid, _ in nodes),
                 "simulator": cpu_seconds(procs.children["kubesim"].pid)}
        if "publisher" in procs.children:
            parts["publisher"] = cpu_seconds(d.pid("publisher"))
        return parts

    cpu_before = cpu_by_part()
    publisher_started = time.monotonic()
    d.start_publisher()
    d.wait_ready(["publisher"], timeout=1800)
    cache_synced = time.monotonic() - publisher_started
    cpu_at_cache_synced = cpu_by_part()
    seconds = pipe.wait_converged(label="converge", started=start, confirm=n, probe=cpu_by_part)
    confirmed = pipe.confirmed_at - publisher_started if pipe.confirmed_at else float("nan")
    totals = pipe.consumer_totals()
    after = sim_hub_requests(hub)
    requests = subtract(after, before)
    syncs = totals["syncs"]
    report.add("converge: time", f"{seconds:.1f} s for {n} clusters ({n / seconds:.1f} clusters/s; "
               f"the consumers' hub mirrors listed in {listed:.1f} s)")
    report.add("converge: applies/s", f"{totals['applies'] / seconds:.0f} ({int(totals['applies'])} applies)")
    consumer_cpu = 0.0
    for name in d.consumers():
        pid = d.pid(name)
        consumer_cpu += cpu_seconds(pid)
        report.add(f"converge: {name} CPU", f"{cpu_seconds(pid):.1f} s "
                   f"({1000 * cpu_seconds(pid) / max(totals['applies'], 1) * len(d.consumers()):.2f} ms per apply)")
    report.add("converge: consumer CPU per cluster sync", f"{1000 * consumer_cpu / max(syncs, 1):.1f} ms "
               f"({consumer_cpu:.0f} s over {int(syncs)} syncs)")
    hub_total = sum(requests.values())
    report.add("converge: hub requests per sync (incl. start-up lists and watches)",
               f"{hub_total / max(syncs, 1):.2f} over {int(syncs)} syncs: {requests_table(requests, syncs)}")

    # 2. Memory with the caches full, the broker at its fullest.
    pub_rss, pub_hwm = memory_kib(d.pid("publisher"))
    per_cluster = pub_hwm / n
    report.add("publisher: all requests confirmed", f"{confirmed:.1f} s after its start ({n} requests)",
               f"<= {GOAL_CONFIRM_SECONDS:g} s at {GOAL_LARGE_FLEET:,} clusters" if large else "",
               (confirmed <= GOAL_CONFIRM_SECONDS) if large else None)
    if pipe.probed_at_confirm:
        # Whether the machine had CPU to spare while the publisher listed and published: the
        # floor of that time on this machine.
        def cpu_between(first, then, seconds):
            used = {k: v - first.get(k, 0.0) for k, v in then.items()}
            return (f"{sum(used.values()):.1f} s over {seconds:.1f} s "
                    f"({sum(used.values()) / seconds:.2f} of {os.cpu_count()} CPUs): " +
                    ", ".join(f"{k} {v:.1f} s" for k, v in sorted(used.items(), key=lambda kv: -kv[1])))
        report.add("publisher: CPU used until every request was confirmed",
                   cpu_between(cpu_before, pipe.probed_at_confirm, confirmed))
        # The two parts of that time: listing the hub (the publisher is ready once its cache
        # synced), then deciding and publishing.
        report.add("publisher: of which listing the hub, until its cache synced",
                   cpu_between(cpu_before, cpu_at_cache_synced, cache_synced))
        report.add("publisher: of which deciding and publishing, until every request was confirmed",
                   cpu_between(cpu_at_cache_synced, pipe.probed_at_confirm, confirmed - cache_synced))
    goal = f"<= {GOAL_PUBLISHER_KIB_PER_CLUSTER:g} KiB per cluster at {GOAL_LARGE_FLEET:,} clusters"
    report.add("publisher: peak RSS", f"{pub_hwm / 1024:.0f} MiB, {per_cluster:.2f} KiB per cluster "
               f"(now {pub_rss / 1024:.0f} MiB; CPU {cpu_seconds(d.pid('publisher')):.1f} s)",
               goal if large else "", (per_cluster <= GOAL_PUBLISHER_KIB_PER_CLUSTER) if large else None)
    peak = 0
    for name in d.consumers():
        rss, hwm = memory_kib(d.pid(name))
        peak = max(peak, hwm)
        report.add(f"memory: {name} RSS listed / now / peak",
                   f"{mirrors[name] / 1024:.0f} / {rss / 1024:.0f} / {hwm / 1024:.0f} MiB")
    goal_mib = GOAL_LARGE_CONSUMER_MIB if large else GOAL_CONSUMER_MIB
    report.add(f"memory: consumer peak RSS with the caches full ({n} clusters)", f"{peak / 1024:.0f} MiB",
               f"<= {goal_mib} MiB at {GOAL_LARGE_FLEET if large else 10000:,} clusters" if n >= 10000 else "",
               (peak / 1024 <= goal_mib) if n >= 10000 else None)
    broker_peaks.stop()
    for name, _, _ in nodes:
        report.add(f"broker: {name} peak RSS / data on disk",
                   f"{broker_peaks.peaks.get(name + ' rss', 0) / 1024:.0f} MiB / "
                   f"{broker_peaks.peaks.get(name + ' disk', 0) / 2**20:.0f} MiB")
    sim_rss, sim_hwm = memory_kib(procs.children["kubesim"].pid)
    report.add("simulator: RSS now / peak", f"{sim_rss / 1024:.0f} / {sim_hwm / 1024:.0f} MiB")

    # 3. Every cluster synced, as an operator's barrier sees it.
    verify_with_syncbusctl(args, kubeconfig, report)

    # 4. Steady state: one SelectorSyncSet edit reaches every cluster.
    if args.steady_state and args.selector_syncsets > 0:
        steady_state(d, pipe, hub, n, report)

    # 4b. A preview of the next edit of that set, beside the sync of one (bench_preview.py).
    if args.preview and args.selector_syncsets > 0:
        bench_preview.preview_phase(args, d, pipe, hub, n, report, edit_set, edit_token)

    # 4c. The next edit rolled out in waves, beside one at once (bench_rollout.py).
    if args.rollout and args.selector_syncsets > 0:
        bench_rollout.rollout_phase(d, pipe, hub, n, report, edit_set, edit_token, bench_preview.since,
                                    bench_preview.hub_counts, bench_preview.table)

    # 5. Edit latency while the whole fleet resyncs.
    if args.edits > 0:
        edit_latency_during_resync(args, d, pipe, hub, broker, report)

    d.stop("publisher")
    for name in d.consumers():
        d.stop(name)
    procs.stop("kubesim")

    # 6. Scale-out.
    if args.scale_out:
        scale_out(args, procs, broker, report)


def steady_state(d, pipe, hub, n, report):
    print("\n---- steady state: one SelectorSyncSet edited, every cluster syncs it", flush=True)
    base = pipe.publisher_state()
    totals0 = pipe.consumer_totals()
    before = sim_hub_requests(hub)
    own_before = dict(hub.sent)
    start = time.monotonic()
    edit_set(hub, f"{HIVE}/selectorsyncsets/fleet-sss-00", "selectorsyncsets", edit_token())
    seconds = pipe.wait_converged(expect_enqueued=n, enqueued_base=base["enqueued"], label="edit wave",
                                  started=start)
    totals1 = pipe.consumer_totals()
    own = subtract(hub.sent, own_before)
    requests = subtract(sim_hub_requests(hub), before, own)
    syncs = totals1["syncs"] - totals0["syncs"]
    per_sync = sum(requests.values()) / max(syncs, 1)
    report.add("steady state: wave time", f"{seconds:.1f} s for {int(syncs)} syncs")
    report.add("steady state: hub requests per cluster sync", f"{per_sync:.2f}: {requests_table(requests, syncs)}",
               f"<= {GOAL_REQUESTS_PER_SYNC:g}", per_sync <= GOAL_REQUESTS_PER_SYNC)


def edit_latency_during_resync(args, d, pipe, hub, broker, report):
    n = args.clusters
    print(f"\n---- edit latency during a full resync: publisher restarted with resyncInterval 1s, "
          f"{args.edits} SyncSet edits", flush=True)
    d.stop("publisher")
    d.start_publisher(publisher_yaml=publisher_yaml(args, ", resyncInterval: 1s, resyncJitter: 0"))
    d.wait_ready(["publisher"], timeout=1800)
    # Wait until the resync lane holds a real backlog.
    want = max(1, min(n // 4, 2000))
    deadline = time.monotonic() + 300
    while broker.queue_depth("syncbus.work.resync") < want:
        d.procs.check_alive("publisher")
        if time.monotonic() > deadline:
            raise RunError(f"the resync lane never reached {want} messages")
        time.sleep(0.5)
    totals0 = pipe.consumer_totals()
    rng = random.Random(7)
    targets = rng.sample(range(n), min(args.edits, n))
    names = hub.get("/_sim/clusters")["clusters"]
    results, depths, missing = [], [], []
    lock = threading.Lock()

    def watch(cluster, ns, name, token, started):
        seconds = bench_preview.edit_seen(hub, cluster, ns, name, token, started)
        with lock:
            results.append(seconds)
            if seconds == float("inf"):
                missing.append(f"{cluster}: {ns}/{name}")

    threads = []
    for i in targets:
        cluster = names[i]
        token = edit_token()
        depths.append(broker.queue_depth("syncbus.work.resync"))
        started = time.monotonic()
        ns, name = edit_set(hub, f"{HIVE}/namespaces/{cluster}/syncsets/{cluster}-ss-00", "syncsets", token)
        t = threading.Thread(target=watch, args=(cluster, ns, name, token, started), daemon=True)
        t.start()
        threads.append(t)
        time.sleep(args.edit_interval)
    for t in threads:
        t.join()
    totals1 = pipe.consumer_totals()
    resync_applies_s = (totals1["applies"] - totals0["applies"])
    apply_mean = (totals1["apply_sum"] - totals0["apply_sum"]) / max(totals1["apply_count"] - totals0["apply_count"], 1)
    apply_time = args.resources * apply_mean   # the edited set: its resources one after another
    goal = GOAL_EDIT_SECONDS + apply_time
    p50, p99 = percentile(results, 50), percentile(results, 99)
    report.add("edit latency during resync: resync lane depth at the edits",
               f"min {min(depths)}, median {int(statistics.median(depths))} messages; "
               f"{resync_applies_s:.0f} applies meanwhile")
    if missing:
        note("edits not seen on their cluster within 300 s: " + ", ".join(missing))
    report.add("edit latency during resync: p50", f"{p50:.2f} s over {len(results)} edits",
               f"<= 5 s + apply time ({apply_time:.2f} s) = {goal:.2f} s", p50 <= goal)
    report.add("edit latency during resync: p99", f"{p99:.2f} s (max {max(results):.2f} s)",
               f"<= {goal:.2f} s", p99 <= goal)
    # Back to normal: the resync backlog is not needed any more.
    d.stop("publisher")
    broker.purge("syncbus.work.resync")


def scale_out(args, procs, broker, report):
    n = args.scale_clusters
    print(f"\n---- scale-out: {n} clusters, prefetch {args.scale_prefetch} per consumer (latency-bound), "
          f"an edit of one SelectorSyncSet synced by 1, 2 and 4 consumers", flush=True)
    kubeconfig, hub = start_sim(procs, args.build_dir, "kubesim-scale", n, args.syncsets, args.selector_syncsets,
                                args.resources, args.scale_latency, args.sim_threads)
    d = Daemons(procs, args.build_dir, broker, kubeconfig, "publisher: {leaderElection: {enabled: false}}\n",
                consumer_yaml(args, args.scale_prefetch))
    pipe = Pipeline(d, broker, n)
    for i in range(1, 5):
        d.start_consumer(f"consumer-{i}")
    d.start_publisher()
    d.wait_ready(["publisher"] + d.consumers())
    pipe.wait_converged(label="scale-out fleet")
    rates = {}
    for count in (1, 2, 4):
        for i in range(count + 1, 5):
            if f"consumer-{i}" in d.metrics:
                d.stop(f"consumer-{i}")
        for i in range(1, count + 1):
            if f"consumer-{i}" not in d.metrics:
                d.start_consumer(f"consumer-{i}")
        d.wait_ready(d.consumers())
        base = pipe.publisher_state()
        totals0 = pipe.consumer_totals()
        edit_set(hub, f"{HIVE}/selectorsyncsets/fleet-sss-{count % max(args.selector_syncsets, 1):02d}",
                 "selectorsyncsets", edit_token())
        seconds = pipe.wait_converged(expect_enqueued=n, enqueued_base=base["enqueued"], label=f"{count} consumer(s)")
        syncs = pipe.consumer_totals()["syncs"] - totals0["syncs"]
        rates[count] = syncs / seconds
        report.add(f"scale-out: {count} consumer(s)",
                   f"{rates[count]:.1f} cluster syncs/s ({int(syncs)} in {seconds:.1f} s)")
    for count in (2, 4):
        ratio = rates[count] / count / rates[1]
        report.add(f"scale-out: throughput per consumer at {count}, relative to 1", f"{100 * ratio:.0f}%",
                   f">= {100 * GOAL_SCALE_OUT:.0f}%", ratio >= GOAL_SCALE_OUT)
    d.stop("publisher")
    for name in d.consumers():
        d.stop(name)
    procs.stop("kubesim-scale")


# ---------------------------------------------------------------------------------------------
# Real API server mode


# ---------------------------------------------------------------------------------------------


def latency_arg(text):
    try:
        p50, p99 = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected P50,P99 in milliseconds, e.g. 27,230; got '{text}'")
    if p50 < 0 or p99 < p50:
        raise argparse.ArgumentTypeError(f"expected 0 <= P50 <= P99; got '{text}'")
    return p50, p99


def positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got '{text}'")
    return value


def parse_args(argv):
    p = argparse.ArgumentParser(prog="bench-fleet", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--real-apiserver", action="store_true",
                   help="real hub and target kube-apiservers from $KUBEBUILDER_ASSETS (default fleet: 100 clusters "
                        "in one namespace, 3 SyncSets x 2 ConfigMaps each + 1 SelectorSyncSet)")
    p.add_argument("--clusters", type=positive,
                   help=f"clusters (default 10000; 100 with --real-apiserver). From {LARGE_FLEET:,} on, the "
                        "defaults marked LARGE are those of a large fleet (its goals hold at "
                        f"{GOAL_LARGE_FLEET:,}: publisher memory and confirm time, consumer memory, syncbusctl wait)")
    p.add_argument("--syncsets", type=int, help="SyncSets per cluster (default 2; LARGE 1)")
    p.add_argument("--selector-syncsets", type=positive, help="SelectorSyncSets (default 8; LARGE 1)")
    p.add_argument("--resources", type=positive, help="ConfigMaps per set (default 10; LARGE 3)")
    p.add_argument("--consumers", type=positive, help="consumer processes (default 2; LARGE 4)")
    p.add_argument("--broker-nodes", type=positive,
                   help="RabbitMQ nodes: 1 (scripts/rabbitmq-node) or a cluster (scripts/rabbitmq-cluster; "
                        "default 1; LARGE 3)")
    p.add_argument("--rabbitmq", choices=("3.10", "4.0"),
                   help="RabbitMQ version of a cluster of nodes (default $SYNCBUS_RABBITMQ, else 3.10)")
    p.add_argument("--prefetch", type=positive, default=20, help="consumer.prefetch (default 20)")
    p.add_argument("--max-in-flight", type=positive, default=2000, help="consumer.maxInFlight (default 2000)")
    p.add_argument("--per-sync-claims", action="store_true",
                   help="the consumers give each cluster claim back after its sync (consumer.clusterLease.sticky: "
                        "false); by default they keep them while they live (liveness Leases in the namespace syncbus)")
    p.add_argument("--latency", type=latency_arg, default=(27, 230),
                   help="target latency P50,P99 in ms (default 27,230, as measured on real clusters)")
    p.add_argument("--sim-threads", type=positive, default=2, help="simulator threads (default 2)")
    p.add_argument("--edits", type=int, default=20, help="SyncSet edits during the full resync (default 20; 0 skips)")
    p.add_argument("--edit-interval", type=float, default=0.5, help="seconds between those edits (default 0.5)")
    p.add_argument("--steady-state", action=argparse.BooleanOptionalAction,
                   help="one SelectorSyncSet edit synced by the whole fleet, its hub requests per sync "
                        "(default on; LARGE off)")
    p.add_argument("--preview", action=argparse.BooleanOptionalAction,
                   help="syncbusctl preview of a SelectorSyncSet edit on every cluster beside its sync: CPU per "
                        "object, hub requests, an edit's latency meanwhile (default on; LARGE off)")
    p.add_argument("--rollout", action=argparse.BooleanOptionalAction,
                   help="a SelectorSyncSet edit rolled out in three waves beside one at once: its hub requests "
                        "(default on)")
    p.add_argument("--scale-out", action=argparse.BooleanOptionalAction,
                   help="the scale-out runs (default on; LARGE off)")
    p.add_argument("--scale-clusters", type=positive, default=200, help="fleet of the scale-out runs (default 200)")
    p.add_argument("--scale-prefetch", type=positive, default=4,
                   help="prefetch per consumer in the scale-out runs (default 4: latency-bound)")
    p.add_argument("--scale-latency", type=latency_arg, default=(100, 400),
                   help="target latency of the scale-out runs (default 100,400)")
    p.add_argument("--idle-seconds", type=float, default=10,
                   help="the window at rest right after converge, --real-apiserver; it must end before the first "
                        "reapply, one --reapply-interval after converge began (default 10)")
    p.add_argument("--edit-window", type=positive, default=20,
                   help="seconds measured from the edit, --real-apiserver (default 20)")
    p.add_argument("--reapply-interval", type=positive, default=60,
                   help="full reapply interval of both systems, seconds, --real-apiserver (default 60); converge, "
                        "rest and the edit window must fit in 0.9 of it less 5 s, else the report says that those "
                        "windows hold periodic reapplies and what interval would keep them out")
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"), help="where the binaries are (default build/)")
    p.add_argument("--keep-logs", action="store_true",
                   help="keep the work directory (logs, configs) after a run that completed; kept anyway on errors")
    p.add_argument("--strict", action="store_true", help="exit 1 when a goal is MISSED (default: only on errors)")
    args = p.parse_args(argv)
    if args.clusters is None:
        args.clusters = 100 if args.real_apiserver else 10000
    large = args.clusters >= LARGE_FLEET and not args.real_apiserver
    for name, default, if_large in (("syncsets", 2, 1), ("selector_syncsets", 8, 1), ("resources", 10, 3),
                                    ("consumers", 2, 4), ("broker_nodes", 1, 3), ("steady_state", True, False),
                                    ("preview", True, False), ("rollout", True, True),
                                    ("scale_out", True, False)):
        if getattr(args, name) is None:
            setattr(args, name, if_large if large else default)
    if args.syncsets < 0 or args.edits < 0:
        p.error("--syncsets and --edits cannot be negative")
    args.build_dir = os.path.abspath(args.build_dir)
    return args


def _terminate(signum, frame):
    raise KeyboardInterrupt   # unwinds through main's cleanup: every child and the broker stop


def main(argv):
    signal.signal(signal.SIGTERM, _terminate)
    args = parse_args(argv)
    work = make_work_dir()
    procs = Processes(work)
    broker = None
    report = Report()
    note(f"work directory {work}")
    try:
        broker = start_broker(args, work)
        if args.real_apiserver:
            bench_fleet_real.run_real_apiserver(args, procs, broker, report, Daemons, consumer_yaml(args))
        else:
            run_simulator(args, procs, broker, report)
    except RunError as e:
        note(f"error: {e}")
        if report.rows:
            report.print("bench-fleet: figures so far")
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        procs.stop_all()
        if broker:
            broker.stop()
    mode = "real kube-apiserver hub" if args.real_apiserver else "simulator"
    if not args.keep_logs:
        shutil.rmtree(work, ignore_errors=True)
    report.print(f"bench-fleet ({mode}, {args.clusters} clusters, {args.consumers} consumers, "
                 f"{args.broker_nodes} broker node(s), "
                 f"{os.cpu_count()} CPUs" + (f"; logs: {work})" if args.keep_logs else ")"))
    return 1 if args.strict and report.missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
