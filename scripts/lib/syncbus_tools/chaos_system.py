"""The system a chaos run (scripts/chaos) works on: a RabbitMQ cluster of Debian nodes on loopback
(scripts/rabbitmq-cluster), the Kubernetes simulator, and the publishers and consumers under a
supervisor that restarts them as a kubelet would, with a sampler of their metrics. Faults and
checks live in chaos_faults.py and chaos_checks.py."""

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from syncbus_tools.testbed import (KubeClient, RunError, free_port, metric_sum, parse_metrics, read_env_file,
                                   wait_or_kill)


def note(message):
    print(f"chaos: {message}", flush=True)


def now():
    """Wall-clock seconds: the clock the simulator's journal and the daemons' leases use."""
    return time.time()


class Background:
    """A loop on a thread of its own between start() and stop(): the subclass's `_loop`, which
    returns once `_stop` is set."""

    def __init__(self, name):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def _loop(self):
        raise NotImplementedError

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


# ---------------------------------------------------------------------------------------------
# RabbitMQ cluster


class RabbitCluster:
    """A cluster started by scripts/rabbitmq-cluster; nodes are killed and started one by one."""

    def __init__(self, root, work, nodes, tls_dir, version):
        self.root = root
        self.version = version
        self.dir = os.path.join(work, "rabbitmq")
        self.log = os.path.join(work, "rabbitmq-cluster.log")
        args = [os.path.join(root, "scripts", "rabbitmq-cluster"), "start", "--dir", self.dir,
                "--nodes", str(nodes), "--rabbitmq", version, "--fresh",
                # A node boots in seconds, but took minutes on a machine saturated by builds.
                "--start-timeout", "300"]
        if tls_dir:
            args += ["--tls-dir", tls_dir]
        started = time.monotonic()
        with open(self.log, "ab") as f:
            rc = subprocess.call(args, stdout=f, stderr=subprocess.STDOUT)
        if rc != 0:
            self.stop(wipe=False)   # whatever nodes did start; the data stays for a look
            raise RunError(f"the RabbitMQ cluster did not start (log: {self.log})")
        self.start_seconds = time.monotonic() - started
        self.env = read_env_file(os.path.join(self.dir, "cluster.env"))
        self.node_dirs = self.env["SYNCBUS_NODE_DIRS"].split()
        self.node_names = self.env["SYNCBUS_CLUSTER_NODES"].split()
        self.addresses = self.env["SYNCBUS_AMQP_ADDRESSES"].split(",")
        self.mgmt_urls = [u.rstrip("/") for u in self.env["SYNCBUS_MGMT_URLS"].split()]
        self.user = self.env["SYNCBUS_BROKER_USER"]
        self.password = self.env["SYNCBUS_BROKER_PASSWORD"]
        self.tls = self.env.get("SYNCBUS_AMQP_TLS") == "1"
        self.auth = "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
        self._lock = threading.Lock()
        self.down = set()   # indexes of nodes killed and not started again yet

    def node_env(self, k):
        return read_env_file(os.path.join(self.node_dirs[k], "broker.env"))

    def prometheus_urls(self):
        return [f"http://127.0.0.1:{self.node_env(k)['SYNCBUS_PROMETHEUS_PORT']}/metrics"
                for k in range(len(self.node_dirs))]

    def log_dirs(self):
        """The nodes' own logs and those of the scripts that started them."""
        return [os.path.join(d, "log") for d in self.node_dirs] + [os.path.join(self.dir, "log")]

    def kill(self, k):
        """SIGKILL of node k's Erlang VM: a crashed pod."""
        pid = int(self.node_env(k)["SYNCBUS_BROKER_PID"])
        with self._lock:
            self.down.add(k)
        os.kill(pid, signal.SIGKILL)

    def start_node(self, k):
        """Starts node k again with its data; returns the seconds until it was ready."""
        started = time.monotonic()
        with open(self.log, "ab") as f:
            rc = subprocess.call([os.path.join(self.root, "scripts", "rabbitmq-node"), "start",
                                  "--dir", self.node_dirs[k]], stdout=f, stderr=subprocess.STDOUT)
        if rc != 0:
            raise RunError(f"node {self.node_names[k]} did not start again (log: {self.log})")
        with self._lock:
            self.down.discard(k)
        return time.monotonic() - started

    def up_nodes(self):
        with self._lock:
            return [k for k in range(len(self.node_dirs)) if k not in self.down]

    def api(self, method, path, body=None, timeout=10, node=None):
        """The management API of a running node (node k, or the first that answers)."""
        last = None
        for k in ([node] if node is not None else self.up_nodes()):
            req = urllib.request.Request(self.mgmt_urls[k] + path, method=method,
                                         data=None if body is None else json.dumps(body).encode())
            req.add_header("Authorization", self.auth)
            req.add_header("Content-Type", "application/json")
            req.add_header("X-Reason", "scripts/chaos: fault injection")
            try:
                with urllib.request.urlopen(req, timeout=timeout) as response:
                    text = response.read()
                return json.loads(text) if text else None
            except urllib.error.HTTPError as e:
                if e.code in (404, 400):
                    raise
                last = e
            except (urllib.error.URLError, OSError) as e:
                last = e
        raise RunError(f"management API {method} {path}: {last}")

    def queue(self, name):
        return self.api("GET", "/api/queues/%2F/" + urllib.parse.quote(name, safe=""))

    def queue_leader(self, name):
        """The node name of a quorum queue's leader."""
        q = self.queue(name)
        return q.get("leader") or q.get("node")

    def running_members(self, node_name):
        """(running in the cluster as node `node_name`'s peers see it, online member of every
        quorum queue)."""
        running = False
        for n in self.api("GET", "/api/nodes"):
            if n.get("name") == node_name:
                running = bool(n.get("running"))
        online = all(node_name in (q.get("online") or [])
                     for q in self.api("GET", "/api/queues/%2F") if q.get("type") == "quorum")
        return running, online

    def set_policy(self, policy):
        """A policy as `syncbusctl topology` prints it (definitions format), on vhost /."""
        body = {k: policy[k] for k in ("pattern", "apply-to", "priority", "definition")}
        self.api("PUT", "/api/policies/%2F/" + urllib.parse.quote(policy["name"], safe=""), body)

    def connections(self):
        return self.api("GET", "/api/connections")

    def close_connections(self, connection_name):
        """Closes the connections whose client named itself `connection_name` (an operator's
        "Force close"). Returns how many."""
        closed = 0
        for c in self.connections():
            if (c.get("client_properties") or {}).get("connection_name") == connection_name:
                try:
                    self.api("DELETE", "/api/connections/" + urllib.parse.quote(c["name"], safe=""))
                    closed += 1
                except urllib.error.HTTPError as e:
                    if e.code != 404:
                        raise
        return closed

    def queue_counts(self, queue, settle=15.0):
        """(ready, unacknowledged) messages of a queue, from its statistics; once no consumer is
        connected, waits up to `settle` seconds for the unacknowledged count to reach 0 (the
        statistics lag by up to a collection interval)."""
        deadline = time.monotonic() + settle
        while True:
            q = self.queue(queue)
            ready, unacked = q.get("messages_ready") or 0, q.get("messages_unacknowledged") or 0
            if not unacked or q.get("consumers") or time.monotonic() > deadline:
                return ready, unacked
            time.sleep(0.5)

    def messages(self, queue, count):
        """Up to `count` messages of a (non-stream) queue, read without consuming them. Each counts
        as a return towards the queue's delivery limit: read once, after the run."""
        return self.api("POST", "/api/queues/%2F/" + urllib.parse.quote(queue, safe="") + "/get",
                        {"count": count, "ackmode": "ack_requeue_true", "encoding": "auto",
                         "truncate": 100000}, timeout=60)

    def amqp_yaml(self, tls_dir, password_file, heartbeat_seconds):
        lines = ["amqp:",
                 "  addresses: [" + ", ".join(f'"{a}"' for a in self.addresses) + "]",
                 f"  user: {self.user}",
                 f"  passwordFile: {password_file}",
                 f"  heartbeatSeconds: {heartbeat_seconds}",
                 "  connectTimeout: 3s"]
        if self.tls:
            lines += ["  tls:",
                      "    enabled: true",
                      f"    caFile: {os.path.join(tls_dir, 'ca.pem')}",
                      f"    certFile: {os.path.join(tls_dir, 'client.pem')}",
                      f"    keyFile: {os.path.join(tls_dir, 'client-key.pem')}",
                      "    verifyPeer: true"]
        return "\n".join(lines) + "\n"

    def stop(self, wipe=True):
        """Stops the cluster; one whose data is wiped anyway is killed first, which saves the
        nodes' orderly shutdown (about 12 s). The nodes' logs stay, in rabbitmq-logs/ beside the
        cluster's directory: a failed run's details must show what the broker did."""
        if wipe:
            kept = os.path.join(os.path.dirname(self.dir), "rabbitmq-logs")
            for node_dir in getattr(self, "node_dirs", []):
                log_dir = os.path.join(node_dir, "log")
                if os.path.isdir(log_dir):
                    shutil.copytree(log_dir, os.path.join(kept, os.path.basename(node_dir)), dirs_exist_ok=True)
            for k in self.up_nodes():
                try:
                    self.kill(k)
                except (OSError, KeyError, ValueError):
                    pass   # already gone, or never started
        args = [os.path.join(self.root, "scripts", "rabbitmq-cluster"), "stop", "--dir", self.dir]
        if wipe:
            args.append("--wipe")
        with open(self.log, "ab") as f:
            subprocess.call(args, stdout=f, stderr=subprocess.STDOUT)


