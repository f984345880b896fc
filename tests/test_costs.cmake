# The longest discovered tests and what one took (seconds, on the 2-core machine, in a
# scripts/test run). ctest starts the costliest first, so that none is left running alone at the
# end of a parallel stage. A fresh clone has no ctest timings of its own (build/Testing); once it
# has them, ctest uses those instead. An absent name (a filtered or a smaller run) is ignored.
# Included by tests/CMakeLists.txt after the doctest discoveries (TEST_INCLUDE_FILES).
foreach(suffix "" " [rabbitmq 4.0]")
  set_tests_properties(
    "integration.publisher.publisher: broker stopped and restarted, every pending cluster still gets its message${suffix}"
    PROPERTIES COST 250)
  set_tests_properties(
    "e2e.pipeline.every read command prints table, wide, json and yaml, and exits like kubectl${suffix}"
    PROPERTIES COST 65)
  set_tests_properties(
    "integration.consumer.transient target faults at a set rate: every cluster ends Success, with retries counted${suffix}"
    PROPERTIES COST 40)
endforeach()
set_tests_properties("conformance.hive.simulator.TestReconcileClusterSync_ResourcesToDeleteAreOrdered"
                     PROPERTIES COST 175)
set_tests_properties(
  "envtest.hive.differential: Hive's clustersync and syncbus leave the same ClusterSync, lease and target objects"
  PROPERTIES COST 360)
set_tests_properties("envtest.hive.switch-over with Hive: Hive, then syncbus, then Hive again" PROPERTIES COST 250)
set_tests_properties(
  "envtest.hive.switch-over without Hive: objects, ClusterSync and lease as Hive writes them, taken over and left in Hive's formats"
  PROPERTIES COST 95)
set_tests_properties("conformance.hive.kube-apiserver.TestReconcileClusterSync_ResourcesToDeleteAreOrdered"
                     PROPERTIES COST 70)
