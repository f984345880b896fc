"""What a chaos run (scripts/chaos) proves once its faults are over: every cluster at the newest
generation of every set, object by object; the dead-letter queue empty or explained; no cluster
written by two consumers at once (from the simulator's write journal: every write under the
writer's own live lease); the recovery time of each fault against its goal; every kind of fault
injected; no process exit but those the run caused or planted; the poison parked by syncbus's own
path. Each check is written so that it fails on the bad case (tests/chaos/chaos_checks_test.py)."""

import base64
import bisect
import datetime
import hashlib
import json
import statistics
from dataclasses import dataclass, field

import yaml

from syncbus_tools.testbed import KubeClient

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


def verify_fleet(hub, names, creds, fleet_objects, target=None):
    """Every cluster's ConfigMaps hold what its SyncSets and SelectorSyncSets say now, and its
    ClusterSync shows each set at its current generation, Success. `fleet_objects`: how many
    objects the fleet holds (clusters x sets x ConfigMaps, as the run made it): comparing fewer
    (a cluster left out, a set list that came back short) fails, a check of nothing proves
    nothing. `target(token)`: a client of a target cluster (default: the hub's server with that
    cluster's token)."""
    if target is None:
        def target(token):
            return KubeClient(server=hub.server, token=token)
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
        client = target(creds.get(name, ("", ""))[0])
        actual = {}
        for ns in sorted({ns for ns, _ in desired}):
            listed = client.get(f"/clusters/{name}/api/v1/namespaces/{ns}/configmaps")
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
    if objects < fleet_objects:
        problems.append(f"only {objects} objects compared, the fleet holds {fleet_objects}: "
                        "the rest was not checked")
    return Check("fleet converged, object by object", not problems,
                 f"{len(names)} clusters, {objects} objects (of {fleet_objects}) compared with their sets' "
                 "current content", problems)


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