# ---------------------------------------------------------------------------------------------
# Simulator


class Simulator:
    """syncbus-kubesim with a fleet, per-cluster credentials and a write journal."""

    def __init__(self, bin_dir, work, clusters, syncsets, selector_syncsets, resources, latency, token):
        self.work = work
        self.kubeconfig = os.path.join(work, "hub.kubeconfig")
        self.journal = os.path.join(work, "journal.jsonl")
        self.log_path = os.path.join(work, "kubesim.log")
        self.clusters = clusters
        self.latency = latency
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [os.path.join(bin_dir, "tests", "kubesim", "syncbus-kubesim"),
             "--clusters", str(clusters), "--syncsets", str(syncsets),
             "--selector-syncsets", str(selector_syncsets), "--resources", str(resources),
             "--latency-p50-ms", str(latency[0]), "--latency-p99-ms", str(latency[1]),
             "--threads", "2", "--log-level", "warn", "--host-per-cluster", "--cluster-credentials",
             "--journal", self.journal, "--token", token, "--kubeconfig-out", self.kubeconfig],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 900
        while not (os.path.exists(self.kubeconfig) and os.path.getsize(self.kubeconfig) > 0):
            if self.proc.poll() is not None:
                raise RunError(f"the simulator exited with {self.proc.returncode} (log: {self.log_path})")
            if time.monotonic() > deadline:
                raise RunError(f"the simulator did not come up (log: {self.log_path})")
            time.sleep(0.2)
        self.hub = KubeClient(self.kubeconfig)
        self.names = self.hub.get("/_sim/clusters")["clusters"]

    def set_faults(self, clusters, **spec):
        """Fault settings for these clusters ("hub" for the hub); the run's latency is kept."""
        body = {"clusters": clusters, "latency": {"p50Ms": self.latency[0], "p99Ms": self.latency[1]}}
        body.update(spec)
        self.hub.request("PUT", "/_sim/faults", body)

    def clear_faults(self, clusters):
        self.set_faults(clusters)

    def flush_journal(self):
        self.hub.request("POST", "/_sim/journal/flush", {})

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            wait_or_kill(self.proc, 30)


