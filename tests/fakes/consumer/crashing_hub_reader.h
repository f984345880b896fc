// CrashingHubReader: a HubReader that reads through another one and aborts the process when a
// sync reads a cluster whose ClusterDeployment carries a given annotation, as a crash bug on
// poison input would. The whole-system test's poison (tests/chaos: syncbus-consumer-chaos);
// never part of a daemon. Thread-safe as the reader it wraps.
#pragma once

#include <string>

#include "consumer/hub_reader.h"

namespace syncbus::testing {

// The line logged just before the abort (scripts/lib's chaos checks match it).
inline constexpr char kPlantedCrashLine[] =
    "crashing on purpose: the ClusterDeployment carries the crash annotation";

class CrashingHubReader final : public consumer::HubReader {
 public:
  // `inner` must outlive this reader.
  CrashingHubReader(consumer::HubReader& inner, std::string annotation)
      : inner_(inner), annotation_(std::move(annotation)) {}

  Result<consumer::ClusterState> Read(const SyncRequest& request) override;
  Result<consumer::ClusterState> ReadAfresh(const SyncRequest& request) override;
  bool Overtaken(const consumer::ClusterState& state) const override {
    return inner_.Overtaken(state);
  }
  void NoteStatusWritten(const Json& cluster_sync) override {
    inner_.NoteStatusWritten(cluster_sync);
  }
  // Not a sync's read (the delivery loop's look at a returned request): passed through.
  std::optional<consumer::ClusterState> ReadIfFresh(const SyncRequest& request) override {
    return inner_.ReadIfFresh(request);
  }

 private:
  Result<consumer::ClusterState> CrashIfAnnotated(Result<consumer::ClusterState> state,
                                                  const SyncRequest& request);

  consumer::HubReader& inner_;
  const std::string annotation_;
};

}  // namespace syncbus::testing
