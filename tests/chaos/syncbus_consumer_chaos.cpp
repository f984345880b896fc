// syncbus-consumer-chaos: syncbus-consumer with the whole-system test's poison planted. With
// SYNCBUS_CRASH_ON_ANNOTATION=<annotation> set, a sync that reads a cluster whose
// ClusterDeployment carries that annotation aborts the process (CrashingHubReader); otherwise it
// is syncbus-consumer. Built with the tests only; scripts/chaos runs it in place of the daemon.
#include <cstdlib>
#include <memory>
#include <string>

#include "common/log.h"
#include "consumer/consumer_main.h"
#include "tests/fakes/consumer/crashing_hub_reader.h"

int main(int argc, char** argv) {
  using namespace syncbus;
  const char* value = std::getenv("SYNCBUS_CRASH_ON_ANNOTATION");
  if (value == nullptr || *value == '\0') return consumer::ConsumerMain(argc, argv);
  std::string annotation = value;
  log::Warn("fault injection on: syncs of clusters annotated with it abort this process",
            {{"annotation", annotation}});
  return consumer::ConsumerMain(argc, argv, [annotation](consumer::HubReader& inner) {
    return std::make_unique<testing::CrashingHubReader>(inner, annotation);
  });
}