# ---------------------------------------------------------------------------------------------
# Daemons under a supervisor


class Daemon:
    """One publisher or consumer process: its command, log, admin endpoint and life history."""

    def __init__(self, name, kind, argv, env, log_path, admin_url):
        self.name = name
        self.kind = kind            # "publisher" or "consumer"
        self.argv = argv
        self.env = env
        self.log_path = log_path
        self.admin_url = admin_url
        self.proc = None
        self.started_at = 0.0
        self.restart_at = None      # wall time to start again, when down
        self.killed_by_us = False   # the next exit is a fault we injected
        self.stopped = False        # SIGSTOPped by a fault
        self.exits = []             # (wall time, "signal NAME" or "exit N", injected)
        self.crash_times = []       # exits we did not cause
        self.log_offsets = []       # per start: where that process's lines begin in its log
        self._identities = {}       # a start's log offset -> the identity that process logged

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def identity(self):
        """The identity the running process holds cluster Leases as, as it logged it (a consumer's
        "consuming ... identity=<identity>" line, which comes before it takes any work); "" until
        it has logged one."""
        return self._identity_of(len(self.log_offsets) - 1) if self.log_offsets else ""

    def identities(self):
        """Every identity a process of this daemon logged, in order of its starts."""
        return [i for i in (self._identity_of(k) for k in range(len(self.log_offsets))) if i]

    def _identity_of(self, k):
        """The identity the process of start k logged, from its lines only ("" if none yet)."""
        offset = self.log_offsets[k]
        if offset not in self._identities:
            end = self.log_offsets[k + 1] if k + 1 < len(self.log_offsets) else None
            found = logged_identity(self.log_path, offset, end)
            if not found:
                return ""
            self._identities[offset] = found
        return self._identities[offset]


_IDENTITY = re.compile(r'(?:^|\s)identity=("(?:[^"\\]|\\.)*"|\S+)|"identity":\s*"((?:[^"\\]|\\.)*)"')


def logged_identity(log_path, offset, end=None):
    """The identity of the first "consuming" line in the log between byte `offset` and `end` (the
    end of the file when None; "" if none there): a consumer's lease identity, as it logs it in
    text (identity=...) or JSON ("identity": "...")."""
    try:
        with open(log_path, "rb") as f:
            f.seek(offset)
            text = f.read(-1 if end is None else end - offset).decode("utf-8", errors="replace")
    except OSError:
        return ""
    for line in text.splitlines():
        if "consuming" not in line:
            continue
        m = _IDENTITY.search(line)
        if m:
            value = m.group(2) if m.group(2) is not None else m.group(1)
            return json.loads(value) if value.startswith('"') else value
    return ""


