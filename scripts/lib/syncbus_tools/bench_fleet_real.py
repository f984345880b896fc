"""scripts/bench-fleet --real-apiserver: what a sync costs a real hub, syncbus beside upstream Hive.

The same fleet is written to a fresh pair of real kube-apiservers (scripts/envtest: a hub and a
target that holds every cluster as a namespace) for each system: first syncbus (one publisher,
--consumers consumers, a private RabbitMQ node), then upstream Hive's clustersync controller
(../shared/hive/manager, or $SYNCBUS_HIVE_DIR; left out, with a line that says so, where it is
absent). Each system, measured from the hub (apiserver_request_total by verb and resource, less
this benchmark's own reads; CPU of the hub's apiserver and etcd from /proc):
  - converge: from its start until every cluster's ClusterSync shows every set applied;
  - one edit: the SelectorSyncSet, which matches half the clusters, edited; a fixed window
    (--edit-window) from the edit;
  - at rest: a short window (--idle-seconds) right after converge, before any reapply is due: what
    the system asks of the hub with nothing to sync (leader renewals, watches);
  - a full reapply: both run with a reapply interval of --reapply-interval; the window after
    that in which every cluster is reapplied once.
After syncbus's windows, on its hub with syncbus stopped: the converge floor, the requests no
converge can do without made by this benchmark alone on one kept-alive connection, for every
cluster a copy of what syncbus stored (ClusterSync created and its status written,
ClusterSyncLease created) and a GET of its kubeconfig Secret: what these cost the hub with
nothing else running and nothing watching, beside the converge CPU goal.
The edit and the reapply are also given net of the rest window's rate, per verb and resource: the
part of their cost that comes with the clusters synced, not with the time the window lasts.
Then the two side by side, each syncbus figure beside its goal (issue: a change costs the hub one
write per cluster; converging costs it less than Hive)."""

import base64
import fcntl
import http.client
import json
import math
import os
import subprocess
import time
import urllib.parse

from syncbus_tools import ROOT
from syncbus_tools.testbed import (KubeClient, RunError, cpu_seconds, memory_kib, parse_metrics, read_env_file,
                                   subtract)

HIVE = "/apis/hive.openshift.io/v1"
HIVE_INTERNAL = "/apis/hiveinternal.openshift.io/v1alpha1"
NAMESPACE = "bench-fleet"
FLOOR_NAMESPACE = "bench-floor"   # where the converge floor's copies go
SSS = "bench-fleet-sss"
SELECTED = "syncbus.io/bench-sss"   # the label the SelectorSyncSet selects: half the clusters

GOAL_EDIT_PER_CLUSTER = 1.1       # hub requests per cluster synced, one edit
GOAL_REAPPLY_PER_CLUSTER = 2.1    # hub requests per cluster synced, a full reapply
GOAL_CONVERGE_CPU_RATIO = 0.5     # syncbus's hub CPU over Hive's, converge


def note(message):
    print(f"bench-fleet: {message}", flush=True)


# ---------------------------------------------------------------------------------------------
# The hub: its fleet and its own view of what it served


def hub_request_counts(hub):
    """apiserver_request_total by (verb, resource[/subresource]), resource requests only."""
    counts = {}
    verbs = {"POST": "create", "PUT": "update"}
    for name, labels, value in parse_metrics(hub.get_text("/metrics")):
        if name != "apiserver_request_total" or not labels.get("resource"):
            continue
        verb = verbs.get(labels.get("verb", ""), labels.get("verb", "").lower())
        resource = labels["resource"] + ("/" + labels["subresource"] if labels.get("subresource") else "")
        counts[(verb, resource)] = counts.get((verb, resource), 0) + value
    return counts


# What Hive's controllers write on a running cluster's ClusterDeployment: Hive syncs nothing else.
RUNNING_STATUS = {"installedTimestamp": "2024-01-01T00:00:00Z",
                  "conditions": [{"type": "Unreachable", "status": "False", "reason": "ClusterReachable",
                                  "message": "cluster is reachable", "lastTransitionTime": "2024-01-01T00:00:00Z",
                                  "lastProbeTime": "2024-01-01T00:00:00Z"}]}


