"""What the chaos run and the whole-system benchmarks share: child processes and their /proc
readings, free ports, env files, Kubernetes REST calls, Prometheus text, a private RabbitMQ node
and its management API, and RunError. Each run's own logic lives in its module (chaos*.py,
bench_*.py)."""

import base64
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request

import yaml

CLK_TCK = os.sysconf("SC_CLK_TCK")
# Where the consumers' liveness Leases live with sticky claims (the default): syncbus's own
# namespace, which the simulator makes (tests/kubesim/fleet.h) as a deployment has it.
LIVENESS_NAMESPACE = "syncbus"


def claims_yaml(per_sync=False):
    """consumer.clusterLease's keys (without braces) for the consumers' claims: sticky (the
    default, liveness Leases in LIVENESS_NAMESPACE), or given back after each sync."""
    return "sticky: false" if per_sync else f"sticky: true, livenessNamespace: {LIVENESS_NAMESPACE}"


def wait_or_kill(proc, timeout):
    """Waits `timeout` seconds for `proc` to exit, then SIGKILLs it and reaps it."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class RunError(Exception):
    """A step of a run (a benchmark, the chaos run) that cannot go on: printed as one line, exit 1."""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def admin_port(log_text):
    """The port of a daemon's admin endpoint from its log ("admin endpoint listening port=N", in text
    or JSON lines), or None before it was logged."""
    m = re.search(r'admin endpoint listening.*?port[=":\s]+([0-9]+)', log_text)
    return int(m.group(1)) if m else None


def subtract(after, before, own=None):
    """after - before - own, per key; keys that end at zero dropped."""
    out = {}
    for k, v in after.items():
        d = v - before.get(k, 0) - (own or {}).get(k, 0)
        if d > 0:
            out[k] = d
    return out


def read_env_file(path):
    """KEY=VALUE lines (broker.env, cluster.env, envtest.env) as a dict."""
    values = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                    value = value[1:-1]   # sourceable shell: KEY="a b c"
                values[key] = value
    return values


# ---------------------------------------------------------------------------------------------
# Processes


class Processes:
    """Children started by a run, each with its log file; all stopped by stop_all()."""

    def __init__(self, work):
        self.work = work
        self.children = {}

    def start(self, name, argv, env=None):
        log = open(os.path.join(self.work, name + ".log"), "wb")
        child = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                 start_new_session=True)
        log.close()
        self.children[name] = child
        return child

    def stop(self, name, sig=signal.SIGTERM, timeout=30):
        child = self.children.pop(name, None)
        if child is None or child.poll() is not None:
            return
        child.send_signal(sig)
        wait_or_kill(child, timeout)

    def check_alive(self, name):
        child = self.children.get(name)
        if child is not None and child.poll() is not None:
            raise RunError(f"{name} exited with {child.returncode} "
                           f"(log: {os.path.join(self.work, name + '.log')})")

    def stop_all(self):
        for name in list(self.children):
            self.stop(name)


def cpu_seconds(pid):
    """User + system CPU seconds of a live process."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def memory_kib(pid):
    """(VmRSS, VmHWM) in KiB."""
    rss = hwm = 0
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
    return rss, hwm


# ---------------------------------------------------------------------------------------------
# Kubernetes REST


class KubeClient:
    """JSON over HTTP(S) to one API server, from a kubeconfig (bearer token and CA data; the
    simulator's has neither). Keeps no connection: every call is one request."""

    def __init__(self, kubeconfig_file=None, server=None, token=None, ca_pem=None):
        if kubeconfig_file:
            with open(kubeconfig_file, encoding="utf-8") as f:
                config = yaml.safe_load(f)
            cluster = config["clusters"][0]["cluster"]
            user = config["users"][0].get("user") or {}
            server = cluster["server"]
            token = user.get("token")
            if "certificate-authority-data" in cluster:
                ca_pem = base64.b64decode(cluster["certificate-authority-data"]).decode()
        self.server = server.rstrip("/")
        self.token = token
        self.context = None
        if self.server.startswith("https:"):
            self.context = ssl.create_default_context(cadata=ca_pem) if ca_pem else ssl.create_default_context()
        self.sent = {}   # (verb, resource) -> requests this client sent

    def request(self, method, path, body=None, content_type="application/json", timeout=60,
                accept_codes=(200, 201)):
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.context) as response:
                code, text = response.status, response.read()
        except urllib.error.HTTPError as e:
            code, text = e.code, e.read()
        if code not in accept_codes:
            raise RunError(f"{method} {path}: HTTP {code} {text[:300].decode(errors='replace')}")
        return code, (json.loads(text) if text else None)

    def count(self, verb, resource):
        self.sent[(verb, resource)] = self.sent.get((verb, resource), 0) + 1

    def get(self, path, resource=None, accept_codes=(200,), timeout=60):
        if resource:
            self.count("get", resource)
        return self.request("GET", path, accept_codes=accept_codes, timeout=timeout)[1]

    def create(self, path, obj, resource=None, accept_codes=(200, 201, 409)):
        if resource:
            self.count("create", resource)
        return self.request("POST", path, obj, accept_codes=accept_codes)[0]

    def update(self, path, obj, resource=None, accept_codes=(200,), timeout=60):
        if resource:
            self.count("update", resource)
        return self.request("PUT", path, obj, accept_codes=accept_codes, timeout=timeout)[0]

    def get_text(self, path):
        req = urllib.request.Request(self.server + path)
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        with urllib.request.urlopen(req, timeout=60, context=self.context) as response:
            return response.read().decode()