class Supervisor:
    """Starts the daemons and restarts whatever exits, as a kubelet does: after the delay a fault
    asked for, or, for a crash, after an exponential back-off (base, 2 x base, ... up to 16 x)
    that resets once a process has run for `healthy_after` seconds."""

    def __init__(self, crash_backoff, healthy_after=120.0):
        self.daemons = {}
        self.crash_backoff = crash_backoff
        self.healthy_after = healthy_after
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="supervisor", daemon=True)

    def add(self, daemon):
        self.daemons[daemon.name] = daemon
        self._start(daemon)

    def start_watching(self):
        self._thread.start()

    def _start(self, d):
        log = open(d.log_path, "ab")
        d.log_offsets.append(log.tell())
        d.proc = subprocess.Popen(d.argv, stdout=log, stderr=subprocess.STDOUT, env=d.env,
                                  start_new_session=True)
        log.close()
        d.started_at = now()
        d.restart_at = None
        d.killed_by_us = False
        d.stopped = False

    def kill(self, name, restart_after):
        """SIGKILL (a SIGSTOPped process dies too); started again after `restart_after` s."""
        with self._lock:
            d = self.daemons[name]
            if not d.running():
                return False
            d.killed_by_us = True
            d.restart_after = restart_after
            d.proc.send_signal(signal.SIGKILL)
            return True

    def pause(self, name):
        with self._lock:
            d = self.daemons[name]
            if not d.running():
                return False
            d.proc.send_signal(signal.SIGSTOP)
            d.stopped = True
            return True

    def resume(self, name):
        with self._lock:
            d = self.daemons[name]
            if d.running():
                d.proc.send_signal(signal.SIGCONT)
            d.stopped = False

    def _loop(self):
        while not self._stop.wait(0.1):
            with self._lock:
                for d in self.daemons.values():
                    self._tend(d)

    def _tend(self, d):
        t = now()
        if d.proc is not None and d.restart_at is None and d.proc.poll() is not None:
            code = d.proc.returncode
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
            d.exits.append((t, how, d.killed_by_us))
            if d.killed_by_us:
                d.restart_at = t + d.restart_after
            else:
                recent = [c for c in d.crash_times if c > d.started_at - self.healthy_after]
                if t - d.started_at >= self.healthy_after:
                    recent = []
                d.crash_times.append(t)
                d.restart_at = t + min(self.crash_backoff * 2 ** len(recent), 16 * self.crash_backoff)
            d.stopped = False
        if d.restart_at is not None and t >= d.restart_at:
            self._start(d)

    def stop_all(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        for d in self.daemons.values():
            if d.running():
                if d.stopped:
                    d.proc.send_signal(signal.SIGCONT)
                d.proc.send_signal(signal.SIGTERM)
        for d in self.daemons.values():
            if d.proc is not None:
                wait_or_kill(d.proc, 40)


# ---------------------------------------------------------------------------------------------
# Metrics sampler


class Sampler:
    """Scrapes every running publisher's /metrics every `interval` seconds on a thread per
    publisher (a stopped process must not hold up the others) and keeps the latest of what the
    faults aim by: its leadership. (A consumer fault's victim is chosen by the Leases it holds,
    from the hub.)"""

    def __init__(self, supervisor, interval=0.25):
        self.supervisor = supervisor
        self.interval = interval
        self.series = {}   # daemon name -> (wall time, {key: value}) of the latest scrape
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = []

    def start(self):
        for name, d in self.supervisor.daemons.items():
            if d.kind != "publisher":
                continue
            self.series[name] = (0.0, {})
            t = threading.Thread(target=self._loop, args=(name,), name="sample-" + name, daemon=True)
            t.start()
            self._threads.append(t)

    def _loop(self, name):
        d = self.supervisor.daemons[name]
        while not self._stop.wait(self.interval):
            if not d.running() or d.stopped:
                continue
            try:
                with urllib.request.urlopen(d.admin_url + "/metrics", timeout=2) as r:
                    samples = parse_metrics(r.read().decode())
            except (urllib.error.URLError, OSError, ValueError):
                continue
            values = {"leader": metric_sum(samples, "syncbus_publisher_leader")}
            with self._lock:
                self.series[name] = (now(), values)

    def latest(self, name):
        with self._lock:
            return self.series.get(name, (0.0, {}))

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join()


def write_daemon_config(path, body):
    with open(path, "w", encoding="utf-8") as f:
        f.write(body)
    os.chmod(path, 0o600)


def admin_yaml():
    port = free_port()
    return port, f"admin: {{listen: \"127.0.0.1:{port}\"}}\n"
