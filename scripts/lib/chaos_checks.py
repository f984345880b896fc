"""What a chaos run (scripts/chaos) proves once its faults are over: every cluster at the newest
generation of every set, object by object; the dead-letter queue empty or explained; no cluster
written by two consumers at once (from the simulator's write journal: every write under the
writer's own live lease); and the recovery time of each fault."""

import base64
import datetime
import json
import statistics
from dataclasses import dataclass, field

import yaml

from bench_fleet_parts import KubeClient

HIVE = "/apis/hive.openshift.io/v1"
CONSUMER_AGENT = "syncbus-consumer/"


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    problems: list = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Convergence, object by object


def cluster_credentials(hub):
    """{cluster name: (token, client key PEM)} from the admin kubeconfig Secrets on the hub."""
    creds = {}
    for secret in hub.get("/api/v1/secrets")["items"]:
        name = secret["metadata"]["name"]
        if not name.endswith("-admin-kubeconfig"):
            continue
        kubeconfig = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
        user = kubeconfig["users"][0]["user"]
        key = base64.b64decode(user["client-key-data"]).decode() if "client-key-data" in user else ""
        creds[secret["metadata"]["namespace"]] = (user.get("token", ""), key)
    return creds


def verify_fleet(hub, names, creds):
    """Every cluster's ConfigMaps hold what its SyncSets and SelectorSyncSets say now, and its
    ClusterSync shows each set at its current generation, Success."""
    syncsets = {}
    for s in hub.get(HIVE + "/syncsets")["items"]:
        syncsets.setdefault(s["metadata"]["namespace"], []).append(s)
    selector = hub.get(HIVE + "/selectorsyncsets")["items"]
    statuses = {c["metadata"]["namespace"]: c
                for c in hub.get("/apis/hiveinternal.openshift.io/v1alpha1/clustersyncs")["items"]}
    problems, objects = [], 0
    for name in names:
        sets = [("SyncSet", s) for s in syncsets.get(name, [])] + [("SelectorSyncSet", s) for s in selector]
        desired = {}
        for _, s in sets:
            for r in s["spec"].get("resources", []):
                meta = r["metadata"]
                desired[(meta.get("namespace", "default"), meta["name"])] = r.get("data", {})
        token = creds.get(name, ("", ""))[0]
        target = KubeClient(server=hub.server, token=token)
        actual = {}
        for ns in sorted({ns for ns, _ in desired}):
            listed = target.get(f"/clusters/{name}/api/v1/namespaces/{ns}/configmaps")
            for cm in listed["items"]:
                actual[(ns, cm["metadata"]["name"])] = cm.get("data", {})
        for key, data in desired.items():
            objects += 1
            if key not in actual:
                problems.append(f"{name}: ConfigMap {key[0]}/{key[1]} missing")
            elif actual[key] != data:
                problems.append(f"{name}: ConfigMap {key[0]}/{key[1]} has {actual[key].get('payload')!r}, "
                                f"wants {data.get('payload')!r}")
        status = (statuses.get(name) or {}).get("status", {})
        entries = {("SyncSet", e["name"]): e for e in status.get("syncSets", [])}
        entries.update({("SelectorSyncSet", e["name"]): e for e in status.get("selectorSyncSets", [])})
        for kind, s in sets:
            e = entries.get((kind, s["metadata"]["name"]))
            generation = s["metadata"]["generation"]
            if e is None:
                problems.append(f"{name}: ClusterSync has no entry for {kind} {s['metadata']['name']}")
            elif e.get("observedGeneration") != generation or e.get("result") != "Success":
                problems.append(f"{name}: {kind} {s['metadata']['name']} at generation "
                                f"{e.get('observedGeneration')} ({e.get('result')}), current {generation}")
    return Check("fleet converged, object by object", not problems,
                 f"{len(names)} clusters, {objects} objects compared with their sets' current content",
                 problems)


# ---------------------------------------------------------------------------------------------
# The write journal: leases and who wrote what