def cluster_name(i):
    return f"cluster-{i:04d}"


def selected(i):
    return i % 2 == 0


def real_fleet(hub, target, target_kubeconfig, n):
    """n clusters in one hub namespace: ClusterDeployment, kubeconfig Secret, 3 SyncSets of 2
    ConfigMaps each; one SelectorSyncSet of 2 ConfigMaps for every other cluster; a namespace per
    cluster on the target."""
    with open(target_kubeconfig, "rb") as f:
        kubeconfig = base64.b64encode(f.read()).decode()
    shared = "bench-fleet-shared"
    for ns in (NAMESPACE, "syncbus"):   # "syncbus": the publisher's leader-election Lease (deploy/namespace.yaml)
        hub.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    target.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": shared}})

    def cm(name, ns, value):
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
                "data": {"payload": value, "owner": "bench-fleet"}}

    for i in range(n):
        name = cluster_name(i)
        target.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        labels = {"syncbus.io/bench": "fleet"}
        if selected(i):
            labels[SELECTED] = "yes"
        cd = {
            "apiVersion": "hive.openshift.io/v1", "kind": "ClusterDeployment",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
            "spec": {"baseDomain": "bench.syncbus.io", "clusterName": name, "platform": {"none": {}},
                     "installed": True,
                     "clusterMetadata": {"clusterID": f"5e1f0000-0000-4000-8000-{i:012d}", "infraID": name,
                                         "adminKubeconfigSecretRef": {"name": name + "-admin-kubeconfig"}}}}
        hub.create(f"{HIVE}/namespaces/{NAMESPACE}/clusterdeployments", cd)
        # Installed and reachable, as Hive's controllers mark a running cluster.
        hub.request("PATCH", f"{HIVE}/namespaces/{NAMESPACE}/clusterdeployments/{name}/status",
                    {"status": RUNNING_STATUS}, content_type="application/merge-patch+json")
        hub.create(f"/api/v1/namespaces/{NAMESPACE}/secrets", {
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name + "-admin-kubeconfig", "namespace": NAMESPACE},
            "data": {"kubeconfig": kubeconfig}})
        for s in range(3):
            hub.create(f"{HIVE}/namespaces/{NAMESPACE}/syncsets", {
                "apiVersion": "hive.openshift.io/v1", "kind": "SyncSet",
                "metadata": {"name": f"{name}-ss-{s}", "namespace": NAMESPACE},
                "spec": {"clusterDeploymentRefs": [{"name": name}], "resourceApplyMode": "Sync",
                         "resources": [cm(f"ss-{s}-cm-{r}", name, "v1") for r in range(2)]}})
    hub.create(f"{HIVE}/selectorsyncsets", {
        "apiVersion": "hive.openshift.io/v1", "kind": "SelectorSyncSet", "metadata": {"name": SSS},
        "spec": {"clusterDeploymentSelector": {"matchLabels": {SELECTED: "yes"}},
                 "resourceApplyMode": "Upsert",
                 "resources": [cm(f"sss-cm-{r}", shared, "v1") for r in range(2)]}})


def edit_sss(hub):
    """Changes the SelectorSyncSet's ConfigMaps; returns its new generation."""
    path = f"{HIVE}/selectorsyncsets/{SSS}"
    _, sss = hub.request("GET", path)
    hub.count("get", "selectorsyncsets")
    for r in sss["spec"]["resources"]:
        r["data"]["payload"] = f"edited-{time.time_ns()}"
    _, stored = hub.request("PUT", path, sss)
    hub.count("update", "selectorsyncsets")
    return stored["metadata"]["generation"]


