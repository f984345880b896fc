"""scripts/chaos: the whole system through many faults at once. A 3-node RabbitMQ cluster (3.10 or
4.0, --rabbitmq) listening with TLS only, with syncbus's policies, the Kubernetes simulator with a
fleet whose clusters each have their own credentials, 2 publishers and 3 consumers under a
supervisor that restarts them, a stream of SyncSet and SelectorSyncSet edits, a SelectorSyncSet
rolled out in waves again and again (chaos_rollout.py), and faults (chaos_faults.py) until the
count is reached; a request that crashes every consumer that takes it (poison); then the proofs
(chaos_checks.py): convergence object by object, the dead-letter queue, lease exclusion, the
rollout's waves held until released and a wave boundary during faults, recovery times against
their goals, and a scan of every log, message, trace event and metric for secrets."""

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from syncbus_tools import ROOT, secret_scan
from syncbus_tools.chaos_checks import (Check, analyse_journal, check_boundary_during_faults,
                                        check_rollout_complete, check_rollout_held, cluster_credentials,
                                        every_kind_injected, explain_dead_letters, explain_exits, goals_met,
                                        judge_poison, planted_crash_times, planted_crashes, rollout_history,
                                        ScanInputs, WorkTimes, on_their_way,
                                        format_recovery, measure_recovery, recovery_table, request_window,
                                        verify_fleet)
from syncbus_tools.chaos_faults import Chaos, EditStream, Fault, make_rng
from syncbus_tools import chaos_rollout
from syncbus_tools.chaos_system import (Daemon, RabbitCluster, Sampler, Simulator, Supervisor, admin_yaml,
                                        note, now, write_daemon_config)
from syncbus_tools.testbed import RunError, claims_yaml

CRASH_ANNOTATION = "chaos.syncbus.io/crash-consumer"
DELIVERY_LIMIT = 5   # topology.deliveryLimit: the run keeps the default


class System:
    """Everything one run started, for the faults and the checks."""

    def __init__(self, args, work):
        self.args = args
        self.work = work
        self.bin = args.build_dir
        self.rabbit = None
        self.sim = None
        self.supervisor = Supervisor(crash_backoff=args.crash_backoff)
        self.sampler = None
        self.ctl_config = None
        self.poison_requests = set()   # message ids of the poison's parked requests
        # The topology's quorum queues but the dead-letter queue (`syncbusctl topology`): the
        # secret scan reads them through the management API; syncbus.dead is read from its
        # index (`syncbusctl dlq list`), which changes nothing in it.
        self.scanned_queues = []

    def daemons(self):
        return list(self.supervisor.daemons.values())

    def consumers(self):
        return [d for d in self.daemons() if d.kind == "consumer"]

    def publishers(self):
        return [d for d in self.daemons() if d.kind == "publisher"]

    def parked(self, cluster=None):
        """The parked requests as `syncbusctl dlq list --json` shows them (from the index: the
        queue itself is not touched). Raises RunError when it cannot be read."""
        argv = ["dlq", "list", "-c", self.ctl_config, "--json", "-q"]
        if cluster:
            argv += ["--cluster", cluster]
        rc, out, err = self.ctl(*argv)
        if rc != 0:
            raise RunError(f"syncbusctl dlq list exited {rc}: {err.strip()[-300:]}")
        return json.loads(out)

    def planted_crashes(self, cluster):
        """{consumer name: how many times its log says it aborted on purpose on `cluster`}."""
        counts = {}
        for d in self.consumers():
            with open(d.log_path, encoding="utf-8", errors="replace") as f:
                counts[d.name] = planted_crashes(f.read(), cluster)
        return counts

    def planted_crash_faults(self, cluster):
        """The consumers' planted crashes on `cluster`, as consumer-kill faults (recovery_table):
        a consumer that dies holding another fault's clusters stretches that fault's recovery."""
        crashes = []
        for d in self.consumers():
            with open(d.log_path, encoding="utf-8", errors="replace") as f:
                crashes += [Fault("consumer-kill", d.name, t, detail="planted poison crash", ended=t)
                            for t in planted_crash_times(f.read(), cluster)]
        return crashes

    def ctl(self, *argv, timeout=900):
        """syncbusctl with the run's config; (exit code, stdout)."""
        r = subprocess.run([os.path.join(self.bin, "ctl", "syncbusctl"), *argv], capture_output=True,
                           text=True, timeout=timeout)
        with open(os.path.join(self.work, "syncbusctl.log"), "a", encoding="utf-8") as log:
            log.write(f"$ syncbusctl {' '.join(argv)}\n{r.stdout}{r.stderr}\n")
        return r.returncode, r.stdout, r.stderr

    def stop(self, keep):
        if self.sampler:
            self.sampler.stop()
        self.supervisor.stop_all()
        if self.sim:
            self.sim.stop()
        if self.rabbit and not keep:
            self.rabbit.stop(wipe=True)