def read_journal(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                yield json.loads(line)


def consumer_of(entry):
    agent = entry.get("userAgent", "")
    return agent[len(CONSUMER_AGENT):] if agent.startswith(CONSUMER_AGENT) else None


class LeaseState:
    """A cluster Lease as the journal replay has it: holder, renewTime (Unix ms, the holder's
    clock, from which the lease runs), duration, and whether the holder's status write gave it
    back."""
    __slots__ = ("holder", "at", "duration", "released")

    def __init__(self):
        self.holder, self.at, self.duration, self.released = "", 0, 0, True


def unix_ms(rfc3339, default):
    """Unix milliseconds of a Lease's MicroTime ("2026-11-25T13:20:20.533434Z")."""
    try:
        return int(datetime.datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%S.%fZ")
                   .replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
    except (TypeError, ValueError):
        return default


def lease_cluster(entry):
    """The cluster (its namespace, which is its name in the fleet) whose Lease a journal line
    wrote: the consumers' cluster Leases live in namespace syncbus as "<namespace>.<name>"."""
    if entry.get("resource") != "leases" or entry.get("namespace") != "syncbus":
        return None
    name = entry.get("name", "")
    return name.split(".", 1)[0] if "." in name else None


def analyse_journal(path, faults, cluster_names, exclude=()):
    """Replays the journal in order. Every write a consumer makes to a cluster (its objects on the
    target, its ClusterSync on the hub) must happen while that consumer holds the cluster's Lease:
    the last Lease write names it, has not lapsed, and (for target writes) its status write has not
    given it back. A Lease taken from another live holder is a violation too. Also fills each
    consumer fault's "clusters synced again" recovery: the clusters the victim held at the fault,
    until another consumer stored their status."""
    names = set(cluster_names)
    leases = {}
    violations = []
    writes = takeovers = 0
    pending = sorted((f for f in faults if f.kind in ("consumer-kill", "consumer-pause")), key=lambda f: f.at)
    open_faults = []   # (fault, {cluster: None}) waiting for their clusters' next status by another
    for e in read_journal(path):
        t = e["t"] / 1000.0
        while pending and pending[0].at < t:
            f = pending.pop(0)
            held = {c: None for c, s in leases.items()
                    if s.holder == f.identity and not s.released and c not in exclude}
            f.recovery["held clusters"] = len(held)
            open_faults.append((f, held))
        cluster = e.get("cluster")
        if cluster == "hub" and lease_cluster(e) in names:
            key = lease_cluster(e)
            s = leases.setdefault(key, LeaseState())
            holder = e.get("holder", "")
            # The taker decided on its clock when it sent the write: the journal time (when the
            # simulator applied it) is an upper bound of that.
            live = s.holder and not s.released and e["t"] < s.at + s.duration * 1000
            if holder and live and holder != s.holder:
                violations.append(f"{key}: lease taken by {holder} at {e['t']} while {s.holder} held it "
                                  f"(renewed {s.at}, {s.duration}s)")
            if holder and holder != s.holder:
                takeovers += 1
            s.holder, s.duration, s.released = holder, e.get("leaseDurationSeconds", 0), not holder
            s.at = unix_ms(e.get("renewTime"), e["t"])
            continue
        who = consumer_of(e)
        if who is None:
            continue
        if cluster == "hub":
            if e.get("resource") != "clustersyncs" or e.get("namespace") not in names:
                continue
            key = e["namespace"]
            target_write = False
        elif cluster in names:
            key = cluster
            target_write = True
        else:
            continue
        writes += 1
        s = leases.get(key) or LeaseState()
        lapsed = e["t"] > s.at + s.duration * 1000
        if s.holder != who or lapsed or (target_write and s.released):
            why = ("lapsed" if lapsed else "given back") if s.holder == who else f"held by {s.holder or 'nobody'}"
            violations.append(f"{key}: {'target' if target_write else 'ClusterSync'} "
                              f"{e.get('verb')} {e.get('resource')} {e.get('name')} by {who} at {e['t']}: "
                              f"lease {why}")
        if not target_write and e.get("subresource") == "status":
            if s.holder == who:
                s.released = True
            # Synced again: its status stored after the fault (by the victim too, a write it had
            # sent before it froze or died).
            for f, held in open_faults:
                if key in held and held[key] is None:
                    held[key] = t - f.at
    for f, held in open_faults:
        if not held:
            continue   # the victim held no cluster at that moment: nothing to recover
        times = [v for v in held.values() if v is not None]
        f.recovery["clusters synced again"] = max(times) if len(times) == len(held) else None
    return Check("no cluster written by two consumers at once", not violations,
                 f"{writes} consumer writes checked against {len(leases)} cluster leases "
                 f"({takeovers} hand-overs between consumers)", violations)


# ---------------------------------------------------------------------------------------------
# Recovery of the other faults (from the trace stream)


class WorkTimes:
    """When work got through, from the daemons' trace events (`syncbusctl trace --all`): each
    confirmed publish with the moment its request was decided, each settled delivery with the
    moment it was delivered. Work is back after a fault at the first publish (settle) of work
    that began after it, or, if a stall followed, when the last stall that began within
    STALL_WINDOW of the fault ended: a publish confirmed just after a node died, then 30 s of
    nothing, is no recovery. A stall is a gap of more than STALL_GAP with nothing getting through
    (the edit stream gives the publisher work every 0.5 s)."""

    SETTLED = ("applied", "up-to-date", "skipped", "retry")
    STALL_GAP = 3.0
    STALL_WINDOW = 30.0

    def __init__(self, events):
        self.confirms = []   # (confirmed, decided)
        self.settles = []    # (settled, delivered, actor, lane)
        delivered = {}       # (request, actor) -> delivered
        for e in sorted(events, key=lambda e: e.get("at", "")):
            at = unix_ms(e.get("at"), None)
            if at is None:
                continue
            step, actor = e.get("step"), e.get("actor", "")
            if step == "published":
                decided = unix_ms(e.get("decidedAt"), at)
                self.confirms.append(((at + e.get("durationMs", 0)) / 1000.0, decided / 1000.0))
            elif step == "delivered":
                delivered[(e.get("request"), actor)] = at / 1000.0
            elif step == "settled" and e.get("outcome") in self.SETTLED:
                d = delivered.pop((e.get("request"), actor), None)
                if d is not None:
                    self.settles.append((at / 1000.0, d, actor, e.get("lane", "")))

    def published(self, after):
        """When publishing was back after `after` (see the class); None if it never was."""
        first = min((c for c, decided in self.confirms if decided > after), default=None)
        return self._past_stalls(after, first, [c for c, _ in self.confirms])

    def consumed(self, after, actor=None, lanes=None):
        """When consuming was back after `after` (see the class), counting the deliveries on one
        of `lanes`; None if it never was. For one consumer (its identity contains `actor`) the
        first settle only: a third of the work has gaps of seconds without any stall."""
        mine = [(t, d) for t, d, a, lane in self.settles
                if (actor is None or actor in a) and (lanes is None or lane in lanes)]
        first = min((t for t, d in mine if d > after), default=None)
        if actor is not None:
            return first
        return self._past_stalls(after, first, [t for t, _ in mine])

    def _past_stalls(self, after, first, times):
        if first is None:
            return None
        points = [after] + sorted(t for t in times if after < t <= after + self.STALL_WINDOW + 60)
        back = first
        for a, b in zip(points, points[1:]):
            if a > after + self.STALL_WINDOW:
                break
            if b - a > self.STALL_GAP:
                back = max(back, b)
        return back


def measure_recovery(faults, work, consumers, work_ended):
    """Fills the figures timed from the trace (`work`, a WorkTimes). Without work nothing is
    published or consumed: a fault less than 30 s before the edit stream ended that saw nothing
    afterwards is not measured rather than counted as never recovered."""
    def since(f, t):
        return None if t is None else t - f.at

    for f in faults:
        if f.kind == "publisher-kill":
            f.recovery["publishing again"] = since(f, work.published(f.at))
        elif f.kind == "broker-kill":
            f.recovery["publishing again"] = since(f, work.published(f.at))
            # The change lane always has work in a run (the edit stream); the resync lane may have
            # none for minutes, so its consumption cannot be timed.
            lanes = ("change",) if "change" in f.lanes else None
            f.recovery["consuming again"] = since(f, work.consumed(f.at, lanes=lanes))
            if f.ended and f.node_back:
                f.recovery["back in the cluster"] = f.node_back - f.ended
        elif f.kind == "connection-close":
            if f.target in consumers:
                t = work.consumed(f.at, actor="/" + f.target + "-")
            else:
                t = work.published(f.at)
            f.recovery["working again"] = since(f, t)
        for figure in ("publishing again", "consuming again", "working again"):
            if f.recovery.get(figure, 0) is None and f.at > work_ended - 30:
                del f.recovery[figure]


RECOVERY_ROWS = [
    # (fault kind, figure, goal in seconds (a callable of the lease duration) or None, goal text)
    ("consumer-kill", "clusters synced again", lambda lease: 2 * lease, "<= 2 x lease duration"),
    ("consumer-pause", "clusters synced again", lambda lease: 2 * lease, "<= 2 x lease duration"),
    ("publisher-kill", "publishing again", lambda lease: 15, "<= 15 s"),
    ("broker-kill", "publishing again", lambda lease: 10, "<= 10 s"),
    ("broker-kill", "consuming again", lambda lease: 10, "<= 10 s"),
    ("broker-kill", "back in the cluster", None, "(from its start)"),
    ("connection-close", "working again", None, ""),
]


def recovery_table(faults, lease_seconds):
    """Rows of (fault, figure, (n, p50, max) over all faults, the same over the undisturbed ones,
    goal text, met or None) and notes on figures missing. A fault is undisturbed when no other
    fault began before it had recovered: the goals are judged on those (a recovery that another
    fault stretched is reported, not judged)."""
    rows, notes = [], []
    for kind, figure, goal, goal_text in RECOVERY_ROWS:
        of_kind = [f for f in faults if f.kind == kind]
        if not of_kind:
            continue
        measured = [f for f in of_kind if figure in f.recovery]
        never = [f for f in measured if f.recovery[figure] is None]
        done = [f for f in measured if f.recovery[figure] is not None]
        if len(measured) < len(of_kind):
            why = "the victim held no cluster" if kind.startswith("consumer") else "not measured"
            notes.append(f"{kind}: {figure}: {len(of_kind) - len(measured)} of {len(of_kind)}: {why}")
        if never:
            notes.append(f"{kind}: {figure}: {len(never)} of {len(of_kind)} never did")
        clean = [f for f in done if not disturbed(f, f.recovery[figure], faults)]
        limit = goal(lease_seconds) if goal else None
        met = None
        if limit is not None and (clean or never):
            met = not never and max(f.recovery[figure] for f in clean) <= limit
        elif limit is not None:
            notes.append(f"{kind}: {figure}: no undisturbed sample to judge the goal on")
        text = f"{goal_text} ({limit:.0f} s)" if limit is not None and "lease" in goal_text else goal_text
        rows.append((kind, figure, summary([f.recovery[figure] for f in done]),
                     summary([f.recovery[figure] for f in clean]), text, met))
    return rows, notes


# The faults that can stretch another's recovery: whatever it must wait for (the hub for leases
# and status writes, a broker node, another consumer's or the leader's death).
DISTURBED_BY = {
    "consumer-kill": {"consumer-kill", "consumer-pause", "broker-kill", "hub-burst"},
    "consumer-pause": {"consumer-kill", "consumer-pause", "broker-kill", "hub-burst"},
    "publisher-kill": {"publisher-kill", "broker-kill", "hub-burst"},
    "broker-kill": {"publisher-kill", "broker-kill", "hub-burst", "consumer-kill", "consumer-pause"},
    "connection-close": {"publisher-kill", "broker-kill", "consumer-kill", "consumer-pause", "hub-burst"},
}


def disturbed(fault, seconds, faults):
    """A fault that can stretch `fault`'s recovery was still going on when it struck (a burst not
    over, a process or node not back yet), or began after it and before it had recovered."""
    kinds = DISTURBED_BY.get(fault.kind, set())
    return any(g is not fault and g.kind in kinds and
               (fault.at < g.at <= fault.at + seconds or g.at <= fault.at < g.ended)
               for g in faults)


def summary(values):
    return (len(values), statistics.median(values) if values else None, max(values) if values else None)


def format_recovery(rows):
    fmt = lambda v: "-" if v is None else f"{v:.1f}s"
    lines = [f"{'fault':<17} {'recovery':<22} {'all: n':>6} {'p50':>7} {'max':>7}   "
             f"{'undisturbed: n':>14} {'p50':>7} {'max':>7}  goal"]
    for kind, figure, (n, p50, worst), (cn, cp50, cworst), goal, met in rows:
        verdict = "" if met is None else ("  met" if met else "  MISSED")
        lines.append(f"{kind:<17} {figure:<22} {n:>6} {fmt(p50):>7} {fmt(worst):>7}   "
                     f"{cn:>14} {fmt(cp50):>7} {fmt(cworst):>7}  {goal}{verdict}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Dead letters


def explain_dead_letters(messages, poison_clusters):
    """Each message left in syncbus.dead must belong to a poison cluster of the run itself."""
    problems = []
    for m in messages:
        try:
            body = json.loads(m.get("payload", "") or "{}")
            c = body.get("cluster", {})
            cluster = f"{c.get('namespace', '')}/{c.get('name', '')}"
        except ValueError:
            cluster = "(undecodable)"
        headers = (m.get("properties") or {}).get("headers") or {}
        if cluster not in poison_clusters:
            reason = headers.get("x-syncbus-dead-reason") or headers.get("x-first-death-reason", "")
            problems.append(f"{cluster}: parked ({reason}): {str(headers.get('x-syncbus-last-error', ''))[:200]}")
    return Check("dead-letter queue empty or explained", not problems,
                 f"{len(messages)} parked, {len(messages) - len(problems)} explained by the run's poison",
                 problems)
