"""bench-fleet's preview phase (simulator mode): what `syncbusctl preview` of a SelectorSyncSet edit
costs, beside the sync of the same kind of edit in the same run.

1. An edit of the set is synced by the whole fleet: consumer CPU per object applied, and the hub
   reads (GETs) of those syncs.
2. The next edit is previewed on every cluster (syncbusctl preview -o json): wall time, consumer
   CPU per object previewed (goal: at most twice a real sync's per object applied), and the
   consumers' hub requests (goal: no more per cluster than the sync's reads; the command's own
   ClusterDeployment list is counted apart).
3. While that preview runs, one SyncSet edit: its latency to the target (goal: that of an edit
   during a full resync), since previews must never hold up syncs.
A consumer reads a cluster's kubeconfig the first time it meets the cluster, whether to sync or
to preview it: those reads (the consumers' syncbus_consumer_kubeconfig_reads_total) are counted
apart from the requests held to the goal."""

import json
import os
import subprocess
import threading
import time

from syncbus_tools.testbed import KubeClient, RunError, cpu_seconds, subtract

HIVE = "/apis/hive.openshift.io/v1"
GOAL_CPU_RATIO = 2.0
GOAL_EDIT_SECONDS = 5.0


def consumer_cpu(d):
    return sum(cpu_seconds(d.pid(name)) for name in d.consumers())


def kubeconfig_reads(d):
    """The consumers' kubeconfig Secret reads so far, for syncs and previews."""
    return sum(v for name in d.consumers() for metric, _, v in d.scrape(name)
               if metric == "syncbus_consumer_kubeconfig_reads_total")


def reads(requests):
    return sum(n for (verb, _), n in requests.items() if verb in ("get", "list"))


def table(requests, clusters):
    rows = sorted(requests.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{verb} {res} {n / max(clusters, 1):.2f}" for (verb, res), n in rows) or "none"


def edited_copy(hub, path, token):
    """The set at `path` as an operator would apply it, its first resource's payload set to `token`."""
    obj = hub.get(path, "selectorsyncsets")
    obj["spec"]["resources"][0].setdefault("data", {})["payload"] = token
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "metadata": {"name": obj["metadata"]["name"]}, "spec": obj["spec"]}


def edit_seen(hub, cluster, ns, name, token, started):
    """Polls the simulated cluster's ConfigMap until it holds `token` (an edit of its set, see
    bench_fleet.edit_set): the seconds since `started`, or inf after 300 s."""
    target = KubeClient(server=hub.server)
    path = f"/clusters/{cluster}/api/v1/namespaces/{ns}/configmaps/{name}"
    deadline = started + 300
    while time.monotonic() < deadline:
        code, obj = target.request("GET", path, accept_codes=(200, 404))
        if code == 200 and obj.get("data", {}).get("payload") == token:
            return time.monotonic() - started
        time.sleep(0.05)
    return float("inf")


