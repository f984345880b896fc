#include "tests/fakes/consumer/crashing_hub_reader.h"

#include <cstdlib>

#include "common/log.h"

namespace syncbus::testing {

Result<consumer::ClusterState> CrashingHubReader::Read(const SyncRequest& request) {
  return CrashIfAnnotated(inner_.Read(request), request);
}

Result<consumer::ClusterState> CrashingHubReader::ReadAfresh(const SyncRequest& request) {
  return CrashIfAnnotated(inner_.ReadAfresh(request), request);
}

Result<consumer::ClusterState> CrashingHubReader::CrashIfAnnotated(
    Result<consumer::ClusterState> state, const SyncRequest& request) {
  if (state.ok() && state->cd && state->cd->meta.annotations.count(annotation_) > 0) {
    log::Error(kPlantedCrashLine, {{"cluster", request.ClusterKey()}, {"annotation", annotation_}});
    std::abort();
  }
  return state;
}

}  // namespace syncbus::testing
