"""The management UI screenshots of docs/operations.md, taken from a running `scripts/demo --keep`.

Called by scripts/docs-pictures --screenshots once the demo's fleet is synced. It makes some
requests fail the way they fail in production, so that every kind of queue holds something:

- the simulator's fault injection (PUT /_sim/faults) answers every request to two clusters with
  500 (retried in syncbus.retry.5s, then syncbus.retry.30s, then parked as max-attempts: the demo
  runs with --max-attempts 3), to one cluster with 429 Retry-After: 10 s (syncbus.retry.30s) and
  to one with 429 Retry-After: 60 s (syncbus.retry.2m);
- one cluster's SyncSet gets a resource of a kind no cluster serves, a permanent error that
  goes straight to the slowest tier (syncbus.retry.6m);
- one cluster's Lease is held by someone else, so its request is deferred to the shortest tier
  (syncbus.retry.5s) again and again without counting an attempt;
- a message that is not a sync request is published to syncbus.work, and a consumer parks it at
  once as undecodable.

A cluster's SyncSet is edited (a new generation) so that the publisher sends its request.

The browser: Debian's headless Chromium, driven over its DevTools protocol with
--remote-debugging-pipe (JSON messages separated by NUL bytes on file descriptors 3 and 4).
That needs nothing but the Python standard library: no WebSocket client, no Node.js and no
browser download (puppeteer would bring both, and a second copy of the protocol's client), and
no debugging port that another local user could reach.
"""

import argparse
import base64
import fcntl
import json
import os
import select
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone

PROG = "docs-pictures"
QUEUES = ("syncbus.work.change", "syncbus.work.resync", "syncbus.retry.5s", "syncbus.retry.30s",
          "syncbus.retry.2m", "syncbus.retry.6m", "syncbus.dead")
HOLDER = "docs-pictures"   # the holder of the Lease that keeps one cluster busy


def note(message):
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


class Failure(Exception):
    pass


# ------------------------------------------------------------------------------------------------
# HTTP: the simulator's hub API and control endpoints, and the RabbitMQ management API.

def http(method, url, body=None, auth=None, content_type="application/json"):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", content_type)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
    except urllib.error.HTTPError as error:
        raise Failure(f"{method} {url}: {error.code} {error.read().decode()[:300]}") from None
    except OSError as error:
        raise Failure(f"{method} {url}: {error}") from None
    return json.loads(text) if text else None


class Fleet:
    """The simulated hub: SyncSets, Leases and the fault table."""

    def __init__(self, hub_url):
        self.hub = hub_url.rstrip("/")

    def clusters(self):
        return sorted(http("GET", f"{self.hub}/_sim/clusters")["clusters"])

    def set_faults(self, clusters, **spec):
        http("PUT", f"{self.hub}/_sim/faults", {"clusters": clusters, **spec})

    def edit_syncset(self, cluster, change):
        """Applies change(syncset) to the cluster's first SyncSet and stores it (new generation)."""
        base = f"{self.hub}/apis/hive.openshift.io/v1/namespaces/{cluster}/syncsets"
        items = http("GET", base)["items"]
        if not items:
            raise Failure(f"cluster {cluster} has no SyncSet (run the demo with --syncsets 1 or more)")
        syncset = min(items, key=lambda item: item["metadata"]["name"])
        change(syncset)
        http("PUT", f"{base}/{syncset['metadata']['name']}", syncset)

    def bump(self, cluster):
        def change(syncset):
            resource = syncset["spec"]["resources"][0]
            resource.setdefault("data", {})["picture"] = str(time.time_ns())
        self.edit_syncset(cluster, change)

    def add_unknown_kind(self, cluster):
        def change(syncset):
            syncset["spec"]["resources"].append({
                "apiVersion": "pictures.example.com/v1", "kind": "Widget",
                "metadata": {"name": "no-such-kind", "namespace": "default"}})
        self.edit_syncset(cluster, change)

    def hold_lease(self, cluster):
        """Takes the cluster's Lease for an hour, as a consumer elsewhere would hold it."""
        # The consumers' cluster Leases: namespace syncbus, named "<namespace>.<name>".
        url = f"{self.hub}/apis/coordination.k8s.io/v1/namespaces/syncbus/leases"
        lease_name = f"{cluster}.{cluster}"
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        spec = {"holderIdentity": HOLDER, "leaseDurationSeconds": 3600,
                "acquireTime": now, "renewTime": now}
        try:
            lease = http("GET", f"{url}/{lease_name}")
        except Failure:
            lease = None
        if lease is None:
            http("POST", url, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                               "metadata": {"name": lease_name, "namespace": "syncbus",
                                            "labels": {"app.kubernetes.io/managed-by": "syncbus"},
                                            "annotations": {"syncbus.io/cluster": f"{cluster}/{cluster}"}},
                               "spec": spec})
        else:
            lease["spec"].update(spec)
            http("PUT", f"{url}/{lease_name}", lease)