class KeptAlive:
    """Requests to `hub` on one kept-alive connection. KubeClient opens a connection per request,
    and the TLS handshake of each costs the hub CPU that a measurement window counts."""

    def __init__(self, hub, what):
        self.what = what
        url = urllib.parse.urlsplit(hub.server)
        self.conn = (http.client.HTTPSConnection(url.hostname, url.port, context=hub.context)
                     if url.scheme == "https" else http.client.HTTPConnection(url.hostname, url.port))
        self.headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if hub.token:
            self.headers["Authorization"] = "Bearer " + hub.token

    def call(self, method, path, body=None):
        self.conn.request(method, path, None if body is None else json.dumps(body), self.headers)
        response = self.conn.getresponse()
        text = response.read()
        if response.status not in (200, 201):
            raise RunError(f"{self.what}: {method} {path}: HTTP {response.status} {text[:300]!r}")
        return json.loads(text)

    def close(self):
        self.conn.close()


def pending_clusters(hub, conn, n, sss_generation):
    """Clusters whose ClusterSync does not yet show every set applied at its current generation
    (the SyncSets are never edited: generation 1); this reads the hub (counted as our own) on
    `conn` (KeptAlive), from its watch cache: asking once a second costs the hub little of
    the window it measures, whichever system it waits for, and as little the longer it waits."""
    synced = conn.call("GET", f"{HIVE_INTERNAL}/namespaces/{NAMESPACE}/clustersyncs?resourceVersion=0")
    hub.count("list", "clustersyncs")
    by_name = {cs["metadata"]["name"]: cs.get("status") or {} for cs in synced["items"]}

    def done(entries, name, generation):
        return any(e.get("name") == name and e.get("observedGeneration") == generation
                   and e.get("result") == "Success" for e in entries or [])

    pending = 0
    for i in range(n):
        status = by_name.get(cluster_name(i))
        if status is None or not all(done(status.get("syncSets"), f"{cluster_name(i)}-ss-{s}", 1)
                                     for s in range(3)):
            pending += 1
        elif selected(i) and not done(status.get("selectorSyncSets"), SSS, sss_generation):
            pending += 1
    return pending


def wait_fleet(hub, n, sss_generation, timeout, label, check_alive):
    start = time.monotonic()
    conn = KeptAlive(hub, label)
    try:
        while True:
            check_alive()
            pending = pending_clusters(hub, conn, n, sss_generation)
            if pending == 0:
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                raise RunError(f"{label}: {pending} of {n} clusters not synced after {timeout} s")
            time.sleep(1)
    finally:
        conn.close()


def lease_count(hub):
    _, leases = hub.request("GET", f"{HIVE_INTERNAL}/namespaces/{NAMESPACE}/clustersyncleases")
    hub.count("list", "clustersyncleases")
    return len(leases["items"])


class HubMeter:
    """The hub's CPU (apiserver + etcd) and requests between two readings, less our own."""

    def __init__(self, hub, pids):
        self.hub = hub
        self.pids = pids

    def read(self):
        return {"time": time.monotonic(), "cpu": sum(cpu_seconds(p) for p in self.pids),
                "requests": hub_request_counts(self.hub), "own": dict(self.hub.sent)}

    def delta(self, a, b):
        own = subtract(b["own"], a["own"])
        return {"seconds": b["time"] - a["time"], "cpu": b["cpu"] - a["cpu"],
                "requests": subtract(b["requests"], a["requests"], own)}


class Envtest:
    """A fresh hub and target pair (scripts/envtest) in its own directory."""

    def __init__(self, work, name):
        self.script = os.path.join(ROOT, "scripts", "envtest")
        self.dir = os.path.join(work, f"envtest-{name}")
        with open(os.path.join(work, f"envtest-{name}.log"), "wb") as log:
            if subprocess.call([self.script, "start", "--dir", self.dir], stdout=log, stderr=subprocess.STDOUT) != 0:
                raise RunError(f"scripts/envtest start failed (log: {work}/envtest-{name}.log)")
        self.env = read_env_file(os.path.join(self.dir, "envtest.env"))
        self.hub_kubeconfig = self.env["SYNCBUS_ENVTEST_HUB_KUBECONFIG"]
        self.hub = KubeClient(self.hub_kubeconfig)
        self.target = KubeClient(self.env["SYNCBUS_ENVTEST_TARGET_KUBECONFIG"])
        self.meter = HubMeter(self.hub, [int(self.env["SYNCBUS_ENVTEST_HUB_PID"]),
                                         int(self.env["SYNCBUS_ENVTEST_HUB_ETCD_PID"])])

    def stop(self):
        subprocess.call([self.script, "stop", "--dir", self.dir], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)


