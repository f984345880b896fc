"""Faults of a chaos run (scripts/chaos) and the scheduler that injects them: SIGKILL of a consumer
in the middle of applying, of the publisher leader, of a RabbitMQ node (often the work queues'
leader) followed by its restart, SIGSTOP of a consumer for longer than its cluster lease, a daemon's
broker connection closed through the management API, and bursts of hub or target errors,
throttling, timeouts and dropped connections in the simulator. Each fault is recorded with its
time; recovery is computed afterwards (chaos_checks.py)."""

import datetime
import random
import threading
import time
from dataclasses import dataclass, field

from syncbus_tools.chaos_checks import STICKY
from syncbus_tools.chaos_system import Background, note, now
from syncbus_tools.testbed import LIVENESS_NAMESPACE

# Sticky claims (common/bus/cluster_claim.h): a ClusterSyncLease's claim kind and epoch, and the
# label of the consumers' liveness Leases.
CLAIM_KIND, EPOCH = "syncbus.io/claim", "syncbus.io/epoch"
LIVENESS_LABEL = "syncbus.io/consumer-liveness"

WORK_QUEUES = ("syncbus.work.change", "syncbus.work.resync")


# The daemons' hub.requestTimeout (the chaos run's configs leave it at its default); the
# publisher's Lease and HiveConfig requests give up sooner, within renewDeadline.
HUB_REQUEST_TIMEOUT = 30.0


@dataclass
class Fault:
    kind: str
    target: str
    at: float                      # wall time of the injection
    detail: str = ""
    identity: str = ""             # consumer-kill / consumer-pause: the victim's lease identity
    held: tuple = ()               # consumer-kill / consumer-pause: the clusters the hub showed it holding
    in_progress: tuple = ()        # consumer faults: those whose sync it had in progress, by the journal
    requested: tuple = ()          # sticky claims: those it held that got a request soon after (chaos_checks.py)
    lanes: tuple = ()              # broker-kill: the work lanes whose queue leader was on the node
    clusters: tuple = ()           # target-burst: the clusters it struck
    ended: float = 0.0             # when the fault was undone (process back, node started, burst over)
    lingers: float = 0.0           # until when it may still hold a daemon up although it ended (below)
    node_back: float = 0.0         # broker-kill: node running and an online member of every queue
    recovery: dict = field(default_factory=dict)   # figure -> seconds (chaos_checks.py)