class Broker:
    """The RabbitMQ management API of the demo's node."""

    def __init__(self, url, user, password):
        self.url = url.rstrip("/")
        self.auth = (user, password)

    def depths(self):
        queues = http("GET", f"{self.url}/api/queues/%2F?columns=name,messages", auth=self.auth)
        return {q["name"]: q.get("messages", 0) or 0 for q in queues}

    def publish_undecodable(self):
        answer = http("POST", f"{self.url}/api/exchanges/%2F/syncbus.work/publish", {
            "routing_key": "change",
            "payload": "this is not a sync request",
            "payload_encoding": "string",
            "properties": {"app_id": PROG, "message_id": "not-a-sync-request-1",
                           "content_type": "text/plain", "delivery_mode": 2},
        }, auth=self.auth)
        if not answer or not answer.get("routed"):
            raise Failure("the undecodable message was not routed to a work queue")

    def wait_for(self, what, condition, timeout):
        deadline = time.monotonic() + timeout
        while True:
            depths = self.depths()
            if condition(depths):
                return depths
            if time.monotonic() > deadline:
                shown = ", ".join(f"{name}={depths.get(name, 0)}" for name in QUEUES)
                raise Failure(f"timed out after {timeout}s waiting for {what} ({shown})")
            time.sleep(1)


def stage(fleet, broker, clusters_needed=6):
    """Makes requests fail so that every retry tier and the dead-letter queue hold messages."""
    names = fleet.clusters()
    if len(names) < clusters_needed + 1:
        raise Failure(f"the fleet has {len(names)} clusters; at least {clusters_needed + 1} needed")
    # names[0] stays healthy.
    busy, to_30s, to_2m, permanent, dead = names[1], names[2], names[3], names[4], names[5:7]
    dead_before = broker.depths().get("syncbus.dead", 0)

    note(f"holding the Lease of {busy} (its request cycles through syncbus.retry.5s)")
    fleet.hold_lease(busy)
    note(f"{', '.join(dead)}: every request answered 500 (parked after --max-attempts)")
    fleet.set_faults(dead, errorRate=1.0)
    note(f"{to_2m}: every request answered 429 with Retry-After: 60 (syncbus.retry.2m)")
    fleet.set_faults([to_2m], throttleRate=1.0, retryAfterSeconds=60)
    note(f"{to_30s}: every request answered 429 with Retry-After: 10 (syncbus.retry.30s)")
    fleet.set_faults([to_30s], throttleRate=1.0, retryAfterSeconds=10)
    for cluster in [busy, to_2m, *dead]:
        fleet.bump(cluster)
    note(f"{permanent}: a SyncSet resource of an unknown kind (permanent: syncbus.retry.6m)")
    fleet.add_unknown_kind(permanent)
    note("publishing a message that is not a sync request to syncbus.work")
    broker.publish_undecodable()

    broker.wait_for("the failing clusters' requests to be parked in syncbus.dead",
                    lambda d: d.get("syncbus.dead", 0) >= dead_before + 1 + len(dead), 180)
    # Sent only now: its request stays in syncbus.retry.30s for the next minute.
    fleet.bump(to_30s)

    def all_shown(d):
        return all(d.get(q, 0) > 0 for q in QUEUES if not q.startswith("syncbus.work."))
    depths = broker.wait_for("messages in every retry tier", all_shown, 60)
    note("queues: " + ", ".join(f"{name}={depths.get(name, 0)}" for name in QUEUES))


# ------------------------------------------------------------------------------------------------
# Chromium over the DevTools protocol on a pipe.

class Browser:
    def __init__(self, chromium, width, height, log_path):
        self.width, self.height = width, height
        self.profile = tempfile.TemporaryDirectory(prefix="docs-pictures-chromium.")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def wire_pipes():   # in the child: the protocol's descriptors 3 (commands) and 4 (answers)
            commands = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            answers = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(commands, 3)
            os.dup2(answers, 4)

        self.log = open(log_path, "ab")
        # Running as root needs --no-sandbox; the browser only opens the local management UI.
        args = [chromium, "--headless", "--remote-debugging-pipe", "--no-sandbox",
                "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--lang=en-US", "--force-device-scale-factor=1",
                f"--user-data-dir={self.profile.name}", f"--window-size={width},{height}",
                "about:blank"]
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log,
                                        stderr=self.log, close_fds=False, preexec_fn=wire_pipes)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)
        self.resize(height)

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except Failure:
            pass
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)
        self.log.close()
        self.profile.cleanup()

    def _receive(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure("Chromium did not answer in time")
            ready, _, _ = select.select([self.from_browser], [], [], left)
            if ready:
                chunk = os.read(self.from_browser, 1 << 16)
                if not chunk:
                    raise Failure("Chromium exited (see its log)")
                self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, session=False, timeout=60):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._receive(deadline)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise Failure(f"{method}: {answer['error'].get('message')}")
                return answer.get("result", {})
            self.events.append(answer)

    def resize(self, height):
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": height, "deviceScaleFactor": 1,
                   "mobile": False}, session=True)

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate",
                           {"expression": expression, "awaitPromise": True,
                            "returnByValue": True}, session=True)
        if "exceptionDetails" in result:
            raise Failure(f"script failed: {result['exceptionDetails'].get('text')}: "
                          f"{result['exceptionDetails'].get('exception', {}).get('description')}")
        return result.get("result", {}).get("value")

    def navigate(self, url):
        self.call("Page.navigate", {"url": url}, session=True)

    def wait_until(self, what, expression, timeout=30):
        deadline = time.monotonic() + timeout
        guarded = f"(() => {{ try {{ return !!({expression}); }} catch (e) {{ return false; }} }})()"
        while not self.evaluate(guarded):
            if time.monotonic() > deadline:
                raise Failure(f"timed out waiting for {what}")
            time.sleep(0.25)

    def screenshot(self, path):
        """The whole page at the browser's width, as tall as its content."""
        self.resize(100)   # a short viewport: scrollHeight is then the content's height
        height = max(int(self.evaluate("Math.ceil(document.documentElement.scrollHeight)")), 100)
        self.resize(height)
        time.sleep(0.5)   # let the layout settle at the new size
        shot = self.call("Page.captureScreenshot", {"format": "png"}, session=True)
        with open(path, "wb") as out:
            out.write(base64.b64decode(shot["data"]))
        self.resize(self.height)
        note(f"wrote {path} ({self.width}x{height})")


