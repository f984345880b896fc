"""The chaos run's rollout in waves (scripts/chaos): a SelectorSyncSet on every cluster with the
syncbus.io/rollout annotation (waves by count: a few clusters, a quarter of the fleet, then the
rest; a short healthyFor; a failure budget that the faults cannot exhaust), edited again each time
its rollout completes while the faults go on, and once in the middle of a rollout (a new
generation restarts at wave 1). Each generation writes a ConfigMap of its own (its mark), so the
simulator's journal shows when each cluster received which generation; the journal also holds
every rollout state the publisher wrote (chaos_checks.rollout_history), which the checks hold the
marks against."""

import copy
import json
import time

from syncbus_tools.chaos_system import Background, note

HIVE = "/apis/hive.openshift.io/v1"
SET_NAME = "chaos-rollout"
SPEC_ANNOTATION = "syncbus.io/rollout"
STATE_ANNOTATION = "syncbus.io/rollout-state"
MARK_PREFIX = SET_NAME + "-g"   # + the edit's number: the ConfigMap only that generation writes

# A quarter of the fleet after the canaries, then the rest. A wave tolerates half its clusters
# failing: a target burst strikes 5% of the fleet, and a halt here would be no fault's doing.
SPEC = {"waves": [{"clusters": 5}, {"clusters": "25%"}], "maxFailures": "50%", "healthyFor": "5s",
        "progressDeadline": "20m"}
RESOURCES = 2   # ConfigMaps of the set on each cluster: its content and its generation's mark


class RolloutStream(Background):
    """Creates the rollout's set (create) and, between start() and stop(), edits it each time
    its rollout is Complete, once when one is in wave 2 or later, and after a halt (an operator's
    revert rolls out the same way). `marks`: {ConfigMap name: the set generation that writes
    it}; `halts`: the halted states it saw. Thread: one of its own; `hub` must outlive it."""

    def __init__(self, hub, rng):
        self.hub = hub
        self.rng = rng
        self.path = f"{HIVE}/selectorsyncsets/{SET_NAME}"
        self.marks = {}
        self.halts = []
        self.edits = 0
        self.failed = 0
        self.restarted = False    # a generation made in the middle of a rollout
        self._n = 0
        super().__init__("rollout")

    def create(self):
        """The set, shaped as the fleet's SelectorSyncSets (their selector and namespace)."""
        template = self.hub.get(f"{HIVE}/selectorsyncsets/fleet-sss-00")
        cm = template["spec"]["resources"][0]
        self._cm = {"apiVersion": cm.get("apiVersion", "v1"), "kind": cm.get("kind", "ConfigMap"),
                    "namespace": cm["metadata"].get("namespace", "default")}
        obj = {"apiVersion": "hive.openshift.io/v1", "kind": "SelectorSyncSet",
               "metadata": {"name": SET_NAME, "annotations": {SPEC_ANNOTATION: json.dumps(SPEC)}},
               "spec": {"clusterDeploymentSelector": template["spec"]["clusterDeploymentSelector"],
                        "resourceApplyMode": "Upsert", "resources": self._resources()}}
        _, made = self.hub.request("POST", f"{HIVE}/selectorsyncsets", obj, accept_codes=(201,))
        self.marks[self._mark()] = made["metadata"]["generation"]

    def _mark(self):
        return f"{MARK_PREFIX}{self._n:03d}"

    def _resources(self):
        def cm(name, payload):
            return {"apiVersion": self._cm["apiVersion"], "kind": self._cm["kind"],
                    "metadata": {"name": name, "namespace": self._cm["namespace"]}, "data": {"payload": payload}}
        return [cm(SET_NAME, f"rollout-{self._n}-{self.rng.getrandbits(32):08x}"),
                cm(self._mark(), str(self._n))]

    def read(self):
        """(the set, its rollout state or None); raises on a hub error."""
        obj = self.hub.get(self.path, timeout=5)
        state = (obj["metadata"].get("annotations") or {}).get(STATE_ANNOTATION)
        return obj, json.loads(state) if state else None

    def _loop(self):
        while not self._stop.wait(1.0):
            self.step()

    def step(self):
        """One look at the set, and the edit it calls for, if any."""
        try:
            obj, state = self.read()
        except Exception:   # a hub burst: look again
            return
        if state is None or state.get("generation") != obj["metadata"]["generation"]:
            return
        phase = state.get("phase")
        if phase == "Halted":
            if not self.halts or self.halts[-1] != state:
                self.halts.append(state)
            note(f"rollout of {SET_NAME} generation {state['generation']} halted: {state.get('message')}")
            self._edit(obj)
        elif phase == "Complete" or (not self.restarted and self.edits >= 1 and state.get("wave", 0) >= 2):
            mid = phase != "Complete"
            if self._edit(obj) and mid:
                self.restarted = True
                note(f"rollout of {SET_NAME}: a new generation in wave {state['wave']} of generation "
                     f"{state['generation']}")

    def _edit(self, obj):
        """A new generation: new content and a new mark. False when the hub refused it (a burst,
        or the publisher wrote the state meanwhile: 409); the next look tries again."""
        self._n += 1
        edited = copy.deepcopy(obj)
        edited["spec"]["resources"] = self._resources()
        try:
            _, written = self.hub.request("PUT", self.path, edited, timeout=5)
        except Exception:
            self.failed += 1
            return False
        self.marks[self._mark()] = written["metadata"]["generation"]
        self.edits += 1
        return True

    def wait_complete(self, timeout):
        """Waits until the rollout of the set's current generation is Complete; a halted one is
        resumed (as `syncbusctl rollout resume` would), so that the fleet can converge and the
        other checks be judged; the halt is in `halts`, and fails the run. Returns (the last
        state seen or None, seconds waited)."""
        started = time.monotonic()
        deadline = started + timeout
        state = None
        while time.monotonic() < deadline:
            try:
                obj, state = self.read()
            except Exception:
                time.sleep(1)
                continue
            current = state is not None and state.get("generation") == obj["metadata"]["generation"]
            if current and state.get("phase") == "Complete":
                break
            if current and state.get("phase") == "Halted":
                if not self.halts or self.halts[-1] != state:
                    self.halts.append(state)
                self._resume(obj, state)
            time.sleep(1)
        return state, time.monotonic() - started

    def _resume(self, obj, state):
        resumed = {k: v for k, v in state.items() if k not in ("message", "failing")}
        resumed["phase"] = "Progressing"
        patch = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"],
                              "annotations": {STATE_ANNOTATION: json.dumps(resumed)}}}
        try:
            self.hub.request("PATCH", self.path, patch, content_type="application/merge-patch+json", timeout=5)
            note(f"rollout of {SET_NAME}: resumed after its halt (the check reports it)")
        except Exception:
            pass