class Chaos:
    """Injects `total` faults, one every `interval` seconds (jittered), drawn by weight among those
    that fit the system's state: at most one RabbitMQ node down, one consumer impaired, one
    node or leader death recovering, one burst of each kind at a time. Every other major fault
    (a death, a freeze, a hub burst), and the first of each kind, is protected: it starts only
    once every major fault before it has ended (and no longer holds a daemon up), and no other
    major fault starts until it should have recovered (its quiet window), so its recovery can be
    judged against its goal; the others overlap freely, and minor faults (closed connections,
    target bursts) never wait. Each kind with a goal (GOAL_KINDS) gets `samples` protected faults:
    until it has them, such a fault is injected whenever one fits, other major faults wait, and
    the run goes on past `total` faults until they have (or until its time is up: three times
    what `total` faults take, plus the quiet windows of the samples; the goals left short then
    fail the run). A consumer fault's victim is a consumer that holds a cluster's Lease at that
    moment."""

    MAJOR = {"consumer-kill", "consumer-pause", "publisher-kill", "broker-kill", "hub-burst"}
    # The kinds whose recovery has a goal (chaos_checks.RECOVERY_ROWS).
    GOAL_KINDS = {"consumer-kill", "consumer-pause", "publisher-kill", "broker-kill"}

    WEIGHTS = {"consumer-kill": 20, "consumer-pause": 8, "publisher-kill": 12, "broker-kill": 14,
               "connection-close": 18, "hub-burst": 12, "target-burst": 16}

    def __init__(self, system, total, interval, lease_seconds, rng, samples=1):
        self.s = system
        self.total = total
        self.samples = samples
        self.interval = interval
        self.lease_seconds = lease_seconds
        self.rng = rng
        self.faults = []
        self.errors = []
        self._lock = threading.Lock()
        self._paused = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._timers = []
        self._major_until = 0.0
        self._consumer_until = 0.0   # a consumer fault's recovery window (3 x lease)
        self._quiet_until = 0.0      # a protected major fault's recovery window
        self._protect = True         # whether the next major fault gets one
        self._protected_counts = {}   # major kind -> its protected faults so far
        self._impaired = set()     # consumer names killed or paused and not back yet
        self._bursting = set()     # "hub" / "target"
        self._broker_kills = 0
        self._deadline = float("inf")   # set by start()
        self._thread = threading.Thread(target=self._loop, name="chaos", daemon=True)

    # -- control

    def start(self):
        windows = sum(self._window(Fault(kind, "", 0.0)) for kind in self.GOAL_KINDS)
        self._deadline = now() + 3 * self.total * self.interval + self.samples * windows
        self._thread.start()

    def pause(self):
        """No new faults until resume(); returns once every fault in progress has ended and the last
        protected fault's quiet window is over: what the caller does next (the poison, whose
        crashes are consumer deaths) must not stretch a recovery being judged."""
        self._paused.set()
        self.wait_quiet()
        time.sleep(max(0.0, self._quiet_until - now()))

    def resume(self):
        self._paused.clear()

    def done(self):
        """`total` faults injected, and `samples` protected ones of each kind with a goal (or the
        run's time is up: the goals left short are then not judged, which fails the run)."""
        return len(self.faults) >= self.total and (not self._wanting() or now() > self._deadline)

    @property
    def quiet_until(self):
        """When the last protected fault's quiet window ends."""
        return self._quiet_until

    def _wanting(self):
        """The kinds with a goal that still lack protected faults."""
        return {k for k in self.GOAL_KINDS if self._protected_counts.get(k, 0) < self.samples}

    def wait_quiet(self, timeout=600):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                busy = self._impaired or self._bursting or any(t.is_alive() for t in self._timers)
            if not busy:
                return True
            time.sleep(0.2)
        return False

    def stop(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.wait_quiet()

    # -- scheduling

    def _loop(self):
        while not self._stop.is_set() and not self.done():
            wait = self.interval * self.rng.uniform(0.7, 1.3)
            if self._stop.wait(wait):
                return
            if self._paused.is_set():
                continue
            kinds = [k for k in self.WEIGHTS if self._eligible(k)]
            # Every kind at least once: until each has been injected, only those not yet (waiting
            # for one to fit rather than spending the run's faults on the others).
            unseen = {k for k in self.WEIGHTS} - {f.kind for f in self.faults}
            wanting = self._wanting()
            if unseen:
                kinds = [k for k in kinds if k in unseen]
            elif wanting:
                # Until every kind with a goal has its samples, one of those whenever one fits;
                # else a minor fault (no other major one).
                kinds = [k for k in kinds if k in wanting] or [k for k in kinds if k not in self.MAJOR]
            if not kinds:
                continue
            kind = self.rng.choices(kinds, weights=[self.WEIGHTS[k] for k in kinds])[0]
            try:
                fault = getattr(self, "_" + kind.replace("-", "_"))()
            except Exception as e:   # a fault that could not be injected is reported, the run goes on
                self.errors.append(f"{kind}: {e}")
                note(f"fault {kind} could not be injected: {e}")
                continue
            if fault is not None:
                if kind in self.MAJOR:
                    protected = self._protected(kind)
                    if protected:
                        self._quiet_until = fault.at + self._window(fault)
                        self._protected_counts[kind] = self._protected_counts.get(kind, 0) + 1
                        fault.detail += "; quiet window"
                    self._protect = not protected
                with self._lock:
                    self.faults.append(fault)
                note(f"fault {len(self.faults)}/{self.total}: {fault.kind} {fault.target} {fault.detail}")

    def _protected(self, kind):
        """Whether a major fault of `kind` injected now gets a quiet window (see the class)."""
        return self._protect or kind not in self._protected_counts or kind in self._wanting()

    def _calm(self):
        """Every major fault so far has ended (process or node back, burst over) and holds no
        daemon up any more (a hub request a burst left unanswered has given up)."""
        t = now()
        with self._lock:
            return all(f.ended and max(f.ended, f.lingers) <= t for f in self.faults if f.kind in self.MAJOR)

    def _eligible(self, kind):
        t = now()
        if kind in self.MAJOR and (t < self._quiet_until or (self._protected(kind) and not self._calm())):
            return False
        with self._lock:
            impaired = bool(self._impaired)
            bursting = set(self._bursting)
        if kind in ("consumer-kill", "consumer-pause"):
            # A protected one waits for a target burst to end: one that struck a cluster its
            # victim holds would disturb it (chaos_checks.stretches), and leave it unjudged.
            if self._protected(kind) and "target" in bursting:
                return False
            return not impaired and t >= self._consumer_until and len(self._healthy_consumers()) >= 2
        if kind in ("publisher-kill", "broker-kill"):
            return t >= self._major_until and not self.s.rabbit.down and self._leader() is not None
        if kind == "hub-burst":
            return "hub" not in bursting
        if kind == "target-burst":
            return "target" not in bursting
        return True

    def _window(self, fault):
        """How long a fault of this kind takes to recover from, at most (its goal, roughly)."""
        if fault.kind == "consumer-kill":
            return 3 * self.lease_seconds
        if fault.kind == "consumer-pause":
            return 4 * self.lease_seconds + 10
        if fault.kind == "publisher-kill":
            return 20
        if fault.kind == "broker-kill":
            return 40
        return 20   # hub-burst: its length and the retries after it

    def _healthy_consumers(self):
        return [d for d in self.s.consumers() if d.running() and not d.stopped]

    def _leader(self):
        for d in self.s.publishers():
            if d.running() and not d.stopped and self.s.sampler.latest(d.name)[1].get("leader") == 1:
                return d
        return None

    def _later(self, delay, action):
        timer = threading.Timer(delay, action)
        timer.daemon = True
        with self._lock:
            self._timers = [x for x in self._timers if x.is_alive()] + [timer]
        timer.start()

    def _back_when_ready(self, fault, daemon, key):
        """Marks `fault` ended (and frees `key`) once `daemon` runs again, with a fresh process."""
        def watch():
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                if daemon.running() and daemon.started_at > fault.at:
                    break
                time.sleep(0.1)
            fault.ended = now()
            with self._lock:
                self._impaired.discard(key)
        self._later(0, watch)

    # -- the faults

    def _holding_consumer(self, wait=20.0):
        """A consumer that holds at least one cluster's Lease at this moment, frozen (SIGSTOP) so
        that it still does when the fault strikes: (daemon, its identity, the clusters it holds,
        when it was frozen), or None if none did within `wait` seconds. Its identity is the one
        it logged; the hub shows which Leases name it. A consumer the hub showed holding one is
        frozen, then its Leases are read again: if it gave them back meanwhile, it is let go at
        once (frozen for the moment of one hub read) and another moment is tried."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            holding = self._lease_holders()
            candidates = [d for d in self._healthy_consumers() if d.identity() and holding.get(d.identity())]
            if not candidates:
                time.sleep(0.2)
                continue
            victim = self.rng.choice(candidates)
            identity = victim.identity()
            if not self.s.supervisor.pause(victim.name):
                continue
            # The fault's moment: a write it sent before and the hub applies after is one it made
            # while holding (the journal's view at that moment agrees).
            frozen_at = now()
            held = self._lease_holders().get(identity, [])
            if held:
                return victim, identity, held, frozen_at
            self.s.supervisor.resume(victim.name)
        return None

    def _lease_holders(self):
        """{consumer identity: [clusters it holds the claim of now]}, from the hub (held_claims)."""
        hub = self.s.sim.hub
        try:
            leases = hub.get("/apis/hiveinternal.openshift.io/v1alpha1/clustersyncleases")["items"]
            syncs = hub.get("/apis/hiveinternal.openshift.io/v1alpha1/clustersyncs")["items"]
            liveness = hub.get(f"/apis/coordination.k8s.io/v1/namespaces/{LIVENESS_NAMESPACE}/leases")["items"] \
                if any((lease["metadata"].get("annotations") or {}).get(CLAIM_KIND) == STICKY for lease in leases) \
                else []
        except Exception:   # a hub burst: none seen this time
            return {}
        return held_claims(leases, syncs, liveness, now())

    def _consumer_fault(self, kind, detail):
        """A consumer fault's victim, frozen and holding clusters (see _holding_consumer), with its
        Fault; None when no consumer held a cluster."""
        chosen = self._holding_consumer()
        if chosen is None:
            note(f"{kind}: no consumer held a cluster's Lease for 20 s; tried again later")
            return None, None
        victim, identity, held, frozen_at = chosen
        with self._lock:
            self._impaired.add(victim.name)
        return victim, Fault(kind, victim.name, frozen_at, identity=identity, held=tuple(sorted(held)),
                             detail=f"holding {len(held)} cluster(s){detail}")

    def _consumer_kill(self):
        victim, fault = self._consumer_fault("consumer-kill", "")
        if victim is None:
            return None
        self._consumer_until = now() + 3 * self.lease_seconds
        if not self.s.supervisor.kill(victim.name, restart_after=self.rng.uniform(1, 3)):
            self.s.supervisor.resume(victim.name)
            with self._lock:
                self._impaired.discard(victim.name)
            return None
        self._back_when_ready(fault, victim, victim.name)
        return fault

    def _consumer_pause(self):
        seconds = self.lease_seconds + self.rng.uniform(3, 10)
        victim, fault = self._consumer_fault("consumer-pause", f"; SIGSTOP for {seconds:.0f}s")
        if victim is None:
            return None
        self._consumer_until = now() + seconds + 3 * self.lease_seconds

        def resume():
            self.s.supervisor.resume(victim.name)
            fault.ended = now()
            with self._lock:
                self._impaired.discard(victim.name)
        self._later(seconds, resume)
        return fault

    def _publisher_kill(self):
        leader = self._leader()
        if leader is None:
            return None
        fault = Fault("publisher-kill", leader.name, now(), detail="the leader")
        self._major_until = fault.at + 45
        if not self.s.supervisor.kill(leader.name, restart_after=self.rng.uniform(2, 5)):
            return None
        self._back_when_ready(fault, leader, "publisher:" + leader.name)
        return fault

    def _broker_kill(self):
        rabbit = self.s.rabbit
        up = rabbit.up_nodes()
        leaders = {q: rabbit.queue_leader(q) for q in WORK_QUEUES}
        self._broker_kills += 1
        if self._broker_kills % 2 == 1:
            # Every other time the node leading the change lane's queue.
            k = rabbit.node_names.index(leaders[WORK_QUEUES[0]])
        else:
            k = self.rng.choice(up)
        name = rabbit.node_names[k]
        lanes = tuple(q.rsplit(".", 1)[1] for q, leader in leaders.items() if leader == name)
        down_for = self.rng.uniform(5, 12)
        fault = Fault("broker-kill", name, now(), lanes=lanes,
                      detail=f"leader of {', '.join(lanes) or 'no work queue'}; down {down_for:.0f}s")
        self._major_until = fault.at + 60
        rabbit.kill(k)

        def restart():
            try:
                rabbit.start_node(k)
                fault.ended = now()
                deadline = time.monotonic() + 300
                while time.monotonic() < deadline:
                    try:
                        running, online = rabbit.running_members(name)
                    except Exception:   # the management API of a node starting up
                        running, online = False, False
                    if running and online:
                        fault.node_back = now()
                        break
                    time.sleep(0.25)
            except Exception as e:
                self.errors.append(f"restarting {name}: {e}")
                note(f"could not restart {name}: {e}")
        self._later(down_for, restart)
        return fault

    def _connection_close(self):
        # In a quiet window the leader's connection is left alone: closing it stalls publishing,
        # which would stretch the protected fault's recovery (chaos_checks.DISTURBED_BY).
        quiet = now() < self._quiet_until
        candidates = [d for d in self.s.daemons() if d.running() and not d.stopped
                      and (d.kind == "consumer" or
                           (not quiet and self.s.sampler.latest(d.name)[1].get("leader") == 1))]
        victim = self.rng.choice(candidates)
        connection_name = victim.name if victim.kind == "consumer" else None
        closed = 0
        for c in self.s.rabbit.connections():
            name = (c.get("client_properties") or {}).get("connection_name", "")
            # The publisher's own connection, not the one its trace events go out on.
            if (connection_name and name == connection_name) or \
                    (connection_name is None and name.startswith("syncbus-publisher/")
                     and not name.endswith("/trace")):
                closed += self.s.rabbit.close_connections(name)
                break
        if closed == 0:
            return None
        return Fault("connection-close", victim.name, now(), detail="through the management API")

    def _hub_burst(self):
        seconds = self.rng.uniform(5, 12)
        spec = self.rng.choice([
            {"errorRate": 0.3}, {"throttleRate": 0.3, "retryAfterSeconds": 1}, {"dropRate": 0.2},
            {"timeoutRate": 0.1}, {"errorRate": 0.15, "throttleRate": 0.1, "timeoutRate": 0.05, "dropRate": 0.05}])
        return self._burst("hub", ["hub"], spec, seconds, "hub-burst")

    def _target_burst(self):
        # The clusters a consumer fault's victim held are left alone while that fault recovers:
        # their syncs after the takeover are what its goal times (chaos_checks.stretches).
        spared = self._recovering_holds()
        names = [n for n in self.s.sim.names if n not in spared]
        chosen = self.rng.sample(names, min(len(names), max(3, len(self.s.sim.names) // 20)))
        seconds = self.rng.uniform(8, 20)
        spec = self.rng.choice([
            {"errorRate": 0.5}, {"throttleRate": 0.5, "retryAfterSeconds": 2}, {"timeoutRate": 0.3},
            {"dropRate": 0.3}, {"errorRate": 0.2, "throttleRate": 0.1, "timeoutRate": 0.05, "dropRate": 0.1}])
        fault = self._burst("target", chosen, spec, seconds, "target-burst")
        fault.clusters = tuple(sorted(chosen))
        return fault

    def _recovering_holds(self):
        """The clusters held by the victims of consumer faults that may still be recovering (within
        their window, and a margin for the syncs that take them over)."""
        t = now()
        with self._lock:
            faults = list(self.faults)
        return {c for f in faults if f.kind in ("consumer-kill", "consumer-pause")
                and t < f.at + self._window(f) + 10 for c in f.held}

    def _burst(self, slot, clusters, spec, seconds, kind):
        with self._lock:
            self._bursting.add(slot)
        self.s.sim.set_faults(clusters, **spec)
        what = ", ".join(f"{k}={v}" for k, v in spec.items())
        where = "hub" if slot == "hub" else f"{len(clusters)} clusters"
        fault = Fault(kind, where, now(), detail=f"{what} for {seconds:.0f}s")

        def clear():
            try:
                self.s.sim.clear_faults(clusters)
            except Exception as e:
                self.errors.append(f"clearing {kind}: {e}")
            fault.ended = now()
            if slot == "hub" and spec.get("timeoutRate"):
                # A hub request the burst left unanswered gives up only after its timeout: a
                # watch or a consumer's read waits that long past the burst's end.
                fault.lingers = fault.ended + HUB_REQUEST_TIMEOUT
            with self._lock:
                self._bursting.discard(slot)
        self._later(seconds, clear)
        return fault


class EditStream(Background):
    """Edits SyncSets (`rate` per second, random clusters) and SelectorSyncSets (every
    `selector_every` seconds) on the hub the whole time: a resource's data.payload gets a new
    value. Failed edits (hub bursts) are retried by the next round; counts what it did."""

    def __init__(self, hub, clusters, syncsets, selector_syncsets, rate, selector_every, rng):
        self.hub = hub
        self.clusters = clusters
        self.syncsets = syncsets
        self.selector_syncsets = selector_syncsets
        self.rate = rate
        self.selector_every = selector_every
        self.rng = rng
        self.edits = 0
        self.failed = 0
        self.times = []   # wall time of each edit the hub took: work for the publishers
        self._n = 0
        super().__init__("edits")

    def _loop(self):
        next_selector = time.monotonic() + self.selector_every
        while not self._stop.wait(1.0 / self.rate):
            if self.selector_syncsets and time.monotonic() >= next_selector:
                next_selector = time.monotonic() + self.selector_every
                k = self.rng.randrange(self.selector_syncsets)
                self.edit(f"/apis/hive.openshift.io/v1/selectorsyncsets/fleet-sss-{k:02d}")
            elif self.syncsets:
                cluster = self.rng.choice(self.clusters)
                k = self.rng.randrange(self.syncsets)
                self.edit(f"/apis/hive.openshift.io/v1/namespaces/{cluster}/syncsets/{cluster}-ss-{k:02d}")

    def edit(self, path):
        self._n += 1
        try:
            # A short timeout, as a person's kubectl would give up: a hub burst's unanswered
            # request must not stall the stream (and with it the recovery figures).
            obj = self.hub.get(path, timeout=5)
            resources = obj["spec"]["resources"]
            r = resources[self.rng.randrange(len(resources))]
            r.setdefault("data", {})["payload"] = f"edit-{self._n}-{self.rng.getrandbits(32):08x}"
            self.hub.update(path, obj, timeout=5)
            self.edits += 1
            self.times.append(now())
        except Exception:   # a hub burst (an error or no answer) or a 409: the stream goes on
            self.failed += 1


def make_rng(seed):
    return random.Random(seed)


def held_claims(leases, syncs, liveness, t):
    """{consumer identity: [clusters it holds the claim of at `t`]} from the clusters'
    ClusterSyncLeases (common/bus/cluster_claim.h), their ClusterSyncs and the consumers' liveness
    Leases: a claim of one sync while live and not given back by a status write since (the
    ClusterSync's resourceVersion is not newer); a sticky claim while its holder's liveness Lease
    lives (renewTime + duration after `t`) in the claim's epoch."""
    status_rv = {c["metadata"]["namespace"]: int(c["metadata"]["resourceVersion"]) for c in syncs}
    alive = {}   # identity -> the epoch it lives in
    for lease in liveness:
        meta, spec = lease["metadata"], lease.get("spec") or {}
        if (meta.get("labels") or {}).get(LIVENESS_LABEL) != "true" or not spec.get("holderIdentity"):
            continue
        if unix_seconds(spec.get("renewTime")) + int(spec.get("leaseDurationSeconds") or 0) > t:
            alive[spec["holderIdentity"]] = (meta.get("annotations") or {}).get(EPOCH)
    held = {}
    for lease in leases:
        meta = lease["metadata"]
        claim = meta.get("annotations") or {}
        holder = claim.get("syncbus.io/holder", "")
        if not holder:
            continue
        if claim.get(CLAIM_KIND) == STICKY:
            if holder not in alive or alive[holder] != claim.get(EPOCH):
                continue
        else:
            renewed = unix_seconds(claim.get("syncbus.io/renew-time"))
            duration = int(claim.get("syncbus.io/lease-duration-seconds", "0") or 0)
            if renewed + duration < t or status_rv.get(meta["namespace"], 0) > int(meta["resourceVersion"]):
                continue
        held.setdefault(holder, []).append(meta["namespace"])
    return held


def unix_seconds(micro_time):
    """A Lease's MicroTime ("2026-11-25T13:20:20.533434Z") in Unix seconds; 0 when unset."""
    try:
        return datetime.datetime.strptime(micro_time, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except (TypeError, ValueError):
        return 0.0