def unix_ms(rfc3339, default):
    """Unix milliseconds of a Lease's MicroTime ("2026-11-25T13:20:20.533434Z")."""
    try:
        return int(datetime.datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%S.%fZ")
                   .replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
    except (TypeError, ValueError):
        return default


STICKY = "sticky"   # a claim's kind (common/bus/cluster_claim.h kStickyClaim)


class Liveness:
    """A consumer's liveness Lease as the journal replay has it: its epoch, until when it holds
    (renewTime + duration, Unix ms, the holder's clock) and whether that epoch is over: the Lease
    deleted, or renewed only after it had expired (a consumer dead in an epoch stays dead in it)."""
    __slots__ = ("epoch", "until", "over")

    def __init__(self, epoch, until):
        self.epoch, self.until, self.over = epoch, until, False

    def alive(self, epoch, t_ms):
        return epoch == self.epoch and not self.over and t_ms < self.until


class LeaseState:
    """A cluster Lease as the journal replay has it: holder, renewTime (Unix ms, the holder's
    clock, from which the lease runs), duration, and whether the holder's status write gave it
    back; for a sticky claim, the holder's liveness epoch it was made in; whether the holder has a
    sync of the cluster under way (it wrote to the cluster after its last status write for it)."""
    __slots__ = ("holder", "at", "duration", "released", "sticky", "epoch", "syncing")

    def __init__(self):
        self.holder, self.at, self.duration, self.released = "", 0, 0, True
        self.sticky, self.epoch, self.syncing = False, None, False

    def live(self, t_ms, alive):
        """Whether the claim holds at `t_ms`: a sticky one while `alive(holder, epoch, t_ms)`,
        one of a sync until its renewTime + duration."""
        if not self.holder or self.released:
            return False
        return alive(self.holder, self.epoch, t_ms) if self.sticky else t_ms < self.at + self.duration * 1000


class ClusterLeaseJournal:
    """How consumers exclude each other per cluster, as the simulator's write journal shows it: the
    one place that reads that from the journal (a change of the exclusion scheme changes this
    class, not the checks built on it). A claim on each cluster's ClusterSyncLease (its namespace
    and name; a fleet cluster's namespace is its name), which the journal shows as the entry's
    holder, renewTime (the claim's), leaseDurationSeconds, claim kind and epoch, written by its
    taker. A claim of one sync (no kind) holds until its renewTime + duration; the holder's
    ClusterSync status write gives it back, an empty holder too. A sticky claim holds while its
    holder is alive in the claim's epoch, by the holder's liveness Lease (a coordination Lease the
    journal marks "liveness", with its holder, renewTime, duration and epoch; gone once deleted);
    the holder's status writes keep it, a claim write (another kind, an empty holder) gives it
    back. A consumer makes the cluster's ClusterSync (empty, its create only) before it claims:
    that create needs no claim. Fed the journal's entries in order (`apply`)."""

    def __init__(self, clusters):
        self.clusters = set(clusters)
        self.leases = {}
        self.liveness = {}     # liveness Lease name -> Liveness
        self.lease_of = {}     # identity -> the name of its liveness Lease
        self.takeovers = 0
        self.holders = set()   # every identity that held a lease

    @staticmethod
    def lease_cluster(entry):
        """The cluster whose claim (its ClusterSyncLease) a journal entry wrote, or None."""
        if entry.get("cluster") != "hub" or entry.get("resource") != "clustersyncleases":
            return None
        return entry.get("namespace") or None

    def status_cluster(self, entry):
        """The cluster whose ClusterSync a hub entry wrote (its status, if `status`), or None."""
        if entry.get("cluster") != "hub" or entry.get("resource") != "clustersyncs":
            return None
        return entry.get("namespace") if entry.get("namespace") in self.clusters else None

    def alive(self, identity, epoch, t_ms):
        """Whether consumer `identity` is alive in `epoch` at `t_ms` by its liveness Lease."""
        lease = self.liveness.get(self.lease_of.get(identity))
        return lease is not None and lease.alive(epoch, t_ms)

    def apply(self, entry):
        """Takes one journal entry in order. Returns the violation it shows ("" if none): a lease
        taken from another live holder; a sticky claim made by a consumer not alive in its epoch; a
        consumer's write to a cluster (its objects on the target, its ClusterSync on the hub) not
        under its own lease: another's, none, lapsed (for a sticky claim: its holder's liveness in
        the claim's epoch), or (for a target write) given back by its status write."""
        if entry.get("cluster") == "hub" and entry.get("liveness"):
            self._liveness_write(entry)
            return ""
        cluster = self.lease_cluster(entry)
        if cluster in self.clusters:
            return self._lease_write(cluster, entry)
        who = consumer_of(entry)
        if who is None:
            return ""
        if entry.get("resource") == "clustersyncs" and entry.get("verb") == "create":
            return ""   # the empty ClusterSync a claim's lease is owned by: made before the claim
        key = self.status_cluster(entry)
        target_write = key is None
        if target_write:
            key = entry.get("cluster")
            if entry.get("cluster") == "hub" or key not in self.clusters:
                return ""
        s = self.leases.get(key) or LeaseState()
        if s.sticky:
            lapsed = not self.alive(s.holder, s.epoch, entry["t"])
        else:
            lapsed = entry["t"] > s.at + s.duration * 1000
        why = ""
        if s.holder != who or lapsed or (target_write and s.released):
            if s.holder != who:
                why = f"held by {s.holder or 'nobody'}"
            elif lapsed:
                why = f"its holder's liveness lapsed in epoch {s.epoch}" if s.sticky else "lapsed"
            else:
                why = "given back"
            why = (f"{key}: {'target' if target_write else 'ClusterSync'} {entry.get('verb')} "
                   f"{entry.get('resource')} {entry.get('name')} by {who} at {entry['t']}: lease {why}")
        if not target_write and entry.get("subresource") == "status" and s.holder == who and not s.sticky:
            s.released = True
        if s.holder == who:   # its status write ends its sync, any other write is one under way
            s.syncing = target_write or entry.get("subresource") != "status"
        return why

    def _liveness_write(self, entry):
        name = (entry.get("namespace"), entry.get("name"))
        lease = self.liveness.get(name)
        if entry.get("verb") == "delete":
            if lease is not None:
                lease.over = True
            return
        holder, epoch = entry.get("holder", ""), entry.get("epoch")
        if holder:
            self.lease_of[holder] = name
        until = unix_ms(entry.get("renewTime"), entry["t"]) + (entry.get("leaseDurationSeconds") or 0) * 1000
        if lease is None or lease.epoch != epoch:
            self.liveness[name] = Liveness(epoch, until)
            return
        if entry["t"] >= lease.until:
            lease.over = True   # renewed after it had expired: others saw it dead in this epoch
        lease.until = until

    def _lease_write(self, cluster, entry):
        s = self.leases.setdefault(cluster, LeaseState())
        holder = entry.get("holder", "")
        sticky, epoch = entry.get("claim") == STICKY, entry.get("epoch")
        # The taker decided on its clock when it sent the write: the journal time (when the
        # simulator applied it) is an upper bound of that.
        violation = ""
        if holder and holder != s.holder and s.live(entry["t"], self.alive):
            held = f"epoch {s.epoch}, alive" if s.sticky else f"renewed {s.at}, {s.duration}s"
            violation = f"{cluster}: lease taken by {holder} at {entry['t']} while {s.holder} held it ({held})"
        elif holder and sticky and not self.alive(holder, epoch, entry["t"]):
            violation = (f"{cluster}: sticky claim written by {holder} at {entry['t']} in epoch {epoch}, "
                         "in which it is not alive")
        if holder and holder != s.holder:
            self.takeovers += 1
        if holder:
            self.holders.add(holder)
        s.holder, s.duration, s.released = holder, entry.get("leaseDurationSeconds", 0), not holder
        s.sticky, s.epoch = sticky, epoch
        s.syncing = bool(holder)   # a claim taken, or renewed for a full reapply: a sync begins
        s.at = unix_ms(entry.get("renewTime"), entry["t"])
        return violation

    def held_by(self, identity, t_ms):
        """The clusters whose lease `identity` holds at `t_ms` (not given back; a claim of one
        sync lapsed or not, a sticky claim while `identity` is alive in its epoch)."""
        return [c for c, s in self.leases.items() if s.holder == identity and not s.released
                and (not s.sticky or self.alive(identity, s.epoch, t_ms))]

    def syncs_in_progress(self, identity, t_ms):
        """The clusters of `held_by(identity, t_ms)` whose sync `identity` has in progress: with
        claims of one sync, all of them (such a claim lasts one sync); with sticky claims, those
        it wrote to after its last status write for them (its objects on the target, a claim
        taken or its renewTime written for a full reapply), not those it holds idle."""
        return [c for c in self.held_by(identity, t_ms) if not self.leases[c].sticky or self.leases[c].syncing]

    @staticmethod
    def counts_as_write(entry, clusters):
        """Whether the entry is a consumer's write to one of `clusters` (target or ClusterSync)."""
        if consumer_of(entry) is None:
            return False
        if entry.get("cluster") == "hub":
            return entry.get("resource") == "clustersyncs" and entry.get("namespace") in clusters
        return entry.get("cluster") in clusters

    @staticmethod
    def synced(entry, clusters):
        """The cluster whose status a consumer stored in this entry, or None: a sync's last write."""
        if consumer_of(entry) is None or entry.get("cluster") != "hub":
            return None
        if entry.get("resource") != "clustersyncs" or entry.get("subresource") != "status":
            return None
        return entry.get("namespace") if entry.get("namespace") in clusters else None


def analyse_journal(path, faults, cluster_names, exclude=(), identities=None, work=None, lease_seconds=None):
    """Replays the journal in order (ClusterLeaseJournal). Every write a consumer makes to a
    cluster must happen under that consumer's own live lease, and no lease may be taken from a
    live holder. Every lease holder must be an identity a consumer logged (`identities`, when
    given): a holder the run cannot name would make every consumer fault look as if its victim
    held nothing. Also fills each consumer fault's recovery: "held clusters", how many clusters its
    victim (`identity`) held at the fault; its `in_progress`, those of them whose sync the victim
    had in progress then (ClusterLeaseJournal.syncs_in_progress: with claims of one sync every
    one it held, with sticky claims not those it held idle, which get no status until a request
    for them comes); and "clusters synced again", the seconds until every one of those had its
    status stored again (by any consumer; the victim's own write that it had sent before it froze
    or died counts too), None if one never had. With sticky claims and the trace (`work`, a
    WorkTimes), the figure times instead what a victim's death costs its clusters' users: its
    `requested`, the clusters it held sticky that got a request decided within
    request_window(kind, lease_seconds) after the fault, and the seconds until every one of them
    had its status stored after that request (the first one in the window); with none, the syncs
    in progress as above."""
    names = set(cluster_names)
    leases = ClusterLeaseJournal(names)
    violations = []
    writes = 0
    pending = sorted((f for f in faults if f.kind in ("consumer-kill", "consumer-pause")), key=lambda f: f.at)

    def opened(f):
        """`f`'s victim's clusters at the fault, and {cluster to time: [a status after this counts, seconds]}."""
        held = [c for c in leases.held_by(f.identity, f.at * 1000) if c not in exclude] if f.identity else []
        f.recovery["held clusters"] = len(held)
        f.in_progress = tuple(sorted(c for c in leases.syncs_in_progress(f.identity, f.at * 1000)
                                     if c not in exclude)) if f.identity else ()
        if work is not None:
            until = f.at + request_window(f.kind, lease_seconds)
            asked = {c: work.requested(c, f.at, until) for c in held if leases.leases[c].sticky}
            asked = {c: t for c, t in asked.items() if t is not None}
            f.requested = tuple(sorted(asked))
            if asked:
                return f, {c: [t, None] for c, t in asked.items()}
        return f, {c: [f.at, None] for c in f.in_progress}

    open_faults = []   # (fault, {cluster: [after, None]}) waiting for their clusters' next status
    for e in read_journal(path):
        t = e["t"] / 1000.0
        while pending and pending[0].at < t:
            open_faults.append(opened(pending.pop(0)))
        writes += leases.counts_as_write(e, names)
        violation = leases.apply(e)
        if violation:
            violations.append(violation)
        key = leases.synced(e, names)
        if key is not None:
            for f, timed in open_faults:
                if key in timed and timed[key][1] is None and t > timed[key][0]:
                    timed[key][1] = t - f.at
    open_faults += [opened(f) for f in pending]   # after the journal's last entry: never synced again
    for f, timed in open_faults:
        if not timed:
            continue   # no sync in progress, or nothing held: nothing to time (recovery_table says which)
        times = [v for _, v in timed.values() if v is not None]
        f.recovery["clusters synced again"] = max(times) if len(times) == len(timed) else None
    # Every cluster was synced at least once (its first status write): fewer checked writes mean
    # the journal did not hold what the run did, and nothing was proven.
    if writes < len(names):
        violations.append(f"only {writes} consumer writes in the journal for {len(names)} clusters: "
                          "the journal is incomplete, so exclusion was not shown")
    if identities is not None:
        unknown = sorted(leases.holders - set(identities))
        if unknown:
            violations.append(f"lease holder(s) {', '.join(unknown[:5])} are no identity a consumer logged "
                              f"(logged: {', '.join(sorted(identities)[:5]) or 'none'})")
    return Check("no cluster written by two consumers at once", not violations,
                 f"{writes} consumer writes checked against {len(leases.leases)} cluster leases "
                 f"({leases.takeovers} hand-overs between consumers)", violations)


# ---------------------------------------------------------------------------------------------
# Recovery of the other faults (from the trace stream)


class WorkTimes:
    """When work got through, from the daemons' trace events (`syncbusctl trace --all`): each
    confirmed publish with the moment its request was decided, each settled delivery with the
    moment it was delivered. A delivery also shows that its request had been published by then
    (decided `queuedMs` before): the publishers' own events can be missing from the trace stream
    while their requests get through (on RabbitMQ 3.10 a publisher's trace events were lost for
    70 s after a node's death, its requests delivered throughout). Work is back after a fault at
    the first publish (settle) of work that began after it, or, if a stall followed, when the last
    stall that began within STALL_WINDOW of the fault ended: a publish confirmed just after a node
    died, then 30 s of nothing, is no recovery. A stall is a gap of more than STALL_GAP with nothing getting through
    (the edit stream gives the publisher work every 0.5 s); for publishing, given `edits` (the
    wall times of the edit stream's edits), only while work was waiting: an edit made in the gap
    more than STALL_GAP before its end. A gap in which the edit stream itself made no edit (its
    thread held up on a loaded machine) is no stall of the system's."""

    SETTLED = ("applied", "up-to-date", "skipped", "retry")
    STALL_GAP = 3.0
    STALL_WINDOW = 30.0

    def __init__(self, events, edits=None):
        self.edits = sorted(edits) if edits is not None else None
        self.confirms = []   # (confirmed, decided)
        self.deliveries = []  # (delivered, decided)
        self.decided = {}     # lane -> when its requests were decided (published or delivered)
        self.settles = []    # (settled, delivered, actor, lane)
        self.requests = {}   # cluster (its namespace) -> when its requests were decided, sorted
        delivered = {}       # (request, actor) -> delivered
        for e in sorted(events, key=lambda e: e.get("at", "")):
            at = unix_ms(e.get("at"), None)
            if at is None:
                continue
            step, actor = e.get("step"), e.get("actor", "")
            if step == "published":
                decided = unix_ms(e.get("decidedAt"), at)
                self.confirms.append(((at + e.get("durationMs", 0)) / 1000.0, decided / 1000.0))
                self.decided.setdefault(e.get("lane", ""), []).append(decided / 1000.0)
                self._request(e, decided / 1000.0)
            elif step == "delivered":
                delivered[(e.get("request"), actor)] = at / 1000.0
                self.deliveries.append((at / 1000.0, (at - e.get("queuedMs", 0)) / 1000.0))
                self.decided.setdefault(e.get("lane", ""), []).append((at - e.get("queuedMs", 0)) / 1000.0)
                self._request(e, (at - e.get("queuedMs", 0)) / 1000.0)
            elif step == "settled" and e.get("outcome") in self.SETTLED:
                d = delivered.pop((e.get("request"), actor), None)
                if d is not None:
                    self.settles.append((at / 1000.0, d, actor, e.get("lane", "")))

    def _request(self, e, decided):
        bisect.insort(self.requests.setdefault(e.get("cluster", "").split("/")[0], []), decided)

    def requested(self, cluster, after, until):
        """When the first request for `cluster` (its namespace) decided in (after, until] was; None
        if none was. A delivery shows its request's decision too (queuedMs before it: a forward
        keeps it), so a request whose publish the trace lost counts."""
        times = self.requests.get(cluster, [])
        i = bisect.bisect_right(times, after)
        return times[i] if i < len(times) and times[i] <= until else None

    def published(self, after, until=None):
        """When publishing was back after `after` (see the class); None if it never was. A stall
        that began at `until` or later (another fault's) is not this one's."""
        # Deliveries count for requests decided after `after` only: an older request's delivery
        # says nothing of when it was published.
        points = self.confirms + [(d, decided) for d, decided in self.deliveries if decided > after]
        first = min((c for c, decided in points if decided > after), default=None)
        return self._past_stalls(after, first, [c for c, _ in points], self.edits, until)

    def consumed(self, after, actor=None, lanes=None, until=None):
        """When consuming was back after `after` (see the class), counting the deliveries on one
        of `lanes`; None if it never was. For one consumer (its identity contains `actor`) the
        first settle only: a third of the work has gaps of seconds without any stall."""
        mine = [(t, d) for t, d, a, lane in self.settles
                if (actor is None or actor in a) and (lanes is None or lane in lanes)]
        first = min((t for t, d in mine if d > after), default=None)
        if actor is not None:
            return first
        # A stall only while work waited: a request of those lanes decided in the gap more than
        # STALL_GAP before its end (a lull in the edit stream is no stall of the consumers').
        work = sorted(t for lane, times in self.decided.items() if lanes is None or lane in lanes for t in times)
        return self._past_stalls(after, first, [t for t, _ in mine], work, until)

    def _past_stalls(self, after, first, times, work=None, until=None):
        if first is None:
            return None
        points = [after] + sorted(t for t in times if after < t <= after + self.STALL_WINDOW + 60)
        back = first
        for a, b in zip(points, points[1:]):
            if a > after + self.STALL_WINDOW or (until is not None and a >= until):
                break
            if b - a > self.STALL_GAP and (work is None or self._waited(work, a, b)):
                back = max(back, b)
        return back

    def _waited(self, work, a, b):
        """Some work arrived in (a, b] more than STALL_GAP before b."""
        i = bisect.bisect_right(work, a)
        return i < len(work) and work[i] <= b - self.STALL_GAP


def measure_recovery(faults, work, consumers, work_ended):
    """Fills the figures timed from the trace (`work`, a WorkTimes). Without work nothing is
    published or consumed: a fault less than 30 s before the edit stream ended that saw nothing
    afterwards is not measured rather than counted as never recovered."""
    def since(f, t):
        return None if t is None else t - f.at

    for f in faults:
        # Stalls from the next fault that can stretch this one's recovery on are that fault's.
        until = next_disturbance(f, faults, "publishing again")
        if f.kind == "publisher-kill":
            f.recovery["publishing again"] = since(f, work.published(f.at, until))
        elif f.kind == "broker-kill":
            f.recovery["publishing again"] = since(f, work.published(f.at, until))
            # The change lane always has work in a run (the edit stream); the resync lane may have
            # none for minutes, so its consumption cannot be timed.
            lanes = ("change",) if "change" in f.lanes else None
            consumed = work.consumed(f.at, lanes=lanes, until=next_disturbance(f, faults))
            f.recovery["consuming again"] = since(f, consumed)
            if f.ended and f.node_back:
                f.recovery["back in the cluster"] = f.node_back - f.ended
        elif f.kind == "connection-close":
            if f.target in consumers:
                t = work.consumed(f.at, actor="/" + f.target + "-", until=next_disturbance(f, faults))
            else:
                t = work.published(f.at, until)
            f.recovery["working again"] = since(f, t)
        for figure in ("publishing again", "consuming again", "working again"):
            if f.recovery.get(figure, 0) is None and f.at > work_ended - 30:
                del f.recovery[figure]


RECOVERY_ROWS = [
    # (fault kind, figure, goal in seconds (a callable of the lease duration) or None, goal text)
    # A dead or frozen consumer's clusters: its leases lapse (1 lease), the requests the broker
    # gave back are held back, deferred while those leases last and rerun (1 more), and 1 lease of
    # margin: a minute at the production lease of 20 s.
    ("consumer-kill", "clusters synced again", lambda lease: 3 * lease, "<= 3 x lease duration"),
    ("consumer-pause", "clusters synced again", lambda lease: 3 * lease, "<= 3 x lease duration"),
    ("publisher-kill", "publishing again", lambda lease: 15, "<= 15 s"),
    ("broker-kill", "publishing again", lambda lease: 10, "<= 10 s"),
    ("broker-kill", "consuming again", lambda lease: 10, "<= 10 s"),
    ("broker-kill", "back in the cluster", None, "(from its start)"),
    ("connection-close", "working again", None, ""),
]


def request_window(kind, lease_seconds):
    """For how long after a consumer fault a request for a cluster its victim held sticky counts
    for "clusters synced again": its goal less its one lease of margin. A request decided then may
    by design wait on the victim (its liveness Lease lapsing, a forward to its queue returning
    after the queue's TTL, a takeover) and still has that margin for its sync; one decided later
    finds the clusters taken over, and would time the edit stream's pace, not the recovery."""
    goal = next(g for k, figure, g, _ in RECOVERY_ROWS if k == kind and figure == "clusters synced again")
    return goal(lease_seconds) - lease_seconds


def recovery_table(faults, lease_seconds, crashes=()):
    """Rows of (fault, figure, (n, p50, max) over all faults, the same over the undisturbed ones,
    goal text, met or None) and notes on figures missing. A fault is undisturbed when no other
    fault began before it had recovered, or before its goal's time was up if it took longer: the
    goals are judged on those (a recovery that another fault stretched is reported, not judged;
    one that was past its goal when the other fault began is judged, and missed). `crashes`, the
    planted poison's consumer crashes (as consumer-kill faults the run did not inject), disturb
    as a consumer kill does, and are not rows of their own. The edit stream's edits, fleet-wide
    ones included, are the run's load, not faults: they disturb nothing."""
    disturbances = list(faults) + list(crashes)
    rows, notes = [], []
    for kind, figure, goal, goal_text in RECOVERY_ROWS:
        of_kind = [f for f in faults if f.kind == kind]
        if not of_kind:
            continue
        measured = [f for f in of_kind if figure in f.recovery]
        never = [f for f in measured if f.recovery[figure] is None]
        done = [f for f in measured if f.recovery[figure] is not None]
        idle = [f for f in of_kind if figure not in f.recovery and kind.startswith("consumer")
                and f.recovery.get("held clusters")]
        if idle:
            notes.append(f"{kind}: {figure}: {len(idle)} of {len(of_kind)}: {NONE_IN_PROGRESS}")
        if len(measured) + len(idle) < len(of_kind):
            why = HELD_NOTHING if kind.startswith("consumer") else "not measured"
            notes.append(f"{kind}: {figure}: {len(of_kind) - len(measured) - len(idle)} of {len(of_kind)}: {why}")
        if never:
            notes.append(f"{kind}: {figure}: {len(never)} of {len(of_kind)} never did")
        limit = goal(lease_seconds) if goal else None
        clean = [f for f in done
                 if not disturbed(f, min(f.recovery[figure], limit if limit is not None else float("inf")),
                                  disturbances, figure)]
        met = None
        if limit is not None and (clean or never):
            met = not never and max((f.recovery[figure] for f in clean), default=0) <= limit
        text = f"{goal_text} ({limit:.0f} s)" if limit is not None and "lease" in goal_text else goal_text
        rows.append((kind, figure, summary([f.recovery[figure] for f in done]),
                     summary([f.recovery[figure] for f in clean]), text, met))
    return rows, notes


# A consumer fault whose victim held no cluster at that moment, as the journal shows it: the fault
# chose it among the consumers the hub showed holding one, so the run's idea of its identity is
# wrong, and its goal would go unjudged.
HELD_NOTHING = "the victim held no cluster"
# One whose victim held clusters (sticky claims) but had no sync of them in progress and, given the
# trace, no request for them within request_window: none to time, and no fault of the run's (its
# clusters are synced once a request for them comes).
NONE_IN_PROGRESS = "the victim held clusters, none of them with a sync in progress or a request soon after: not timed"


# The faults that can stretch another's recovery: whatever it must wait for (the hub for leases
# and status writes, a broker node, another consumer's or the leader's death).
DISTURBED_BY = {
    "consumer-kill": {"consumer-kill", "consumer-pause", "broker-kill", "hub-burst"},
    "consumer-pause": {"consumer-kill", "consumer-pause", "broker-kill", "hub-burst"},
    "publisher-kill": {"publisher-kill", "broker-kill", "hub-burst"},
    "broker-kill": {"publisher-kill", "broker-kill", "hub-burst", "consumer-kill", "consumer-pause"},
    "connection-close": {"publisher-kill", "broker-kill", "consumer-kill", "consumer-pause", "hub-burst"},
}


def disturbed(fault, seconds, faults, figure=None):
    """A fault that can stretch `fault`'s recovery was still going on when it struck (a burst not
    over, a process or node not back yet, a hub request the burst left unanswered not yet given
    up), or began after it and before it had recovered. For
    "publishing again", so can the publisher's broker connection closed meanwhile: it stalls
    publishing until the publisher has reconnected."""
    return any(g is not fault and stretches(fault, g, figure) and
               (fault.at < g.at <= fault.at + seconds or
                g.at <= fault.at < max(g.ended, getattr(g, "lingers", 0.0)))
               for g in faults)


def stretches(fault, g, figure=None):
    """Whether fault `g` can stretch `fault`'s recovery (`figure`; see disturbed). A target burst
    does a consumer fault's only when it struck a cluster the victim held: that cluster's sync after
    the takeover is what the recovery times."""
    return g.kind in DISTURBED_BY.get(fault.kind, set()) or (
        figure == "publishing again" and g.kind == "connection-close" and g.target.startswith("publisher")) or (
        g.kind == "target-burst" and fault.kind in ("consumer-kill", "consumer-pause") and
        bool(set(getattr(g, "clusters", ())) & set(getattr(fault, "held", ()))))


def next_disturbance(fault, faults, figure=None):
    """When the first fault after `fault` that can stretch its recovery began; None if none did."""
    return min((g.at for g in faults if g is not fault and g.at > fault.at and stretches(fault, g, figure)),
               default=None)


def summary(values):
    return (len(values), statistics.median(values) if values else None, max(values) if values else None)


def goals_met(rows, notes, samples=1):
    """A check that fails when any goal was MISSED, a fault of a kind with a goal never recovered,
    a goal was judged on fewer than `samples` undisturbed faults (none: not judged at all), or a
    consumer fault's victim held no cluster."""
    problems = [f"{kind}: {figure}: undisturbed max " + ("-" if worst is None else f"{worst:.1f}s") + f", goal {goal}"
                for kind, figure, _, (_, _, worst), goal, met in rows if met is False]
    problems += [n for n in notes if n.endswith("never did") or n.endswith(HELD_NOTHING)]
    problems += [f"{kind}: {figure}: judged on {n} undisturbed fault(s), fewer than {samples}"
                 if n else f"{kind}: {figure}: not judged: no undisturbed fault"
                 for kind, figure, _, (n, _, _), goal, met in rows
                 if goal_of(kind, figure) and n < samples]
    judged = sum(1 for row in rows if row[5] is not None)
    return Check("every recovery goal judged and met", not problems,
                 f"{judged} goals judged on at least {samples} undisturbed faults each", problems)


def goal_of(kind, figure):
    """Whether (kind, figure) has a goal."""
    return any(k == kind and f == figure and goal for k, f, goal, _ in RECOVERY_ROWS)


def every_kind_injected(faults, kinds):
    """Each kind of fault the scheduler knows happened at least once."""
    seen = {f.kind for f in faults}
    missing = sorted(set(kinds) - seen)
    counts = ", ".join(f"{k} {sum(1 for f in faults if f.kind == k)}" for k in sorted(seen))
    return Check("every kind of fault injected", not missing, f"{len(faults)} faults: {counts}",
                 [f"{k}: never injected" for k in missing])


# The line a consumer logs just before it aborts on the poison annotation
# (tests/fakes/consumer/crashing_hub_reader.h).
PLANTED_CRASH = "crashing on purpose: the ClusterDeployment carries the crash annotation"


def planted_crash_lines(log_text, cluster):
    """The lines where the log says its process aborted on purpose on `cluster` ("ns/name")."""
    return [line for line in log_text.splitlines() if PLANTED_CRASH in line and cluster in line]


def planted_crashes(log_text, cluster):
    """How many times the log says its process aborted on purpose on `cluster` ("ns/name")."""
    return len(planted_crash_lines(log_text, cluster))


def planted_crash_times(log_text, cluster):
    """When the log says its process aborted on purpose on `cluster`, in unix seconds: the time
    that leads a text line, or a JSON line's "ts" (a line with neither is left out)."""
    times = []
    for line in planted_crash_lines(log_text, cluster):
        stamp = line.split(" ", 1)[0]
        if line.startswith("{"):
            try:
                stamp = json.loads(line).get("ts")
            except ValueError:
                stamp = None
        ms = unix_ms(stamp, None)
        if ms is not None:
            times.append(ms / 1000.0)
    return times


def explain_exits(exits, planted):
    """`exits`: {daemon name: (kind, [how, ...])} of the exits the run did not cause; `planted`:
    {daemon name: planted crash lines in its log}. Only a consumer's SIGABRT with a planted crash
    line of its own to account for it is explained; everything else (an assert, heap corruption,
    any other signal or exit code, a publisher's abort) is not."""
    problems = []
    for name, (kind, hows) in sorted(exits.items()):
        aborts = [h for h in hows if h == "signal SIGABRT"]
        other = [h for h in hows if h != "signal SIGABRT"]
        if other:
            problems.append(f"{name}: {', '.join(other)}")
        budget = planted.get(name, 0) if kind == "consumer" else 0
        if len(aborts) > budget:
            problems.append(f"{name}: {len(aborts)} SIGABRT, {budget} of them the planted poison crash")
    detail = ", ".join(f"{n}: {len(h)}" for n, (_, h) in sorted(exits.items())) or "none"
    return Check("no process exited unless made to (planted poison aborts aside)", not problems,
                 f"exits not caused by a fault: {detail}; planted crashes logged: {sum(planted.values())}",
                 problems)


def on_their_way(events, since, crashes, at, quiet):
    """The requests of `events` (one cluster's `syncbusctl trace --json` events) seen since
    `since` (Unix seconds) that are still on their way at `at`: last seen published, delivered (in
    flight) or sent to a delay tier. One last seen delivered to a consumer that crashed after that
    (`crashes`: (consumer name, Unix seconds)) is on its way no more once, for `quiet` seconds
    (longer than the longest delay tier), no consumer crashed and nothing was seen of it: that
    consumer settled it (parked it, say) and died before it flushed the trace events that said so;
    a copy it gave back would have been delivered again by then."""
    since_text = datetime.datetime.fromtimestamp(since, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    last, recent = {}, set()
    for e in events:
        request = e.get("request", "")
        last[request] = e
        if e.get("at", "") >= since_text:
            recent.add(request)
    crash_quiet = at - max((t for _, t in crashes), default=0) >= quiet

    def died_with(e):
        seen = unix_ms(e.get("at"), None)
        if e.get("step") != "delivered" or seen is None or not crash_quiet or at - seen / 1000 < quiet:
            return False
        return any(f"/{name}-" in e.get("actor", "") and t > seen / 1000 for name, t in crashes)

    return sorted(r for r in recent
                  if not (last[r].get("step") == "settled" and last[r].get("outcome") not in ("retry", "deferred"))
                  and not died_with(last[r]))


def judge_poison(listed, cluster, crashes, delivery_limit):
    """The poison's parked requests (`listed`: `syncbusctl dlq list --json` of its cluster) must
    be parked by syncbus's own path (quarantine, then the delivery limit), not by the broker,
    each after delivery_limit + 1 deliveries that ended unsettled, and the planted crashes must
    account for those deliveries: no more than every request's deliveries, and at least each
    request's own less what its returns from consumers' queues counted (`returnsFromConsumers`:
    with sticky claims, forwards whose holder died holding them, from a planted crash or a fault's
    kill; none with per-sync claims). Not their sum: one crash returns every delivery its process
    held, so two copies of the poison held at once (one waiting for the other's run) take one
    unsettled delivery each from the same crash. A return counts one unsettled delivery on both
    RabbitMQ versions (docs/operations.md, "Messages in the dead-letter queue")."""
    problems = []
    ours = [d for d in listed if d.get("cluster") == cluster]
    if not ours:
        problems.append(f"{cluster}: nothing parked")
    least = returned = 0
    for d in ours:
        what = f"{cluster} request {d.get('messageId')}"
        if d.get("reason") != "delivery_limit":
            problems.append(f"{what}: parked for {d.get('reason')!r}, not the delivery limit")
        if d.get("parkedBy") != "syncbus":
            problems.append(f"{what}: parked by {d.get('parkedBy')!r}, not by syncbus's quarantine path")
        if d.get("unsettled") != delivery_limit + 1:
            problems.append(f"{what}: parked after {d.get('unsettled')} deliveries that ended unsettled, "
                            f"not {delivery_limit + 1}")
        returns = d.get("returnsFromConsumers") or 0
        returned += returns
        least = max(least, (d.get("unsettled") or 0) - returns)
    most = len(ours) * (delivery_limit + 1)
    if ours and not least <= crashes <= most:
        problems.append(f"{crashes} planted consumer crashes for {len(ours)} parked request(s): expected "
                        f"{least} to {most}")
    return Check("poison parked after the delivery limit, by syncbus", not problems,
                 f"{cluster}: {len(ours)} request(s) parked after {crashes} planted consumer crashes "
                 f"and {returned} return(s) from consumers' queues", problems)


@dataclass
class ScanInputs:
    """What the secret scan had to read and what came of each input. An input it could not read,
    or read only in part, is a hole, and a scan with a hole has not shown that nothing leaked."""
    trace_rc: int = 0              # `syncbusctl trace --all`'s exit status
    trace_events: int = 0          # the events it returned
    queues: dict = field(default_factory=dict)      # queue -> (read, asked, ready, unacked) or an error
    daemons: dict = field(default_factory=dict)     # daemon -> running when its metrics page was read
    pages: dict = field(default_factory=dict)       # metrics URL -> None when read, else the error
    log_dirs: dict = field(default_factory=dict)    # RabbitMQ log directory -> it exists
    unreadable: list = field(default_factory=list)  # files the scanner could not read

    def problems(self):
        """Every hole, one line each."""
        problems = []
        if self.trace_rc != 0:
            problems.append(f"syncbusctl trace --all exited {self.trace_rc}: the trace events were not scanned")
        elif not self.trace_events:
            problems.append("syncbusctl trace --all returned no event: nothing of the trace was scanned")
        if not self.queues:
            problems.append("the queues: none was listed to read")
        for queue, got in sorted(self.queues.items()):
            if isinstance(got, str):
                problems.append(f"queue {queue}: not scanned: {got}")
                continue
            read, asked, ready, unacked = got
            if unacked:
                problems.append(f"queue {queue}: {unacked} message(s) held unacknowledged, which the "
                                "management API cannot read: not scanned")
            if read < ready:
                problems.append(f"queue {queue}: read {read} of its {ready} ready messages")
            elif read >= asked:
                problems.append(f"queue {queue}: read {read}, as many as asked: more may be there")
        for daemon, running in sorted(self.daemons.items()):
            if not running:
                problems.append(f"{daemon}: not running, its metrics page was not scanned")
        if not self.pages:
            problems.append("no metrics page to read")
        problems += [f"metrics page {url}: not scanned: {error}" for url, error in sorted(self.pages.items())
                     if error is not None]
        problems += [f"RabbitMQ log directory {d}: missing, not scanned"
                     for d, there in sorted(self.log_dirs.items()) if not there]
        if not self.log_dirs:
            problems.append("no RabbitMQ log directory to read")
        problems += [f"not scanned: {e}" for e in self.unreadable]
        return problems


def format_recovery(rows):
    """The recovery table as printed: one line per row of recovery_table, seconds to 0.1 s ("-"
    for none), the verdict after the goal."""
    def fmt(v):
        return "-" if v is None else f"{v:.1f}s"

    lines = [f"{'fault':<17} {'recovery':<22} {'all: n':>6} {'p50':>7} {'max':>7}   "
             f"{'undisturbed: n':>14} {'p50':>7} {'max':>7}  goal"]
    for kind, figure, (n, p50, worst), (cn, cp50, cworst), goal, met in rows:
        verdict = "" if met is None else ("  met" if met else "  MISSED")
        lines.append(f"{kind:<17} {figure:<22} {n:>6} {fmt(p50):>7} {fmt(worst):>7}   "
                     f"{cn:>14} {fmt(cp50):>7} {fmt(cworst):>7}  {goal}{verdict}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Dead letters


def explain_dead_letters(listed, poison_requests):
    """Each request left parked (`listed`: `syncbusctl dlq list --json`) must be one of the run's
    poison requests (`poison_requests`: their message ids, as parked in the poison episode), parked
    by syncbus for its delivery limit: not merely a message of the same cluster."""
    problems = []
    for d in listed:
        what = f"{d.get('cluster') or '(no cluster)'} request {d.get('messageId') or '(no id)'}"
        if d.get("messageId") not in poison_requests:
            problems.append(f"{what}: parked ({d.get('reason')}): {str(d.get('lastError', ''))[:200]}")
        elif d.get("reason") != "delivery_limit" or d.get("parkedBy") != "syncbus":
            problems.append(f"{what}: the poison's request, but parked by {d.get('parkedBy')} for "
                            f"{d.get('reason')}")
    return Check("dead-letter queue empty or explained", not problems,
                 f"{len(listed)} parked, {len(listed) - len(problems)} explained by the run's poison",
                 problems)


# ---------------------------------------------------------------------------------------------
# A rollout in waves under faults (chaos_rollout.py)


def rank_of(cluster_key):
    """A cluster's rank in every rollout by count (common/bus/rollout.cc RankOf): StableHash64 of
    "rollout-rank|" + "namespace/name", the first 8 bytes of its SHA-256 as a big-endian integer
    (common/digest.cc). Pinned to the C++ on known clusters by tests/unit/core/rollout_test.cc and
    tests/chaos/chaos_checks_test.py."""
    return int.from_bytes(hashlib.sha256(("rollout-rank|" + cluster_key).encode()).digest()[:8], "big")


def wave_of(cluster_key, state):
    """The wave of a cluster in a rollout by count or percentage (rollout_release.cc WaveOf): the
    first whose bound, as the state records it, is at or above the cluster's rank."""
    rank = rank_of(cluster_key)
    for i, bound in enumerate(state.get("bounds", [])):
        if rank <= int(bound, 16):
            return i + 1
    return max(state.get("waves", 0), 1)


def released_to(cluster_key, state, generation):
    """Whether `state` releases the set's `generation` to the cluster (rollout_release.cc
    ReleaseOf): a state for that generation, Complete or with the cluster's wave released."""
    if state.get("generation") != generation:
        return False
    return state.get("phase") == "Complete" or wave_of(cluster_key, state) <= state.get("wave", 0)


@dataclass
class RolloutHistory:
    """What the journal shows of the rollout's set: every rollout state written on it, in order
    ((unix seconds, state), each change once), and every write of a generation's mark to a cluster
    ((unix seconds, cluster, ConfigMap name, writer))."""
    states: list = field(default_factory=list)
    writes: list = field(default_factory=list)


def rollout_history(path, set_name, marks, clusters):
    """Reads the RolloutHistory of SelectorSyncSet `set_name` from the journal; `marks`: {ConfigMap
    name: the set generation whose apply writes it}."""
    history = RolloutHistory()
    names = set(clusters)
    for e in read_journal(path):
        if e.get("cluster") == "hub":
            if e.get("resource") == "selectorsyncsets" and e.get("name") == set_name and e.get("rolloutState"):
                state = json.loads(e["rolloutState"])
                if not history.states or history.states[-1][1] != state:
                    history.states.append((e["t"] / 1000.0, state))
        elif e.get("cluster") in names and e.get("resource") == "configmaps" and e.get("name") in marks \
                and e.get("verb") != "delete":
            history.writes.append((e["t"] / 1000.0, e["cluster"], e["name"], consumer_of(e) or e.get("userAgent")))
    return history


def check_rollout_held(history, marks, clusters):
    """No cluster received a generation of the rollout's set before its wave was released: each
    write of a generation's mark to a cluster came after a rollout state for that generation that
    released the cluster's wave (or completed). Fewer writes than clusters, or writes of one
    generation only, prove nothing (no generation rolled out over another)."""
    times = [t for t, _ in history.states]
    problems, per_wave = [], {}
    if any(not state.get("bounds") for _, state in history.states):
        problems.append("a rollout state without bounds: not a rollout by count, its waves cannot be computed")
    for t, cluster, name, who in history.writes:
        generation, key = marks[name], f"{cluster}/{cluster}"
        before = [state for _, state in history.states[:bisect.bisect_right(times, t)]]
        if not any(released_to(key, state, generation) for state in before):
            before = [state for state in before if state.get("generation") == generation]
            last = (f"wave {before[-1].get('wave')} of {before[-1].get('waves')} released, {before[-1].get('phase')}"
                    if before else "no state for it yet")
            wave = wave_of(key, before[-1]) if before else "?"
            problems.append(f"{cluster}: {name} (generation {generation}) written by {who} at {t:.3f}, its wave "
                            f"{wave} not released ({last})")
        else:
            wave = wave_of(key, [state for state in before if state.get("generation") == generation][-1])
            per_wave[wave] = per_wave.get(wave, 0) + 1
    generations = sorted({marks[name] for _, _, name, _ in history.writes})
    if len(history.writes) < len(clusters):
        problems.append(f"only {len(history.writes)} writes of the rollout's generations in the journal for "
                        f"{len(clusters)} clusters: the hold was not shown")
    if len(generations) < 2:
        problems.append(f"generation(s) {generations} written only: no generation rolled out over another")
    waves = ", ".join(f"wave {w}: {n}" for w, n in sorted(per_wave.items()))
    return Check("rollout: no cluster got a generation before its wave was released", not problems,
                 f"{len(history.writes)} writes of {len(generations)} generations to {len(clusters)} clusters held "
                 f"against {len(history.states)} rollout states ({waves})", problems)


def fault_window(f):
    """From a fault's start to its end (its process or node back, its burst over, what it held up
    given up); a fault with no extent (a connection closed) is a moment."""
    end = max(f.ended, getattr(f, "node_back", 0.0), f.lingers) if f.ended else f.at
    return f.at, end


def in_fault(f, t):
    """Whether the moment `t` fell in fault `f`'s window; a moment's fault holds none."""
    start, end = fault_window(f)
    return start <= t <= end and end > start


def check_boundary_during_faults(history, faults):
    """At least one wave after the first was released (its first rollout state) while a fault
    was going on; says which faults each such release fell in. A run whose boundaries all fell
    between faults has not shown the rollout under faults."""
    releases, seen = [], set()
    for t, state in history.states:
        generation, wave = state.get("generation"), state.get("wave", 0)
        if wave >= 2 and state.get("phase") == "Progressing" and (generation, wave) not in seen:
            seen.add((generation, wave))
            releases.append((t, generation, wave))
    t0 = min((f.at for f in faults), default=0.0)
    during = []
    for t, generation, wave in releases:
        hit = [f for f in faults if in_fault(f, t)]
        if hit:
            during.append(f"generation {generation} wave {wave} at +{t - t0:.1f}s during "
                          + ", ".join(f"{f.kind} {f.target} (+{f.at - t0:.1f}s..+{fault_window(f)[1] - t0:.1f}s)"
                                      for f in hit))
    problems = []
    if not releases:
        problems.append("no wave after the first was released: no wave boundary at all")
    elif not during:
        problems.append(f"none of the {len(releases)} wave releases fell in a fault: "
                        + ", ".join(f"generation {g} wave {w} at +{t - t0:.1f}s" for t, g, w in releases[:10]))
    shown = "; ".join(during[:3]) + (f"; and {len(during) - 3} more" if len(during) > 3 else "")
    return Check("rollout: a wave boundary during faults", not problems,
                 f"{len(releases)} wave releases, {len(during)} during a fault (times from the first fault)"
                 + (f": {shown}" if shown else ""), problems)


def check_rollout_complete(history, final, generation, faults=()):
    """The rollout of the set's last generation (`generation`) ended Complete (`final`: its state at
    the end) and none halted on the way (from the journal): the budget is sized so that no fault
    can exhaust it, so a halt is a finding; the faults going on at a halt are named."""
    problems = []
    halted = set()
    for t, state in history.states:
        key = (state.get("generation"), state.get("wave"))
        if state.get("phase") != "Halted" or key in halted:
            continue
        halted.add(key)
        failing = "; ".join(f"{c.get('cluster')}: {c.get('message')}" for c in state.get("failing", [])[:3])
        hit = [f"{f.kind} {f.target}" for f in faults if in_fault(f, t)]
        problems.append(f"generation {key[0]} halted in wave {key[1]} of {state.get('waves')}: "
                        f"{state.get('message')}" + (f" ({failing})" if failing else "")
                        + (f"; during {', '.join(hit)}" if hit else ""))
    if not final or final.get("generation") != generation or final.get("phase") != "Complete":
        problems.append(f"the rollout of generation {generation} did not complete: "
                        + (f"generation {final.get('generation')}, {final.get('phase')} in wave {final.get('wave')} "
                           f"of {final.get('waves')}" if final else "no rollout state"))
    generations = len({state.get("generation") for _, state in history.states})
    return Check("rollout: complete, never halted", not problems,
                 f"{generations} generations rolled out; the last, {generation}, "
                 f"{final.get('phase') if final else 'without a state'}", problems)