def converge_floor(env, n):
    """The converge floor's window (module docstring) on `env`'s hub, syncbus stopped."""
    hub = env.hub
    _, syncs = hub.request("GET", f"{HIVE_INTERNAL}/namespaces/{NAMESPACE}/clustersyncs")
    _, leases = hub.request("GET", f"{HIVE_INTERNAL}/namespaces/{NAMESPACE}/clustersyncleases")
    leases = {lease["metadata"]["name"]: lease for lease in leases["items"]}
    hub.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FLOOR_NAMESPACE}})
    conn = KeptAlive(hub, "converge floor")
    call = conn.call

    def copy(obj):
        return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "spec": obj.get("spec") or {},
                "metadata": {"name": obj["metadata"]["name"], "namespace": FLOOR_NAMESPACE}}

    time.sleep(2)   # the namespace settled
    a = env.meter.read()
    for cs in syncs["items"][:n]:
        name = cs["metadata"]["name"]
        call("POST", f"{HIVE_INTERNAL}/namespaces/{FLOOR_NAMESPACE}/clustersyncleases", copy(leases[name]))
        stored = call("POST", f"{HIVE_INTERNAL}/namespaces/{FLOOR_NAMESPACE}/clustersyncs", copy(cs))
        stored["status"] = cs.get("status") or {}
        call("PUT", f"{HIVE_INTERNAL}/namespaces/{FLOOR_NAMESPACE}/clustersyncs/{name}/status", stored)
        call("GET", f"/api/v1/namespaces/{NAMESPACE}/secrets/{name}-admin-kubeconfig")
    conn.close()
    return env.meter.delta(a, env.meter.read())


# ---------------------------------------------------------------------------------------------
# Upstream Hive's clustersync controller (../shared/hive/README.md says how it runs alone)


def hive_dir():
    """The directory of upstream Hive's controller manager, or None where there is none."""
    d = os.environ.get("SYNCBUS_HIVE_DIR") or os.path.join(ROOT, "..", "shared", "hive")
    return os.path.realpath(d) if os.path.exists(os.path.join(d, "manager")) else None


def apply(hub, path, yaml_text):
    hub.request("PATCH", path + "?fieldManager=bench-fleet&force=true", yaml_text.encode(),
                content_type="application/apply-patch+yaml")


def prepare_hive(hub, directory):
    """Hive's CRDs (the repository's newer copies win), namespace hive and the StatefulSet whose
    status clustersync insists on."""
    import yaml
    crd_dirs = [os.path.join(directory, "crds"), os.path.join(ROOT, "tests", "kubesim", "crds")]
    for d in crd_dirs:
        for f in sorted(os.listdir(d)):
            if f.endswith(".yaml"):
                with open(os.path.join(d, f), encoding="utf-8") as fh:
                    text = fh.read()
                name = yaml.safe_load(text)["metadata"]["name"]
                apply(hub, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}", text)
    hub.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hive"}})
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet",
           "metadata": {"name": "hive-clustersync", "namespace": "hive"},
           "spec": {"replicas": 1, "serviceName": "hive-clustersync",
                    "selector": {"matchLabels": {"app": "hive-clustersync"}},
                    "template": {"metadata": {"labels": {"app": "hive-clustersync"}},
                                 "spec": {"containers": [{"name": "clustersync", "image": "none"}]}}}}
    hub.create("/apis/apps/v1/namespaces/hive/statefulsets", sts)
    hub.request("PATCH", "/apis/apps/v1/namespaces/hive/statefulsets/hive-clustersync/status",
                {"status": {"replicas": 1, "currentReplicas": 1}}, content_type="application/merge-patch+json")
    time.sleep(3)   # the CRDs established