def preview_phase(args, d, pipe, hub, n, report, edit_set, edit_token):
    print("\n---- preview: a SelectorSyncSet edit synced by the fleet, then the next one previewed", flush=True)
    path = f"{HIVE}/selectorsyncsets/fleet-sss-00"

    # 1. The sync of an edit.
    base = pipe.publisher_state()
    totals0, cpu0 = pipe.consumer_totals(), consumer_cpu(d)
    before, own_before = hub_counts(hub)
    start = time.monotonic()
    edit_set(hub, path, "selectorsyncsets", edit_token())
    sync_seconds = pipe.wait_converged(expect_enqueued=n, enqueued_base=base["enqueued"], label="edit wave",
                                       started=start)
    totals1 = pipe.consumer_totals()
    sync_cpu = consumer_cpu(d) - cpu0
    applied = totals1["applies"] - totals0["applies"]
    sync_requests = since(hub, before, own_before)
    sync_reads = reads(sync_requests)
    sync_ms = 1000 * sync_cpu / max(applied, 1)
    apply_mean = (totals1["apply_sum"] - totals0["apply_sum"]) / max(totals1["apply_count"] - totals0["apply_count"], 1)
    report.add("preview: the sync of an edit, for comparison",
               f"{sync_seconds:.1f} s, {int(applied)} objects applied, consumer CPU {sync_ms:.2f} ms per object, "
               f"hub reads {sync_reads / n:.2f} per cluster")

    # 2. The preview of the next edit, with 3. an edit synced meanwhile.
    set_file = os.path.join(d.procs.work, "preview-set.json")
    with open(set_file, "w", encoding="utf-8") as f:
        json.dump(edited_copy(hub, path, edit_token()), f)
    edit = {}

    def edit_meanwhile(proc):
        names = hub.get("/_sim/clusters")["clusters"]
        cluster = names[len(names) // 2]
        while pipe.broker.queue_depth("syncbus.preview") == 0 and proc.poll() is None:
            time.sleep(0.05)   # the edit goes in while preview requests wait
        token = edit_token()
        edited_at = time.monotonic()
        ns, name = edit_set(hub, f"{HIVE}/namespaces/{cluster}/syncsets/{cluster}-ss-00", "syncsets", token)
        edit.update(seconds=edit_seen(hub, cluster, ns, name, token, edited_at))

    first = run_preview(args, d, hub, set_file, "preview", edit_meanwhile)
    result, seconds, code = first["result"], first["seconds"], first["code"]
    objects = sum(len(r.get("objects", [])) for r in result["replies"])
    errors = sum(1 for r in result["replies"] if r.get("error"))
    preview_ms = 1000 * first["cpu"] / max(objects, 1)
    report.add("preview: every cluster answered",
               f"{result['answered']}/{result['clusters']} in {seconds:.1f} s "
               f"({result['answered'] / max(seconds, 1e-9):.0f} clusters/s), {objects} objects, {errors} errors, "
               f"exit {code}")
    ratio = preview_ms / max(sync_ms, 1e-9)
    report.add("preview: consumer CPU per object, relative to the sync's",
               f"{ratio:.2f} ({preview_ms:.2f} ms per object previewed, {sync_ms:.2f} per object applied)",
               f"<= {GOAL_CPU_RATIO:g}", ratio <= GOAL_CPU_RATIO)
    served = first["served"]
    served_total = sum(served.values())
    # A consumer reads a cluster's kubeconfig the first time it meets the cluster, whether to sync or
    # to preview it (then it keeps the client): a preview batch that lands on a consumer which has
    # not synced its clusters reads theirs, as a sync landing there would.
    met = first["kubeconfigs_read"]
    # Reads: the writes meanwhile are the edit's sync and the leader's renewals (a preview writes
    # nothing).
    beyond = reads(served) - sync_reads - met
    report.add("preview: hub requests per cluster beyond the sync's reads",
               f"{max(0.0, beyond / n):.2f} ({served_total / n:.2f} per cluster during the preview, incl. the "
               f"edit's sync and the leader's renewals: {table(served, n)}; the sync read {sync_reads / n:.2f}; "
               f"of the preview's reads, "
               f"{met / n:.2f} were kubeconfig reads of consumers meeting a cluster for the first time, which a "
               f"sync landing there reads too; syncbusctl's own list: {sum(first['cli'].values())} requests)",
               "0", beyond <= 0)
    goal = GOAL_EDIT_SECONDS + args.resources * apply_mean   # the edited set: its objects one after another
    report.add("preview: an edit's latency while the preview runs", f"{edit['seconds']:.2f} s",
               f"<= {goal:.2f} s (5 s + its applies)", edit["seconds"] <= goal)
    pipe.settle()


def run_preview(args, d, hub, set_file, name, meanwhile):
    """`syncbusctl preview -o json` of `set_file` on every cluster; `meanwhile(proc)` runs while it
    does. Returns its report, seconds, exit code, the consumers' CPU seconds, the hub requests it
    caused (those the consumers served it with, and syncbusctl's own ClusterDeployment list) and
    the consumers' kubeconfig reads meanwhile."""
    config = os.path.join(d.procs.work, "consumer-1.yaml")
    cpu0, kubeconfigs0 = consumer_cpu(d), kubeconfig_reads(d)
    before, own_before = hub_counts(hub)
    out_path = os.path.join(d.procs.work, name + ".json")
    start = time.monotonic()
    with open(out_path, "w", encoding="utf-8") as out, \
            open(os.path.join(d.procs.work, name + ".err"), "w", encoding="utf-8") as err:
        proc = subprocess.Popen([os.path.join(args.build_dir, "ctl", "syncbusctl"), "preview", "-c", config,
                                 "-f", set_file, "-o", "json", "--timeout", "30m"], stdout=out, stderr=err)
        watcher = None
        if meanwhile:
            watcher = threading.Thread(target=meanwhile, args=(proc,), daemon=True)
            watcher.start()
        code = proc.wait(timeout=1900)
        if watcher:
            watcher.join()
    seconds = time.monotonic() - start
    if code not in (0, 1):
        raise RunError(f"syncbusctl preview exited {code} (see {out_path})")
    with open(out_path, encoding="utf-8") as f:
        result = json.load(f)
    requests = since(hub, before, own_before)
    kubeconfigs_read = kubeconfig_reads(d) - kubeconfigs0
    cli = {k: v for k, v in requests.items() if k == ("list", "clusterdeployments")}
    served = {k: v for k, v in requests.items() if k not in cli}
    return {"result": result, "seconds": seconds, "code": code, "cpu": consumer_cpu(d) - cpu0,
            "served": served, "cli": cli, "kubeconfigs_read": kubeconfigs_read}


def hub_counts(hub):
    stats = hub.get("/_sim/stats")
    counts = {(verb, res): c for verb, by_res in stats["hubRequests"].items() for res, c in by_res.items()}
    return counts, dict(hub.sent)


def since(hub, before, own_before):
    after, _ = hub_counts(hub)
    return subtract(after, before, subtract(hub.sent, own_before))
