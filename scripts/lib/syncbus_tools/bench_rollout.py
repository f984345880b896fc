"""bench-fleet's rollout phase (simulator mode): what rolling a SelectorSyncSet edit out in waves
costs the hub, beside the same kind of edit without waves in the same run.

1. An edit of the set reaches every cluster at once (no rollout annotation): its hub requests.
2. The set gets a rollout in three waves (1%, 10%, the rest; healthyFor 0s, so that a wave that
   is done releases the next one at the leader's next look), and the next edit rolls out:
   its time, the hub requests of the whole rollout, the writes of the rollout itself (the state
   on the set, its Events), and the overhead per cluster against step 1 (goal: the rollout's own
   writes, a few per wave, and nothing per cluster)."""

import json
import time

from syncbus_tools.testbed import RunError

HIVE = "/apis/hive.openshift.io/v1"
SPEC = '{"waves": [{"clusters": "1%"}, {"clusters": "10%"}], "healthyFor": "0s"}'
GOAL_WRITES_PER_WAVE = 3   # the state released (or completed), healthySince, an Event; plus the start's


def state_of(hub, path):
    annotations = hub.get(path, "selectorsyncsets")["metadata"].get("annotations", {})
    text = annotations.get("syncbus.io/rollout-state")
    return json.loads(text) if text else None


def rollout_writes(requests):
    return sum(n for (verb, res), n in requests.items()
               if (verb, res) in (("patch", "selectorsyncsets"), ("create", "events")))


def rollout_phase(d, pipe, hub, n, report, edit_set, edit_token, since, hub_counts, table):
    print("\n---- rollout: a SelectorSyncSet edit at once, then the next one in three waves", flush=True)
    path = f"{HIVE}/selectorsyncsets/fleet-sss-00"

    # 1. An edit at once.
    base = pipe.publisher_state()
    before, own_before = hub_counts(hub)
    start = time.monotonic()
    edit_set(hub, path, "selectorsyncsets", edit_token())
    plain_seconds = pipe.wait_converged(expect_enqueued=n, enqueued_base=base["enqueued"], label="edit at once",
                                        started=start)
    plain = since(hub, before, own_before)
    plain_total = sum(plain.values())

    # 2. The rollout annotation (the leader writes a state for the current generation: every
    # cluster runs it already), then the next edit in waves.
    obj = hub.get(path, "selectorsyncsets")
    obj["metadata"].setdefault("annotations", {})["syncbus.io/rollout"] = SPEC
    hub.update(path, obj, "selectorsyncsets")
    deadline = time.monotonic() + 120
    while (state_of(hub, path) or {}).get("phase") != "Complete":
        if time.monotonic() > deadline:
            raise RunError(f"rollout: the annotation's first state never completed: {state_of(hub, path)}")
        time.sleep(0.2)
    base = pipe.publisher_state()
    before, own_before = hub_counts(hub)
    start = time.monotonic()
    edit_set(hub, path, "selectorsyncsets", edit_token())
    generation = hub.get(path, "selectorsyncsets")["metadata"]["generation"]
    while True:
        state = state_of(hub, path) or {}
        if state.get("generation") == generation and state.get("phase") == "Complete":
            break
        if state.get("phase") == "Halted" and state.get("generation") == generation:
            raise RunError(f"rollout: halted: {state.get('message')}")
        if time.monotonic() - start > 1800:
            raise RunError(f"rollout: not complete after 1800 s: {state}")
        time.sleep(0.2)
    complete_seconds = time.monotonic() - start
    pipe.wait_converged(expect_enqueued=n, enqueued_base=base["enqueued"], label="rollout", started=start)
    rolled = since(hub, before, own_before)
    rolled_total = sum(rolled.values())
    writes = rollout_writes(rolled)
    waves = state["waves"]
    report.add("rollout: an edit at once, for comparison",
               f"{plain_seconds:.1f} s, hub requests {plain_total / n:.2f} per cluster: {table(plain, n)}")
    report.add("rollout: the next edit in waves",
               f"complete in {complete_seconds:.1f} s ({waves} waves), hub requests {rolled_total / n:.2f} per "
               f"cluster: {table(rolled, n)}")
    report.add("rollout: the rollout's own writes (state on the set, Events)",
               f"{writes} for {waves} waves", f"<= {GOAL_WRITES_PER_WAVE} per wave + 2",
               writes <= GOAL_WRITES_PER_WAVE * waves + 2)
    overhead = (rolled_total - plain_total) / n
    report.add("rollout: overhead in hub requests per cluster",
               f"{overhead:+.3f} ({rolled_total} requests against {plain_total} at once; the leader's renewals "
               f"grow with the rollout's {complete_seconds:.0f} s against {plain_seconds:.0f} s)")
    # The set goes back to plain edits for what follows.
    obj = hub.get(path, "selectorsyncsets")
    for key in ("syncbus.io/rollout", "syncbus.io/rollout-state"):
        obj["metadata"]["annotations"].pop(key, None)
    hub.update(path, obj, "selectorsyncsets")
    pipe.settle()