class HiveManager:
    """The manager with only clustersync; its fixed ports are taken one run at a time (the lock
    file the tests take too)."""

    def __init__(self, procs, directory, hub_kubeconfig, reapply_interval):
        self.procs = procs
        self.lock = open(os.path.join(directory, "..", "..", ".hive-manager.lock"), "a+")
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        env = dict(os.environ, HIVE_NS="hive", HIVE_SKIP_LEADER_ELECTION="true",
                   HIVE_CLUSTERSYNC_POD_NAME="hive-clustersync-0", KUBECONFIG=hub_kubeconfig,
                   SYNCSET_REAPPLY_INTERVAL=f"{reapply_interval}s")
        env["clustersync-client-qps"] = "1000"
        env["clustersync-client-burst"] = "2000"
        self.child = procs.start("hive", [os.path.join(directory, "manager"), "--controllers=clustersync",
                                          "--log-level=info"], env=env)

    def stop(self):
        self.procs.stop("hive")
        self.lock.close()


# ---------------------------------------------------------------------------------------------
# One system through the three windows


def measure(system, args, procs, broker, env, daemons, consumer_yaml):
    """The three windows of `system` ("syncbus" or "hive") on a fresh hub with the fleet;
    `daemons` makes bench_fleet's Daemons, `consumer_yaml` is the consumers' config section."""
    n = args.clusters
    t0 = time.monotonic()
    real_fleet(env.hub, env.target, env.env["SYNCBUS_ENVTEST_TARGET_KUBECONFIG"], n)
    note(f"{system}: fleet of {n} clusters (3 SyncSets x 2 ConfigMaps each; a SelectorSyncSet of 2 ConfigMaps "
         f"for {(n + 1) // 2}) written in {time.monotonic() - t0:.1f} s")
    hive = None
    if system == "hive":
        prepare_hive(env.hub, hive_dir())
    time.sleep(5)   # the writes settled
    out = {}
    a = env.meter.read()
    if system == "syncbus":
        d = daemons(procs, args.build_dir, broker, env.hub_kubeconfig,
                    f"publisher: {{namespace: {NAMESPACE}, resyncInterval: {args.reapply_interval}s}}\n",
                    consumer_yaml)
        for i in range(1, args.consumers + 1):
            d.start_consumer(f"consumer-{i}")
        d.start_publisher()
        names = ["publisher"] + d.consumers()

        def alive():
            for name in names:
                procs.check_alive(name)
    else:
        hive = HiveManager(procs, hive_dir(), env.hub_kubeconfig, args.reapply_interval)

        def alive():
            procs.check_alive("hive")
    try:
        converge_seconds = wait_fleet(env.hub, n, 1, 1800, f"{system} converge", alive)
        out["converge"] = env.meter.delta(a, env.meter.read())
        out["converge"]["seconds"] = converge_seconds
        out["leases"] = lease_count(env.hub)

        # At rest: nothing is due until the first cluster's reapply, one interval after its sync.
        a = env.meter.read()
        time.sleep(args.idle_seconds)
        out["rest"] = env.meter.delta(a, env.meter.read())

        # A full reapply of every cluster: the window from there to one interval (and its jitter
        # of up to a tenth) later. Converging and resting took less than the interval, so each
        # cluster is reapplied once in it.
        a = env.meter.read()
        time.sleep(args.reapply_interval * 1.1 + 5)
        alive()
        out["reapply"] = env.meter.delta(a, env.meter.read())

        a = env.meter.read()
        generation = edit_sss(env.hub)
        edit_seconds = wait_fleet(env.hub, n, generation, args.edit_window, f"{system} edit", alive)
        time.sleep(max(0.0, args.edit_window - edit_seconds))
        out["edit"] = env.meter.delta(a, env.meter.read())
        out["edit"]["converged_in"] = edit_seconds
        out["overlap"] = reapply_overlap(converge_seconds, args.idle_seconds, args.edit_window,
                                         args.reapply_interval)
        if system == "syncbus":
            out["consumers"] = {name: (cpu_seconds(d.pid(name)), memory_kib(d.pid(name))[1] / 1024)
                                for name in d.consumers()}
    finally:
        if hive:
            hive.stop()
        else:
            for name in ["publisher"] + [f"consumer-{i}" for i in range(1, args.consumers + 1)]:
                procs.stop(name)
    return out