# Sections of the management UI's pages are <div class="section"> (open) or
# <div class="section-hidden"> (closed), toggled by a click on their <h2>.
TOGGLE_SECTIONS_JS = """
(() => {
  const keep = %s;
  for (const h2 of document.querySelectorAll('div.section > h2, div.section-hidden > h2')) {
    const open = h2.parentElement.classList.contains('section');
    const wanted = keep.includes(h2.textContent.trim());
    if (open !== wanted) h2.click();
  }
  return true;
})()
"""

LOGIN_JS = """
(() => {
  const form = document.querySelector('form input[name=password]').form;
  form.querySelector('input[name=username]').value = %s;
  form.querySelector('input[name=password]').value = %s;
  form.querySelector('input[type=submit]').click();
  return true;
})()
"""

GET_MESSAGES_JS = """
(() => {
  const form = [...document.querySelectorAll('form')].find(f => f.querySelector('input[name=count]'));
  if (!form) return false;
  form.querySelector('input[name=count]').value = '%d';
  const submit = form.querySelector('input[type=submit]');
  submit.click();
  return true;
})()
"""


def shoot(broker, chromium, out_dir, width, log_path, messages):
    base = broker.url + "/"
    user, password = broker.auth
    browser = Browser(chromium, width, 900, log_path)
    try:
        # The login form (newer management UIs also take #/login/USER/PASSWORD, 3.10 does not).
        browser.navigate(base)
        browser.wait_until("the management UI's login form",
                           "!!document.querySelector('form input[name=password]')")
        browser.evaluate(LOGIN_JS % (json.dumps(user), json.dumps(password)))
        browser.wait_until("the management UI's login",
                           "!!document.querySelector('#logout') || "
                           "document.body.innerText.includes('Log out')")
        browser.evaluate("location.hash = '#/queues'; true")
        names = json.dumps(list(QUEUES))
        browser.wait_until("the queue list",
                           f"(() => {{ const t = document.body.innerText;"
                           f" return {names}.every(n => t.includes(n)); }})()")
        time.sleep(2)   # the list's rates and counts fill in after the first refresh
        browser.screenshot(os.path.join(out_dir, "management-queues.png"))

        browser.evaluate("location.hash = '#/queues/%2F/syncbus.dead'; true")
        browser.wait_until("the page of syncbus.dead",
                           "!!document.querySelector('h1') && "
                           "document.querySelector('h1').innerText.includes('syncbus.dead') && "
                           "!!document.querySelector('input[name=count]')")
        browser.evaluate(TOGGLE_SECTIONS_JS % json.dumps(["Get messages"]))
        if not browser.evaluate(GET_MESSAGES_JS % messages):
            raise Failure("no 'Get messages' form on the page of syncbus.dead")
        browser.wait_until("the messages of syncbus.dead",
                           f"document.body.innerText.includes('Message {messages}')")
        time.sleep(1)
        browser.screenshot(os.path.join(out_dir, "management-dead-letters.png"))
    finally:
        browser.close()


def main():
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n", 1)[0])
    parser.add_argument("--hub", required=True, help="the simulator's hub URL")
    parser.add_argument("--mgmt-url", required=True, help="the RabbitMQ management UI's URL")
    parser.add_argument("--user", required=True)
    parser.add_argument("--password-file", required=True,
                        help="file holding the management UI's password")
    parser.add_argument("--out", required=True, help="directory for the PNG files")
    parser.add_argument("--chromium", default="chromium")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--messages", type=int, default=2,
                        help="messages to show from syncbus.dead")
    parser.add_argument("--browser-log", default=os.devnull)
    args = parser.parse_args()
    with open(args.password_file, encoding="utf-8") as f:
        password = f.read().strip()
    broker = Broker(args.mgmt_url, args.user, password)
    try:
        stage(Fleet(args.hub), broker)
        shoot(broker, args.chromium, args.out, args.width, args.browser_log, args.messages)
    except Failure as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
