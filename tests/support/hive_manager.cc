#include "tests/support/hive_manager.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/yaml_json.h"
#include "tests/support/files.h"

namespace syncbus::testing {
namespace {

namespace fs = std::filesystem;

const kube::Resource kCrds{"apiextensions.k8s.io", "v1", "customresourcedefinitions",
                           "CustomResourceDefinition", false};
const kube::Resource kStatefulSets{"apps", "v1", "statefulsets", "StatefulSet", true};

void ApplyCrdFile(kube::ClientImpl& hub, const std::string& file) {
  Result<Json> crd = YamlToJson(ReadFile(file));
  REQUIRE_MESSAGE(crd.ok(), file << ": " << crd.status().ToString());
  const std::string name = (*crd)["metadata"]["name"];
  Result<Json> applied = hub.Apply(kube::Object(kCrds, "", name), *crd, {"hive-tests", true});
  REQUIRE_MESSAGE(applied.ok(), name << ": " << applied.status().ToString());
}

}  // namespace

void ExitDidNotRun(const std::string& why) {
  std::printf("did not run: %s\n", why.c_str());
  std::fflush(stdout);
  std::_Exit(77);
}

std::optional<std::string> HiveManager::Dir(std::string* why) {
  const char* env =
      std::getenv("SYNCBUS_HIVE_DIR");  // NOLINT(concurrency-mt-unsafe): tests read it once
  std::string dir = env != nullptr && *env != '\0' ? env : SourceDir() + "/../shared/hive";
  std::error_code ec;
  if (!fs::exists(dir + "/manager", ec)) {
    if (why != nullptr)
      *why = "no upstream Hive controller manager at " + dir + "/manager (set SYNCBUS_HIVE_DIR)";
    return std::nullopt;
  }
  return fs::weakly_canonical(dir, ec).string();
}

void HiveManager::PrepareHub(kube::ClientImpl& hub, const std::string& dir) {
  for (const auto& entry : fs::directory_iterator(dir + "/crds")) {
    if (entry.path().extension() == ".yaml") ApplyCrdFile(hub, entry.path().string());
  }
  // The repository's copies are newer (template fields): they win where both have one.
  for (const auto& entry : fs::directory_iterator(SourceDir() + "/tests/kubesim/crds")) {
    if (entry.path().extension() == ".yaml") ApplyCrdFile(hub, entry.path().string());
  }
  Result<Json> ns =
      hub.Apply(kube::Object(kube::resources::kNamespaces, "", "hive"),
                {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "hive"}}}},
                {"hive-tests", true});
  REQUIRE_MESSAGE(ns.ok(), ns.status().ToString());
  Json sts = {
      {"apiVersion", "apps/v1"},
      {"kind", "StatefulSet"},
      {"metadata", {{"name", "hive-clustersync"}, {"namespace", "hive"}}},
      {"spec",
       {{"replicas", 1},
        {"serviceName", "hive-clustersync"},
        {"selector", {{"matchLabels", {{"app", "hive-clustersync"}}}}},
        {"template",
         {{"metadata", {{"labels", {{"app", "hive-clustersync"}}}}},
          {"spec",
           {{"containers", Json::array({{{"name", "clustersync"}, {"image", "none"}}})}}}}}}}};
  Result<Json> made =
      hub.Apply(kube::Object(kStatefulSets, "hive", "hive-clustersync"), sts, {"hive-tests", true});
  REQUIRE_MESSAGE(made.ok(), made.status().ToString());
  Result<Json> status =
      hub.Patch(kube::StatusOf(kStatefulSets, "hive", "hive-clustersync"), kube::PatchType::kMerge,
                R"({"status":{"replicas":1,"currentReplicas":1}})");
  REQUIRE_MESSAGE(status.ok(), status.status().ToString());
}

HiveManager::HiveManager(const std::string& dir, const std::string& hub_kubeconfig,
                         const std::string& log_file) {
  const std::string lock =
      fs::weakly_canonical(fs::path(dir) / ".." / ".." / ".hive-manager.lock").string();
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  REQUIRE_MESSAGE(lock_fd_ >= 0, "cannot open " << lock);
  REQUIRE_MESSAGE(::flock(lock_fd_, LOCK_EX) == 0,
                  "cannot lock " << lock);  // waits for another run
  Result<ChildProcess> started = ChildProcess::Start(
      {"/usr/bin/env", "HIVE_NS=hive", "HIVE_SKIP_LEADER_ELECTION=true",
       "HIVE_CLUSTERSYNC_POD_NAME=hive-clustersync-0", "KUBECONFIG=" + hub_kubeconfig,
       "clustersync-client-qps=1000", "clustersync-client-burst=2000", dir + "/manager",
       "--controllers=clustersync", "--log-level=info"},
      log_file);
  REQUIRE_MESSAGE(started.ok(), started.status().ToString());
  process_ = std::make_unique<ChildProcess>(std::move(*started));
}

std::optional<int> HiveManager::Stop() {
  std::optional<int> code;
  if (process_) code = process_->Stop(SIGTERM, std::chrono::seconds(30));
  return code;
}

HiveManager::~HiveManager() {
  Stop();
  process_.reset();
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
}

}  // namespace syncbus::testing