def per_cluster(requests, clusters):
    total = sum(requests.values())
    return total, total / max(clusters, 1)


def net_of_rest(window, rest):
    """The window's requests less what the system asks at rest over as long, per verb and resource
    (kinds left with less than half a request dropped)."""
    scale = window["seconds"] / max(rest["seconds"], 1e-9)
    out = {}
    for k, v in window["requests"].items():
        d = v - rest["requests"].get(k, 0) * scale
        if d >= 0.5:
            out[k] = d
    return out


def by_kind(requests, clusters, limit=8):
    items = sorted(((v, k) for k, v in requests.items()), reverse=True)[:limit]
    return ", ".join(f"{verb} {res} {v / max(clusters, 1):.2f}" for v, (verb, res) in items) or "none"


def reapply_overlap(converge, idle, edit_window, interval):
    """Why a system's rest or edit window holds periodic reapplies, or "" when neither does. A
    cluster first synced at 0 (the converge's start) is reapplied at one interval and again at two
    at the earliest (the jitter only adds); the edit window opens after converge, rest and the
    reapply window (1.1 intervals + 5 s), so it must close by two intervals."""
    needed = converge + idle + edit_window + 5
    if needed <= 0.9 * interval:
        return ""
    return (f"converge {converge:.0f} s + rest {idle:.0f} s + edit window {edit_window:.0f} s + 5 s is more "
            f"than 0.9 x the reapply interval ({interval:.0f} s): its rest and edit windows include periodic "
            f"reapplies; pass --reapply-interval {math.ceil(needed / 0.9)} or more")


def report_system(report, system, r, n):
    edited = (n + 1) // 2
    if r.get("overlap"):
        report.add(f"{system}: windows overlap periodic reapplies", r["overlap"])
    c = r["converge"]
    total, per = per_cluster(c["requests"], n)
    report.add(f"{system}: converge", f"{c['seconds']:.1f} s; hub requests {int(total)} ({per:.2f} per cluster: "
               f"{by_kind(c['requests'], n)}); hub CPU {c['cpu']:.2f} s; ClusterSyncLeases {r['leases']}/{n}")
    rest = r["rest"]
    total, _ = per_cluster(rest["requests"], n)
    rate = {k: v / rest["seconds"] for k, v in rest["requests"].items()}
    report.add(f"{system}: at rest after converge ({rest['seconds']:.0f} s window)",
               f"hub requests {total / rest['seconds']:.2f}/s ({by_kind(rate, 1)}); "
               f"hub CPU {rest['cpu'] / rest['seconds']:.2f} s/s")
    e = r["edit"]
    total, per = per_cluster(e["requests"], edited)
    _, net = per_cluster(net_of_rest(e, rest), edited)
    report.add(f"{system}: one edit ({edited} clusters, {e['seconds']:.0f} s window)",
               f"synced in {e['converged_in']:.1f} s; hub requests {int(total)} ({per:.2f} per cluster: "
               f"{by_kind(e['requests'], edited)}); net of rest {net:.2f} per cluster "
               f"({by_kind(net_of_rest(e, rest), edited)}); hub CPU {e['cpu']:.2f} s")
    f = r["reapply"]
    total, per = per_cluster(f["requests"], n)
    _, net = per_cluster(net_of_rest(f, rest), n)
    report.add(f"{system}: full reapply ({n} clusters, {f['seconds']:.0f} s window)",
               f"hub requests {int(total)} ({per:.2f} per cluster: {by_kind(f['requests'], n)}); "
               f"net of rest {net:.2f} per cluster ({by_kind(net_of_rest(f, rest), n)}); "
               f"hub CPU {f['cpu']:.2f} s")


