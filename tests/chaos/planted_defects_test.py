#!/usr/bin/env python3
"""Each check of the chaos run, and what it rests on, shown failing on the defect it is there to
catch: a copy of syncbus_tools with one defect planted (one line of a check changed so that it no
longer sees its bad case) must make tests/chaos/chaos_checks_test.py fail, in the test named for
that defect; the copy without a defect must pass. A self-test that still passed with the defect
planted would be a test that cannot fail."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "..", "..", "scripts", "lib", "syncbus_tools")
SELFTEST = os.path.join(HERE, "chaos_checks_test.py")

CHECKS = "chaos_checks.py"
SYSTEM = "chaos_system.py"
FAULTS = "chaos_faults.py"
ROLLOUT = "chaos_rollout.py"

# (defect, module, the line as it is, the line with the defect, the self-test that must fail)
# judge_poison's lower bound on the planted crashes, which three defects below replace.
POISON_BOUND = 'least = max(least, (d.get("unsettled") or 0) - returns)'
DEFECTS = [
    ("a lease taken from a live holder is not seen", CHECKS,
     'if holder and holder != s.holder and s.live(entry["t"], self.alive):', "if False:", "test_a_live_lease_taken"),
    ("a sticky claim taken while its holder lives in its epoch is not seen", CHECKS,
     "return alive(self.holder, self.epoch, t_ms) if self.sticky", "return False if self.sticky",
     "test_a_live_sticky_claim_taken"),
    ("a write while another consumer's sticky claim holds is not seen", CHECKS,
     "if s.holder != who or lapsed or (target_write", "if lapsed or (target_write",
     "test_a_write_while_another_consumers_sticky_claim_holds"),
    ("a holder's write after its liveness lapsed in the claim's epoch is not seen", CHECKS,
     'lapsed = not self.alive(s.holder, s.epoch, entry["t"])', "lapsed = False",
     "test_a_write_after_the_holders_liveness_lapsed"),
    ("a renewal after the liveness expired revives its epoch", CHECKS,
     'if entry["t"] >= lease.until:', "if False:", "test_a_write_after_the_holders_liveness_lapsed"),
    ("a sticky claim by a consumer not alive in its epoch is not seen", CHECKS,
     'elif holder and sticky and not self.alive(holder, epoch, entry["t"]):', "elif False:",
     "test_a_sticky_claim_by_a_consumer_not_alive"),
    ("the holder's status write gives a sticky claim back", CHECKS,
     'entry.get("subresource") == "status" and s.holder == who and not s.sticky:',
     'entry.get("subresource") == "status" and s.holder == who:', "test_sticky_claims_survive_status_writes"),
    ("a liveness in another epoch keeps a sticky claim (a legal hand-over flagged)", CHECKS,
     "return epoch == self.epoch and not self.over and t_ms < self.until",
     "return not self.over and t_ms < self.until", "test_a_legal_hand_over_after_the_holders_death"),
    ("a deleted liveness Lease keeps a sticky claim (a legal hand-over flagged)", CHECKS,
     'if entry.get("verb") == "delete":\n            if lease is not None:',
     'if False:\n            if lease is not None:', "test_a_legal_hand_over_after_the_holders_death"),
    ("a sticky claim counts as held after its holder died", CHECKS,
     "and (not s.sticky or self.alive(identity, s.epoch, t_ms))]", "]", "test_one_reading_of_the_lease_scheme"),
    ("a write after its lease lapsed is not seen", CHECKS,
     'lapsed = entry["t"] > s.at + s.duration * 1000', "lapsed = False", "test_a_write_after_the_lease_lapsed"),
    ("a target write after the lease was given back is not seen", CHECKS,
     "or (target_write and s.released)", "", "test_a_target_write_after_the_lease_was_given_back"),
    ("the fault picker counts a sticky claim of a dead holder or of another epoch", FAULTS,
     "if holder not in alive or alive[holder] != claim.get(EPOCH):", "if False:",
     "test_a_sticky_claim_held_while_its_holder_lives_in_its_epoch"),
    ("the fault picker counts an expired liveness Lease as alive", FAULTS,
     'if unix_seconds(spec.get("renewTime")) + int(spec.get("leaseDurationSeconds") or 0) > t:', "if True:",
     "test_a_sticky_claim_held_while_its_holder_lives_in_its_epoch"),
    ("a lease holder no consumer logged is not seen", CHECKS,
     "unknown = sorted(leases.holders - set(identities))", "unknown = []", "test_a_holder_no_consumer_logged"),
    ("clusters synced again once the first of them is", CHECKS,
     'f.recovery["clusters synced again"] = max(times) if len(times) == len(timed) else None',
     'f.recovery["clusters synced again"] = max(times) if times else None', "test_clusters_synced_again"),
    ("a sticky victim's recovery timed on every cluster it held, idle ones too", CHECKS,
     "return [c for c in self.held_by(identity, t_ms) if not self.leases[c].sticky or self.leases[c].syncing]",
     "return self.held_by(identity, t_ms)", "test_clusters_synced_again_with_sticky_claims"),
    ("a held cluster's status stored before its request counts for it", CHECKS,
     "if key in timed and timed[key][1] is None and t > timed[key][0]:", "if key in timed and timed[key][1] is None:",
     "test_clusters_synced_again_after_a_request_with_sticky_claims"),
    ("a request decided past the window counts", CHECKS,
     "return times[i] if i < len(times) and times[i] <= until else None",
     "return times[i] if i < len(times) else None", "test_clusters_synced_again_after_a_request_with_sticky_claims"),
    ("a holder's target write after its status write is no sync in progress", CHECKS,
     "if s.holder == who:   #", "if s.holder == who and not target_write:   #",
     "test_clusters_synced_again_with_sticky_claims"),
    ("a claim write (taken, or a full reapply's renewTime) begins no sync", CHECKS,
     "s.syncing = bool(holder)", "s.syncing = False", "test_a_sticky_holders_syncs_in_progress"),
    ("a sticky victim with no sync in progress counted as one that held nothing", CHECKS,
     'and f.recovery.get("held clusters")]', "and False]", "test_clusters_synced_again_with_sticky_claims"),
    ("the poison's planted crashes need cover only one delivery per request", CHECKS,
     POISON_BOUND, "least = max(least, 1)",
     "test_sticky_claims_too_few_crashes_for_the_returns"),
    ("a return from a consumer's queue is taken for a missing crash", CHECKS,
     POISON_BOUND, 'least = max(least, d.get("unsettled") or 0)',
     "test_sticky_claims_a_return_from_a_holders_queue_covers_a_delivery"),
    ("a request whose consumer died before its trace said it was parked stays on its way", CHECKS,
     "and not died_with(last[r]))", ")",
     "test_a_request_whose_consumer_died_before_flushing_its_park_is_on_its_way_no_more"),
    ("one crash taken to return one copy of the poison only", CHECKS,
     POISON_BOUND, 'least += (d.get("unsettled") or 0) - returns',
     "test_wrong_count"),
    ("a parked request matched to the poison by its cluster", CHECKS,
     'if d.get("messageId") not in poison_requests:', 'if d.get("cluster") != "cluster-0007/cluster-0007":',
     "test_a_request_of_the_victim_parked_the_same_way_is_not_the_poisons"),
    ("convergence passes on fewer objects than the fleet holds", CHECKS,
     "if objects < fleet_objects:", "if False:", "test_fewer_objects_than_the_fleet_holds"),
    ("a goal judged on fewer undisturbed faults than asked", CHECKS,
     "if goal_of(kind, figure) and n < samples]", "if False]", "test_every_goal_judged_on_enough_undisturbed_faults"),
    ("a consumer fault whose victim held nothing is a note", CHECKS,
     'if n.endswith("never did") or n.endswith(HELD_NOTHING)]', 'if n.endswith("never did")]',
     "test_a_victim_that_held_nothing_is_not_timed"),
    ("a recovery past its goal escapes behind a later fault", CHECKS,
     'min(f.recovery[figure], limit if limit is not None else float("inf"))', "f.recovery[figure]",
     "test_a_recovery_past_its_goal_is_judged_although_a_fault_followed"),
    ("a planted poison crash does not disturb a consumer fault's recovery", CHECKS,
     "disturbances = list(faults) + list(crashes)", "disturbances = list(faults)",
     "test_a_planted_crash_disturbs_a_consumer_fault_as_a_kill"),
    ("a JSON log's planted crash has no time", CHECKS,
     'stamp = json.loads(line).get("ts")', "stamp = None", "test_planted_crash_times_from_text_and_json_logs"),
    ("the scan ignores messages held unacknowledged", CHECKS,
     "if unacked:\n                problems.append", "if False:\n                problems.append",
     "test_a_queue_unread_read_in_part_or_held"),
    ("the scan ignores a queue read in part", CHECKS, "if read < ready:", "if False:",
     "test_a_queue_unread_read_in_part_or_held"),
    ("the scan ignores a read that stopped at its cap", CHECKS, "elif read >= asked:", "elif False:",
     "test_a_queue_unread_read_in_part_or_held"),
    ("the scan ignores a daemon that is not running", CHECKS, "if not running:", "if False:",
     "test_a_daemon_not_running_or_a_page_not_read"),
    ("the scan ignores a metrics page it could not read", CHECKS,
     "for url, error in sorted(self.pages.items())\n                     if error is not None]",
     "for url, error in sorted(self.pages.items())\n                     if False]",
     "test_a_daemon_not_running_or_a_page_not_read"),
    ("the scan ignores a missing broker log directory", CHECKS,
     "for d, there in sorted(self.log_dirs.items()) if not there]",
     "for d, there in sorted(self.log_dirs.items()) if False]",
     "test_a_broker_log_directory_missing_or_a_file_unreadable"),
    ("a consumer's identity is not read from a JSON log", SYSTEM,
     "value = m.group(2) if m.group(2) is not None else m.group(1)", 'value = m.group(1) or ""',
     "test_text_and_json_lines"),
    ("a consumer's identity is read from an earlier process's lines", SYSTEM, "f.seek(offset)", "f.seek(0)",
     "test_only_the_running_process_lines"),
    ("a consumer's identities: only its running process's", SYSTEM,
     "return [i for i in (self._identity_of(k) for k in range(len(self.log_offsets))) if i]",
     "return [self.identity()]", "test_every_process_of_a_daemon"),
    ("the scheduler stops at --faults without every goal's samples", FAULTS,
     "return len(self.faults) >= self.total and (not self._wanting() or now() > self._deadline)",
     "return len(self.faults) >= self.total", "test_done_only_with_every_goals_samples"),
    ("a target burst on a cluster the victim held does not disturb its recovery", CHECKS,
     'bool(set(getattr(g, "clusters", ())) & set(getattr(fault, "held", ())))', "False",
     "test_target_burst_disturbs_a_consumer_fault_only_on_a_cluster_its_victim_held"),
    ("a protected consumer fault starts during a target burst", FAULTS,
     'if self._protected(kind) and "target" in bursting:', "if False:",
     "test_a_protected_consumer_fault_waits_for_a_target_burst_to_end"),
    ("a target burst strikes the clusters a recovering victim held", FAULTS,
     "names = [n for n in self.s.sim.names if n not in spared]", "names = list(self.s.sim.names)",
     "test_a_target_burst_spares_the_clusters_a_recovering_victim_held"),
    ("a protected fault starts while a burst still holds a daemon up", FAULTS,
     "max(f.ended, f.lingers) <= t", "f.ended <= t", "test_calm_waits_for_a_lingering_burst"),
    ("a cluster's rollout rank read in the wrong byte order", CHECKS,
     '.digest()[:8], "big")', '.digest()[:8], "little")', "test_ranks_and_waves_as_the_cpp_computes_them"),
    ("a write before its cluster's wave was released is not seen", CHECKS,
     "if not any(released_to(key, state, generation) for state in before):", "if False:",
     "test_a_write_before_its_wave_was_released"),
    ("an older generation's rollout state releases the new one", CHECKS,
     'if state.get("generation") != generation:\n        return False', "",
     "test_a_new_generation_is_not_released_by_the_old_ones_state"),
    ("the hold passes on fewer writes than clusters", CHECKS,
     "if len(history.writes) < len(clusters):", "if False:", "test_too_few_writes_or_one_generation_prove_nothing"),
    ("a wave boundary counts as during faults wherever it fell", CHECKS,
     "hit = [f for f in faults if in_fault(f, t)]", "hit = faults", "test_no_boundary_during_a_fault"),
    ("a rollout that halted on the way passes", CHECKS,
     'if state.get("phase") != "Halted" or key in halted:', "if True:",
     "test_a_halt_fails_and_names_the_faults_then"),
    ("the run never makes a generation in the middle of a rollout", ROLLOUT,
     'elif phase == "Complete" or (not self.restarted and self.edits >= 1 and state.get("wave", 0) >= 2):',
     'elif phase == "Complete":', "test_edits_when_complete_once_mid_rollout_and_after_a_halt"),
    ("a halted rollout at the end is left halted", ROLLOUT, "self._resume(obj, state)", "pass",
     "test_a_halt_at_the_end_is_resumed_and_kept"),
]


def run_selftest(lib):
    env = dict(os.environ, PYTHONPATH=lib)
    return subprocess.run([sys.executable, SELFTEST], env=env, capture_output=True, text=True, timeout=120)


class PlantedDefectsTest(unittest.TestCase):
    def setUp(self):
        self.lib = tempfile.mkdtemp(prefix="syncbus-planted.")
        self.addCleanup(shutil.rmtree, self.lib)
        shutil.copytree(PACKAGE, os.path.join(self.lib, "syncbus_tools"),
                        ignore=shutil.ignore_patterns("__pycache__"))

    def test_the_self_test_passes_without_a_defect(self):
        r = run_selftest(self.lib)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])

    def test_each_defect_fails_its_self_test(self):
        for defect, module, line, planted, selftest in DEFECTS:
            with self.subTest(defect=defect):
                path = os.path.join(self.lib, "syncbus_tools", module)
                with open(path, encoding="utf-8") as f:
                    source = f.read()
                self.assertEqual(source.count(line), 1, f"{module} no longer has the line to plant into")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(source.replace(line, planted))
                try:
                    r = run_selftest(self.lib)
                finally:
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(source)
                self.assertNotEqual(r.returncode, 0, f"the self-test passed with the defect planted: {defect}")
                failed = [t.split()[1] for t in r.stderr.splitlines() if t.startswith(("FAIL:", "ERROR:"))]
                self.assertIn(selftest, failed, r.stderr[-2000:])


if __name__ == "__main__":
    unittest.main()