# ---------------------------------------------------------------------------------------------
# Setting up


def start_system(s):
    args, work = s.args, s.work
    tls = os.path.join(work, "tls")
    subprocess.run([os.path.join(ROOT, "scripts", "tls-certs"), "--dir", tls], check=True,
                   stdout=subprocess.DEVNULL)
    note(f"starting a 3-node RabbitMQ {args.rabbitmq} cluster (TLS only)")
    s.rabbit = RabbitCluster(ROOT, work, 3, tls, args.rabbitmq)
    note(f"RabbitMQ cluster up in {s.rabbit.start_seconds:.1f}s: {', '.join(s.rabbit.node_names)}")
    secrets_dir = os.path.join(work, "secrets")
    os.makedirs(secrets_dir, mode=0o700)
    password_file = os.path.join(secrets_dir, "amqp-password")
    with open(password_file, "w", encoding="utf-8") as f:
        f.write(s.rabbit.password + "\n")
    os.chmod(password_file, 0o600)
    s.hub_token = secrets.token_hex(24)
    note(f"starting the simulator: {args.clusters} clusters, {args.syncsets} SyncSets and "
         f"{args.selector_syncsets} SelectorSyncSets of {args.resources} ConfigMaps each")
    s.sim = Simulator(s.bin, work, args.clusters, args.syncsets, args.selector_syncsets, args.resources,
                      args.latency, s.hub_token)
    # The simulated hub has the namespace syncbus (as deployed), where the publishers' leader
    # Lease and the consumers' cluster Leases live.
    lease = args.lease
    renew = max(1, lease // 4)
    # A frozen consumer is dropped by the broker (two heartbeats) no later than its cluster
    # leases lapse (production: 10 s heartbeats, 20 s leases).
    heartbeat = min(10, max(2, lease // 2))
    common = (s.rabbit.amqp_yaml(tls, password_file, heartbeat) +
              f"hub: {{kubeconfig: {s.sim.kubeconfig}}}\n"
              "log: {level: info}\n"
              "topology: {retryTiers: [%s]}\n"
              "consumer: {prefetch: %d, clusterLease: {duration: %ds, renewInterval: %ds, safetyMargin: %ds%s}}\n"
              % (", ".join(args.retry_tiers), args.prefetch, lease, renew, renew,
                 ", " + claims_yaml(args.per_sync_claims)))
    crash_env = dict(os.environ, SYNCBUS_CRASH_ON_ANNOTATION=CRASH_ANNOTATION)
    daemons = []
    for kind, count, env in (("publisher", args.publishers, dict(os.environ)),
                             ("consumer", args.consumers, crash_env)):
        for i in range(1, count + 1):
            name = f"{kind}-{i}"
            port, admin = admin_yaml()
            path = os.path.join(work, name + ".yaml")
            write_daemon_config(path, admin + common)
            # The consumers run syncbus-consumer-chaos: the daemon with the poison planted.
            binary = (os.path.join(s.bin, "tests", "chaos", "syncbus-consumer-chaos") if kind == "consumer"
                      else os.path.join(s.bin, kind, "syncbus-" + kind))
            argv = [binary, "--config", path]
            if kind == "consumer":
                argv += ["--name", name]
            daemons.append(Daemon(name, kind, argv, env, os.path.join(work, name + ".log"),
                                  f"http://127.0.0.1:{port}"))
    s.ctl_config = os.path.join(work, "consumer-1.yaml")
    # The policies of this topology, as a deployment has them (the daemons cannot set policies).
    rc, out, err = s.ctl("topology", "-c", s.ctl_config)
    if rc != 0:
        raise RunError(f"syncbusctl topology exited {rc}: {err.strip()[-300:]}")
    topology = json.loads(out)
    for policy in topology["policies"]:
        s.rabbit.set_policy(policy)
    s.scanned_queues = [q["name"] for q in topology["queues"]
                        if q["arguments"].get("x-queue-type") == "quorum" and q["name"] != "syncbus.dead"]
    for d in daemons:
        s.supervisor.add(d)
    s.supervisor.start_watching()
    s.sampler = Sampler(s.supervisor)
    s.sampler.start()
    wait_ready(s, timeout=600)


def ready(d):
    try:
        with urllib.request.urlopen(d.admin_url + "/readyz", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def wait_ready(s, timeout):
    """Every consumer ready and one publisher leading."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        consumers = all(d.running() and not d.stopped and ready(d) for d in s.consumers())
        leaders = [d for d in s.publishers() if d.running() and not d.stopped and ready(d)]
        if consumers and leaders:
            return
        time.sleep(0.5)
    raise RunError(f"daemons not ready after {timeout}s (logs in {s.work})")


def wait_converged(s, timeout, label):
    started = time.monotonic()
    rc, out, err = s.ctl("wait", "-c", s.ctl_config, "--timeout", f"{int(timeout)}s", "-q", "--json",
                         timeout=timeout + 60)
    took = time.monotonic() - started
    if rc != 0:
        raise RunError(f"{label}: the fleet did not converge within {timeout:.0f}s: {err.strip()[-500:]}")
    note(f"{label}: converged in {took:.1f}s")
    return took


# ---------------------------------------------------------------------------------------------
# Poison


def poison_episode(s, chaos, edits, victim, timeout):
    """A cluster whose ClusterDeployment makes every consumer that syncs it abort: its request
    must be parked after the delivery limit, the pool must come back and stay healthy, `dlq
    list` must show it, and after the fix `dlq replay` must sync it. The fix is made however the
    episode ends, so that a failed one leaves the rest of the run its fleet to converge."""
    chaos.pause()
    cd_path = f"/apis/hive.openshift.io/v1/namespaces/{victim}/clusterdeployments/{victim}"
    try:
        return poison_checks(s, edits, victim, cd_path, timeout)
    finally:
        cd = s.sim.hub.get(cd_path)
        if CRASH_ANNOTATION in cd["metadata"].get("annotations", {}):
            cd["metadata"]["annotations"].pop(CRASH_ANNOTATION)
            s.sim.hub.update(cd_path, cd)
            note(f"poison: {victim} no longer crashes consumers")
        chaos.resume()


def poison_checks(s, edits, victim, cd_path, timeout):
    checks = []
    wait_ready(s, timeout=300)
    crashes_before = sum(len(d.crash_times) for d in s.consumers())
    cd = s.sim.hub.get(cd_path)
    cd["metadata"].setdefault("annotations", {})[CRASH_ANNOTATION] = "true"
    s.sim.hub.update(cd_path, cd)
    started = now()
    edits.edit(f"/apis/hive.openshift.io/v1/namespaces/{victim}/syncsets/{victim}-ss-00")
    note(f"poison: {victim} now crashes the consumer that syncs it")
    parked_at = None
    key = f"{victim}/{victim}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if s.parked(victim):
                parked_at = now()
                break
        except RunError as e:   # a fault in progress, say: try again
            note(f"poison: {e}")
        time.sleep(2)
    crashes = sum(len(d.crash_times) for d in s.consumers()) - crashes_before
    if parked_at is None:
        checks.append(Check("poison parked", False, f"{victim} not in the dead-letter queue after {timeout}s "
                            f"({crashes} consumer crashes)"))
        return checks
    # The cluster may have had more than one request on its way (a change and a new leader's
    # startup resync, say): each is a poison of its own, parked after its own delivery limit.
    quiet = 3 * max(tier_seconds(t) for t in s.args.retry_tiers) + 10
    pending = unsettled_requests(s, victim, started, quiet)
    while pending and time.monotonic() < deadline:
        time.sleep(2)
        pending = unsettled_requests(s, victim, started, quiet)
    listed = s.parked(victim)
    s.poison_requests.update(d.get("messageId") for d in listed if d.get("cluster") == key)
    if pending:
        checks.append(Check("poison parked", False, f"{victim}: request(s) {', '.join(pending)} neither "
                            f"parked nor settled after {timeout}s"))
        return checks
    planted = sum(s.planted_crashes(key).values())
    crashes = sum(len(d.crash_times) for d in s.consumers()) - crashes_before
    note(f"poison: parked after {parked_at - started:.0f}s, {crashes} consumer crashes ({planted} planted)")
    judged = judge_poison(listed, key, planted, DELIVERY_LIMIT)
    judged.detail += f"; first parked {parked_at - started:.0f}s after the edit; `syncbusctl dlq list` shows:\n"
    rc, out, _ = s.ctl("dlq", "list", "-c", s.ctl_config, "--cluster", victim, "-q")
    judged.detail += indent(out if rc == 0 else f"(exit {rc})")
    checks.append(judged)
    # The pool comes back (the supervisor's back-off) and then stays up.
    wait_ready(s, timeout=300)
    quiet_from = now()
    time.sleep(s.args.healthy_window)
    later = sum(len(d.crash_times) for d in s.consumers()) - crashes_before - crashes
    all_up = all(d.running() and ready(d) for d in s.consumers())
    checks.append(Check("pool healthy after parking (no crash loop)", later == 0 and all_up,
                        f"{later} crashes in the {now() - quiet_from:.0f}s after every consumer was back; "
                        f"all {len(s.consumers())} consumers ready: {all_up}"))
    # The fix, then the replay.
    cd = s.sim.hub.get(cd_path)
    cd["metadata"]["annotations"].pop(CRASH_ANNOTATION, None)
    s.sim.hub.update(cd_path, cd)
    rc, out, err = s.ctl("dlq", "replay", "-c", s.ctl_config, "--cluster", victim, "-q")
    replayed = now()
    synced = None
    if rc == 0:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and synced is None:
            code, cs = s.sim.hub.request(
                "GET", f"/apis/hiveinternal.openshift.io/v1alpha1/namespaces/{victim}/clustersyncs/{victim}",
                accept_codes=(200, 404))
            if code == 200 and in_sync(s, victim, cs):
                synced = now()
            else:
                time.sleep(0.5)
    checks.append(Check("replay after the fix syncs the cluster", synced is not None,
                        f"replay exit {rc}; {victim} in sync {synced - replayed:.1f}s later" if synced
                        else f"replay exit {rc} {err.strip()[:300]}; {victim} not in sync within 120s"))
    return checks


def tier_seconds(tier):
    """Seconds of a delay tier as the config writes it ("10s", "2m")."""
    return int(tier[:-1]) * {"s": 1, "m": 60, "h": 3600}[tier[-1]]


def unsettled_requests(s, cluster, since, quiet):
    """Requests of `cluster` seen since `since` (Unix seconds) that are still on their way
    (chaos_checks.on_their_way)."""
    rc, out, _ = s.ctl("trace", cluster, "-c", s.ctl_config, "--json", "--since", "1h")
    if rc != 0:
        return [f"(trace unreadable: exit {rc})"]
    crashes = [(d.name, t) for d in s.consumers() for t in d.crash_times]
    return on_their_way(json.loads(out).get("events", []), since, crashes, now(), quiet)


def in_sync(s, cluster, clustersync):
    """Every set of `cluster` at its current generation, Success."""
    sets = [("syncSets", x)
            for x in s.sim.hub.get(f"/apis/hive.openshift.io/v1/namespaces/{cluster}/syncsets")["items"]]
    sets += [("selectorSyncSets", x) for x in s.sim.hub.get("/apis/hive.openshift.io/v1/selectorsyncsets")["items"]]
    status = clustersync.get("status", {})
    for field, x in sets:
        entry = next((e for e in status.get(field, []) if e["name"] == x["metadata"]["name"]), None)
        if entry is None or entry.get("observedGeneration") != x["metadata"]["generation"] or \
                entry.get("result") != "Success":
            return False
    return True


def indent(text):
    return "\n".join("      " + line for line in text.rstrip().splitlines())


# ---------------------------------------------------------------------------------------------
# Secrets


def collect_secrets(s, creds):
    found = [secret_scan.Secret("hub token", s.hub_token),
             secret_scan.Secret("broker password", s.rabbit.password)]
    cookie = os.path.join(s.rabbit.dir, "cookie")
    if os.path.exists(cookie):
        with open(cookie, encoding="utf-8") as f:
            found.append(secret_scan.Secret("Erlang cookie", f.read().strip()))
    for key in ("client-key.pem", "server-key.pem", "ca-key.pem"):
        with open(os.path.join(s.work, "tls", key), encoding="utf-8") as f:
            found.append(secret_scan.Secret(f"TLS {key}", f.read()))
    for cluster, (token, key) in sorted(creds.items()):
        found.append(secret_scan.Secret(f"{cluster} kubeconfig token", token))
        if key:
            found.append(secret_scan.Secret(f"{cluster} kubeconfig client key", key))
    return found


def read_trace(s):
    """Every daemon's trace events (`syncbusctl trace --all`), kept in scan/trace-events.jsonl:
    (syncbusctl's exit status, the events)."""
    rc, out, _ = s.ctl("trace", "--all", "-c", s.ctl_config, "--since", "24h", timeout=600)
    evidence = os.path.join(s.work, "scan")
    os.makedirs(evidence, exist_ok=True)
    with open(os.path.join(evidence, "trace-events.jsonl"), "w", encoding="utf-8") as f:
        f.write(out)
    events = []
    for line in out.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    return rc, events


def scan_for_secrets(s, creds, trace):
    """Logs, broker messages (every queue, the dead-letter index and the trace stream: `trace`
    from read_trace, in scan/), metrics: none may hold a secret. A planted copy of one proves the
    scan finds them; an input that could not be read, or only in part, fails the check
    (ScanInputs). The daemons are stopped on the way: after their metrics pages are read, before
    the queues are, so that no message is held unacknowledged by a consumer (the management API
    cannot read those) and every log is complete."""
    secret_list = collect_secrets(s, creds)
    scanner = secret_scan.Scanner(secret_list)
    evidence = os.path.join(s.work, "scan")
    os.makedirs(evidence, exist_ok=True)
    rc, trace_events = trace
    inputs = ScanInputs(trace_rc=rc, trace_events=len(trace_events))
    with open(os.path.join(evidence, "metrics.txt"), "w", encoding="utf-8") as f:
        inputs.daemons = {d.name: d.running() and not d.stopped for d in s.daemons()}
        urls = [d.admin_url + "/metrics" for d in s.daemons() if inputs.daemons[d.name]]
        for url in urls + s.rabbit.prometheus_urls():
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    f.write(f"# {url}\n" + r.read().decode(errors="replace"))
                inputs.pages[url] = None
            except OSError as e:
                f.write(f"# {url}: {e}\n")
                inputs.pages[url] = str(e)
    s.sampler.stop()
    s.supervisor.stop_all()
    # Messages still in the broker's queues, read without consuming; the parked ones, with their
    # headers and bodies, from the dead-letter index.
    with open(os.path.join(evidence, "messages.json"), "w", encoding="utf-8") as f:
        for queue in s.scanned_queues:
            try:
                ready, unacked = s.rabbit.queue_counts(queue)
                asked = ready + unacked + secret_scan.STATS_SLACK
                messages = s.rabbit.messages(queue, asked)
                for m in messages:
                    f.write(json.dumps({"queue": queue, "message": m}) + "\n")
                inputs.queues[queue] = (len(messages), asked, ready, unacked)
            except Exception as e:
                inputs.queues[queue] = str(e)
        try:
            for d in s.parked():
                f.write(json.dumps({"queue": "syncbus.dead", "message": d}) + "\n")
        except RunError as e:
            inputs.queues["syncbus.dead (its index)"] = str(e)
    # Everything the run wrote, but the credential files themselves (mounted Secrets in a
    # deployment) and the brokers' state; the RabbitMQ nodes' logs are scanned on their own.
    credential_files = ["secrets/*", "tls/*", "hub.kubeconfig", "rabbitmq/*"]
    findings = scanner.scan_tree(s.work, exclude=credential_files)
    for root in s.rabbit.log_dirs():
        inputs.log_dirs[root] = os.path.isdir(root)
        if inputs.log_dirs[root]:
            findings += scanner.scan_tree(root)
    inputs.unreadable = list(scanner.errors)
    problems = [f"{f.secret} ({f.form}) at {f.location}: {f.excerpt}" for f in findings[:50]]
    problems += inputs.problems()
    read = sum(q[0] for q in inputs.queues.values() if not isinstance(q, str))
    checks = [Check("no secret in logs, messages, trace events or metrics", not problems,
                    f"{len(secret_list)} secrets ({len(scanner.needles)} forms), {scanner.sources} files, "
                    f"{scanner.bytes_scanned / 1e6:.1f} MB: logs of every process and RabbitMQ node, "
                    f"{len(trace_events)} trace events (syncbusctl exit {rc}), {read} messages of "
                    f"{len(inputs.queues)} queues, {sum(e is None for e in inputs.pages.values())} metrics pages",
                    problems)]
    # The scan finds a secret that is there: plant one cluster's token in a copy of a log.
    planted = os.path.join(s.work, "planted", "consumer-1.log")
    os.makedirs(os.path.dirname(planted), exist_ok=True)
    with open(os.path.join(s.work, "consumer-1.log"), encoding="utf-8", errors="replace") as f:
        text = f.read()
    cluster, (token, _) = sorted(creds.items())[len(creds) // 2]
    with open(planted, "w", encoding="utf-8") as f:
        f.write(text + f"\nrequest failed Authorization: Bearer {token}\n")
    hit = scanner.scan_tree(os.path.dirname(planted))
    shutil.rmtree(os.path.dirname(planted))
    checks.append(Check("the scan finds a planted secret", any(f.secret.startswith(cluster) for f in hit),
                        f"{cluster}'s token planted in a copy of consumer-1.log: "
                        f"{len(hit)} finding(s)"))
    return checks


# ---------------------------------------------------------------------------------------------
# The run


def run(args):
    if args.work_dir and os.path.isdir(args.work_dir) and os.listdir(args.work_dir):
        raise RunError(f"--work-dir {args.work_dir} is not empty (an earlier run's?): give a new or empty one")
    work = args.work_dir or tempfile.mkdtemp(prefix="syncbus-chaos.", dir=os.environ.get("TMPDIR", "/tmp"))
    os.makedirs(work, exist_ok=True)
    note(f"work dir {work}")
    rng = make_rng(args.seed)
    run_started = time.monotonic()
    s = System(args, work)
    checks = []
    try:
        start_system(s)
        # The rollout in waves: its first generation rolls out in the initial sync, the next ones
        # during the faults.
        rollout = chaos_rollout.RolloutStream(s.sim.hub, rng)
        rollout.create()
        converge = wait_converged(s, 1800, "initial sync")
        edits = EditStream(s.sim.hub, s.sim.names, args.syncsets, args.selector_syncsets, args.edit_rate,
                           args.selector_edit_every, rng)
        chaos = Chaos(s, args.faults, args.fault_interval, args.lease, rng, samples=args.samples)
        edits.start()
        chaos.start()
        rollout.start()
        chaos_started = now()
        poison_at = args.faults // 2
        victim = s.sim.names[rng.randrange(len(s.sim.names))]
        while not chaos.done():
            if not args.no_poison and poison_at is not None and len(chaos.faults) >= poison_at:
                poison_at = None
                checks += poison_episode(s, chaos, edits, victim, timeout=args.poison_timeout)
            if s.sim.proc.poll() is not None:
                raise RunError(f"the simulator exited ({s.sim.proc.returncode}) in the middle of the run "
                               f"(log: {s.sim.log_path})")
            time.sleep(1)
        chaos.stop()
        rollout.stop()
        note(f"{len(chaos.faults)} faults in {now() - chaos_started:.0f}s; waiting for every process and node")
        s.sim.clear_faults(["*"])
        wait_ready(s, timeout=300)
        # The edit stream is the work whose recovery the last protected fault is timed by: it
        # goes on until that fault's quiet window is over.
        time.sleep(max(0.0, chaos.quiet_until - now()))
        edits.stop()
        edits_stopped = now()
        note(f"edit stream stopped: {edits.edits} edits ({edits.failed} refused during hub faults)")
        final, took = rollout.wait_complete(args.converge_timeout)
        note(f"rollout of {chaos_rollout.SET_NAME}: {rollout.edits} edits during the faults, generation "
             f"{final and final.get('generation')} {final and final.get('phase')} {took:.0f}s after them")
        after_faults = wait_converged(s, args.converge_timeout, "after the last fault")
        s.sim.flush_journal()
        creds = cluster_credentials(s.sim.hub)
        checks.append(verify_fleet(s.sim.hub, s.sim.names, creds,
                                   args.clusters * ((args.syncsets + args.selector_syncsets) * args.resources
                                                    + chaos_rollout.RESOURCES)))
        checks.append(explain_dead_letters(s.parked(), s.poison_requests))
        trace = read_trace(s)
        work = WorkTimes(trace[1], edits.times)
        checks.append(analyse_journal(s.sim.journal, chaos.faults, s.sim.names,
                                      exclude=set() if args.no_poison else {victim},
                                      identities={i for d in s.consumers() for i in d.identities()},
                                      work=work, lease_seconds=args.lease))
        history = rollout_history(s.sim.journal, chaos_rollout.SET_NAME, rollout.marks, s.sim.names)
        checks.append(check_rollout_held(history, rollout.marks, s.sim.names))
        checks.append(check_boundary_during_faults(history, chaos.faults))
        checks.append(check_rollout_complete(history, final, s.sim.hub.get(rollout.path)["metadata"]["generation"],
                                             chaos.faults))
        measure_recovery(chaos.faults, work, [d.name for d in s.consumers()], edits_stopped)
        exits = {d.name: (d.kind, [how for _, how, ours in d.exits if not ours]) for d in s.daemons()}
        planted = {} if args.no_poison else s.planted_crashes(f"{victim}/{victim}")
        checks.append(explain_exits(exits, planted))
        checks.append(every_kind_injected(chaos.faults, Chaos.WEIGHTS))
        if chaos.errors:
            checks.append(Check("every fault could be injected", False, f"{len(chaos.errors)} could not",
                                chaos.errors))
        crashes = [] if args.no_poison else s.planted_crash_faults(f"{victim}/{victim}")
        rows, notes = recovery_table(chaos.faults, args.lease, crashes)
        checks.append(goals_met(rows, notes, args.samples))
        checks += scan_for_secrets(s, creds, trace)
        report(args, s, chaos, edits, rollout, checks, converge, after_faults, rows, notes, run_started)
    finally:
        s.stop(args.keep)
        if args.keep and s.rabbit:
            note(f"kept: {work} (RabbitMQ cluster still running: scripts/rabbitmq-cluster stop --dir "
                 f"{s.rabbit.dir} --wipe)")
    failed = [c for c in checks if not c.ok]
    if not failed and not args.keep and not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


def report(args, s, chaos, edits, rollout, checks, converge, after_faults, rows, notes, run_started):
    by_kind = {}
    for f in chaos.faults:
        by_kind[f.kind] = by_kind.get(f.kind, 0) + 1
    print()
    print(f"== chaos run on RabbitMQ {args.rabbitmq}: {args.clusters} clusters, {len(chaos.faults)} faults, "
          f"{edits.edits} edits, {(time.monotonic() - run_started) / 60:.1f} min")
    print("faults: " + ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())))
    print(f"initial sync {converge:.0f}s; converged {after_faults:.0f}s after the faults ended")
    print(f"rollout of {chaos_rollout.SET_NAME}: {rollout.edits} edits during the faults "
          f"({'one' if rollout.restarted else 'none'} in the middle of a rollout), {len(rollout.halts)} halts seen")
    print()
    print("recovery, wall seconds from the fault (consumer faults: until every cluster whose sync the victim "
          "had in progress at the fault had its status stored again; with sticky claims, every cluster it held "
          "that got a request soon after the fault had its status stored after that request; undisturbed: no "
          "other fault that could stretch it began meanwhile or was still going on, the goals are judged on "
          "those)")
    print(format_recovery(rows))
    victims = [f for f in chaos.faults if f.kind in ("consumer-kill", "consumer-pause")]
    if victims:
        held = sum(f.recovery.get("held clusters", 0) for f in victims)
        print(f"  consumer faults: the victims held {held} cluster leases in all, by the journal "
              f"({', '.join(str(f.recovery.get('held clusters', 0)) for f in victims)}; by the hub at the "
              f"fault: {', '.join(str(len(f.held)) for f in victims)})")
        window = request_window("consumer-kill", args.lease)
        print("  consumer faults: \"clusters synced again\" timed on: " + "; ".join(
            f"{f.kind} {f.target}: " + (f"{len(f.requested)} held cluster(s) with a request within {window:.0f}s"
                                        if f.requested else f"{len(f.in_progress)} sync(s) in progress")
            for f in victims) + " (with sticky claims the held clusters with a request within the window, "
            "else the syncs in progress at the fault; the clusters a victim held idle get no status until a "
            "request for them comes)")
    for n in notes:
        print("  " + n)
    print()
    for c in checks:
        print(f"[{'ok' if c.ok else 'FAILED'}] {c.name}: {c.detail}")
        for p in c.problems[:20]:
            print(f"      {p}")
        if len(c.problems) > 20:
            print(f"      ... and {len(c.problems) - 20} more")
    with open(os.path.join(s.work, "faults.jsonl"), "w", encoding="utf-8") as f:
        for fault in chaos.faults:
            f.write(json.dumps(fault.__dict__, default=str) + "\n")
    failed = [c for c in checks if not c.ok]
    print()
    print(f"chaos: {'FAILED: ' + ', '.join(c.name for c in failed) if failed else 'all checks passed'}"
          f" (details: {s.work})")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="scripts/chaos", description=__doc__.split("\n\n")[0])
    p.add_argument("--short", action="store_true",
                   help="the test suite's variant: 200 clusters, 20 faults, 10 s cluster leases")
    p.add_argument("--clusters", type=int)
    p.add_argument("--faults", type=int, help="faults to inject (at least 100 by default)")
    p.add_argument("--fault-interval", type=float, help="mean seconds between faults")
    p.add_argument("--samples", type=int,
                   help="undisturbed faults each goal is judged on, at least (default 3; --short 1): the run "
                        "goes on past --faults until each kind with a goal has had that many")
    p.add_argument("--syncsets", type=int, default=2)
    p.add_argument("--selector-syncsets", type=int, default=2)
    p.add_argument("--resources", type=int, default=3)
    p.add_argument("--consumers", type=int, default=3)
    p.add_argument("--publishers", type=int, default=2)
    p.add_argument("--prefetch", type=int, default=10)
    p.add_argument("--lease", type=int, help="cluster lease duration, seconds (default 20, as in production)")
    p.add_argument("--rabbitmq", default=os.environ.get("SYNCBUS_RABBITMQ", "3.10"), choices=["3.10", "4.0"],
                   help="RabbitMQ version of the cluster (default: $SYNCBUS_RABBITMQ, else 3.10)")
    p.add_argument("--latency", default="27,230", help="target latency p50,p99 in ms")
    p.add_argument("--edit-rate", type=float, default=2.0, help="SyncSet edits per second")
    p.add_argument("--selector-edit-every", type=float, help="seconds between SelectorSyncSet edits")
    p.add_argument("--no-poison", action="store_true", help="leave out the poison request")
    p.add_argument("--per-sync-claims", action="store_true",
                   help="the consumers give each cluster claim back after its sync (consumer.clusterLease.sticky: "
                        "false); by default they keep them while they live (liveness Leases in the namespace syncbus)")
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--work-dir", help="keep everything here")
    p.add_argument("--keep", action="store_true", help="leave the RabbitMQ cluster and files behind")
    args = p.parse_args(argv)
    short = args.short
    args.clusters = args.clusters or (200 if short else 1000)
    args.faults = args.faults or (20 if short else 100)
    args.samples = args.samples or (1 if short else 3)
    args.fault_interval = args.fault_interval or (5.0 if short else 7.0)
    args.lease = args.lease or (10 if short else 20)
    args.selector_edit_every = args.selector_edit_every or (30.0 if short else 120.0)
    args.crash_backoff = 2.0 if short else 10.0
    # Delay tiers (retries, and holding back a request that ended unsettled): shorter than
    # production's 5s..6m so that a run's retries and its poison request settle within minutes.
    args.retry_tiers = ["1s", "2s", "5s", "10s"] if short else ["5s", "15s", "30s", "60s"]
    args.healthy_window = 10 if short else 60
    args.poison_timeout = 300 if short else 900
    args.converge_timeout = 600 if short else 1800
    p50, p99 = (float(x) for x in args.latency.split(","))
    args.latency = (p50, p99)
    args.build_dir = os.path.abspath(args.build_dir)
    return args


def main(argv):
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    note(f"seed {args.seed}")
    try:
        return run(args)
    except RunError as e:
        print(f"chaos: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