# ---------------------------------------------------------------------------------------------
# Prometheus text


def parse_metrics(text):
    """[(name, {label: value}, float)] from the Prometheus text format: comments skipped, label
    values unescaped, a sample's timestamp ignored, a line that is no sample skipped."""
    samples = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            if "{" in line:
                name, rest = line.split("{", 1)
                label_text, value = rest.rsplit("}", 1)
                labels = _parse_labels(label_text)
            else:
                name, value = line.split(None, 1)
                labels = {}
            samples.append((name.strip(), labels, float(value.split()[0])))
        except (ValueError, IndexError):
            continue
    return samples


def _parse_labels(text):
    """{name: value} of a label set (the text between a sample's braces): name="value" pairs
    separated by commas, each value with the text format's escapes (\\\\, \\" and \\n) undone."""
    labels, i = {}, 0
    while True:
        eq = text.find("=", i)
        if eq < 0:
            return labels
        key = text[i:eq].strip().strip(",").strip()
        j = text.find('"', eq) + 1
        if j == 0:
            return labels
        value = []
        while j < len(text) and text[j] != '"':
            if text[j] == "\\" and j + 1 < len(text):
                value.append("\n" if text[j + 1] == "n" else text[j + 1])
                j += 2
            else:
                value.append(text[j])
                j += 1
        labels[key] = "".join(value)
        i = j + 1


def metric_sum(samples, name, **labels):
    return sum(v for n, l, v in samples if n == name and all(l.get(k) == w for k, w in labels.items()))


def scrape(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return parse_metrics(response.read().decode())


# ---------------------------------------------------------------------------------------------
# RabbitMQ management API


class Broker:
    """A private RabbitMQ node started through scripts/rabbitmq-node."""

    def __init__(self, root, work):
        self.root = root
        self.dir = os.path.join(work, "broker")
        log = os.path.join(work, "broker.log")
        with open(log, "wb") as f:
            rc = subprocess.call([os.path.join(root, "scripts", "rabbitmq-node"), "start", "--dir", self.dir],
                                 stdout=f, stderr=subprocess.STDOUT)
        if rc != 0:
            raise RunError(f"RabbitMQ did not start (log: {log})")
        self.env = read_env_file(os.path.join(self.dir, "broker.env"))
        auth = f"{self.env['SYNCBUS_BROKER_USER']}:{self.env['SYNCBUS_BROKER_PASSWORD']}"
        self.auth = "Basic " + base64.b64encode(auth.encode()).decode()
        self.mgmt = self.env["SYNCBUS_MGMT_URL"].rstrip("/")
        # syncbus's policies (the queues' limits), as a deployment has them: the shipped ones.
        with open(os.path.join(root, "rabbitmq", "definitions.json"), encoding="utf-8") as f:
            for p in json.load(f)["policies"]:
                self.set_policy(p)

    def set_policy(self, policy):
        """A policy as `syncbusctl topology` prints it (definitions format), on vhost /."""
        self._call("PUT", "/api/policies/%2F/" + urllib.parse.quote(policy["name"], safe=""),
                   {k: policy[k] for k in ("pattern", "apply-to", "priority", "definition")})

    def amqp_yaml(self):
        e = self.env
        return (f"amqp: {{host: 127.0.0.1, port: {e['SYNCBUS_AMQP_PORT']}, vhost: /, "
                f"user: {e['SYNCBUS_BROKER_USER']}, password: \"{e['SYNCBUS_BROKER_PASSWORD']}\"}}\n")

    def _call(self, method, path, body=None):
        req = urllib.request.Request(self.mgmt + path, method=method,
                                     data=None if body is None else json.dumps(body).encode())
        req.add_header("Authorization", self.auth)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=30) as response:
            text = response.read()
        return json.loads(text) if text else None

    def queue_depth(self, name):
        """Messages ready + unacked in a queue of vhost /, 0 if it does not exist yet."""
        try:
            q = self._call("GET", "/api/queues/%2F/" + urllib.parse.quote(name, safe=""))
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return 0
            raise
        return int(q.get("messages", 0) or 0)

    def purge(self, name):
        try:
            self._call("DELETE", "/api/queues/%2F/" + urllib.parse.quote(name, safe="") + "/contents")
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise

    def stop(self):
        subprocess.call([os.path.join(self.root, "scripts", "rabbitmq-node"), "stop", "--dir", self.dir, "--wipe"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_work_dir():
    return tempfile.mkdtemp(prefix="syncbus-bench-fleet.", dir=os.environ.get("TMPDIR", "/tmp"))