def run_real_apiserver(args, procs, broker, report, daemons, consumer_yaml):
    if not os.environ.get("KUBEBUILDER_ASSETS"):
        raise RunError("--real-apiserver needs KUBEBUILDER_ASSETS (a directory with kube-apiserver 1.26; "
                       "see scripts/envtest)")
    n = args.clusters
    results = {}
    systems = ["syncbus"] + (["hive"] if hive_dir() else [])
    for system in systems:
        print(f"\n---- {system} on a fresh real hub: {n} clusters", flush=True)
        env = Envtest(procs.work, system)
        try:
            results[system] = measure(system, args, procs, broker, env, daemons, consumer_yaml)
            if system == "syncbus":
                results["floor"] = converge_floor(env, n)
        finally:
            env.stop()
        report_system(report, system, results[system], n)
    s = results["syncbus"]
    edited = (n + 1) // 2
    _, edit_per = per_cluster(s["edit"]["requests"], edited)
    _, reapply_per = per_cluster(s["reapply"]["requests"], n)
    report.add("syncbus: one edit, hub requests per cluster", f"{edit_per:.2f}", f"<= {GOAL_EDIT_PER_CLUSTER:g}",
               edit_per <= GOAL_EDIT_PER_CLUSTER)
    report.add("syncbus: full reapply, hub requests per cluster", f"{reapply_per:.2f}",
               f"<= {GOAL_REAPPLY_PER_CLUSTER:g}", reapply_per <= GOAL_REAPPLY_PER_CLUSTER)
    report.add("syncbus: every cluster has its ClusterSyncLease after converge", f"{s['leases']}/{n}",
               f"{n}", s["leases"] == n)
    for name, (cpu, rss) in s.get("consumers", {}).items():
        report.add(f"syncbus {name}: CPU / peak RSS", f"{cpu:.1f} s / {rss:.0f} MiB")
    f = results["floor"]
    total, per = per_cluster(f["requests"], n)
    beside = (f": {f['cpu'] / max(results['hive']['converge']['cpu'], 1e-9):.2f} x Hive's converge"
              if "hive" in results else "")
    report.add("converge floor: the requests no converge does without, alone on one connection",
               f"hub requests {int(total)} ({per:.2f} per cluster: {by_kind(f['requests'], n)}); "
               f"hub CPU {f['cpu']:.2f} s in {f['seconds']:.1f} s{beside}")
    if "hive" not in results:
        report.add("upstream Hive beside it", "DID NOT RUN: no upstream Hive controller manager "
                   "(../shared/hive/manager; set SYNCBUS_HIVE_DIR)")
        return
    h = results["hive"]
    for window, clusters in (("converge", n), ("edit", edited), ("reapply", n)):
        st, sp = per_cluster(s[window]["requests"], clusters)
        ht, hp = per_cluster(h[window]["requests"], clusters)
        report.add(f"{window}: hub requests, syncbus / Hive", f"{int(st)} / {int(ht)} ({sp:.2f} / {hp:.2f} per "
                   f"cluster, ratio {st / max(ht, 1):.2f})",
                   "<= Hive's" if window == "converge" else "", (st <= ht) if window == "converge" else None)
        ratio = s[window]["cpu"] / max(h[window]["cpu"], 1e-9)
        goal = window == "converge"
        report.add(f"{window}: hub CPU, syncbus / Hive", f"{s[window]['cpu']:.2f} s / {h[window]['cpu']:.2f} s "
                   f"(ratio {ratio:.2f})", f"<= {GOAL_CONVERGE_CPU_RATIO:g} x Hive's" if goal else "",
                   (ratio <= GOAL_CONVERGE_CPU_RATIO) if goal else None)
    report.add("converge: time, syncbus / Hive",
               f"{s['converge']['seconds']:.1f} s / {h['converge']['seconds']:.1f} s")
