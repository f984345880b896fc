#include "consumer/hub_inputs.h"

#include <algorithm>
#include <future>

#include "common/base64.h"

namespace syncbus::consumer {

namespace res = kube::resources;

Result<Target> HubInputs::OpenTarget(const hive::ClusterDeployment& cd,
                                     const std::string& kubeconfig_version, bool reread) {
  if (!reread) {
    std::optional<Target> kept =
        targets_.Trusted(cd.meta.Key(), cd.admin_kubeconfig_secret, request_timeout_,
                         {cd.ActiveApiUrl(), cd.api_server_ip_override}, kubeconfig_version);
    if (kept) {
      kept->kept = true;
      return *kept;
    }
  }
  return ReadTarget(cd);
}

Result<Target> HubInputs::ReadTarget(const hive::ClusterDeployment& cd) {
  const std::string key = cd.meta.Key();
  if (cd.admin_kubeconfig_secret.empty()) {
    return InvalidArgument("ClusterDeployment " + key +
                           " names no spec.clusterMetadata.adminKubeconfigSecretRef");
  }
  auto secret = hub_.Get(kube::Object(res::kSecrets, cd.meta.ns, cd.admin_kubeconfig_secret));
  if (kubeconfig_reads_ != nullptr) kubeconfig_reads_->Increment();
  if (!secret.ok()) return secret.status().Annotate("reading admin kubeconfig Secret of " + key);
  std::optional<std::string> kubeconfig;
  if (secret->contains("data") && (*secret)["data"].contains("kubeconfig") &&
      (*secret)["data"]["kubeconfig"].is_string()) {
    kubeconfig = DecodeBase64((*secret)["data"]["kubeconfig"].get<std::string>());
  }
  if (!kubeconfig) {
    return InvalidArgument("admin kubeconfig Secret " + cd.meta.ns + "/" +
                           cd.admin_kubeconfig_secret + " has no valid data.kubeconfig");
  }
  std::string version;
  if (auto meta = secret->find("metadata"); meta != secret->end() && meta->is_object()) {
    version = meta->value("resourceVersion", "");
  }
  return targets_.Get(key, cd.admin_kubeconfig_secret, *kubeconfig, request_timeout_,
                      {cd.ActiveApiUrl(), cd.api_server_ip_override}, version);
}

Status HubInputs::Read(const PlanReads& reads, const std::optional<Target>& target,
                       SecretSources& secrets) {
  // Discovery runs while the source Secrets are read fresh from the hub, all at once: reads,
  // which no one can see.
  std::future<void> discovered;
  if (target) {
    discovered =
        std::async(std::launch::async, [&] { target->mapper->Prefetch(reads.api_versions); });
  }
  Status source_error = ReadSourceSecrets(reads.secrets, secrets);
  if (discovered.valid()) discovered.get();
  return source_error;
}

Status HubInputs::ReadSourceSecrets(const std::vector<std::pair<std::string, std::string>>& sources,
                                    SecretSources& secrets) {
  constexpr size_t kReadsAtOnce = 16;
  for (size_t first = 0; first < sources.size(); first += kReadsAtOnce) {
    std::vector<std::future<Result<Json>>> reads;
    for (size_t i = first; i < std::min(sources.size(), first + kReadsAtOnce); ++i) {
      reads.push_back(std::async(std::launch::async, [this, &source = sources[i]] {
        return hub_.Get(kube::Object(res::kSecrets, source.first, source.second));
      }));
    }
    Status error;
    for (size_t i = first; i < first + reads.size(); ++i) {
      auto read = reads[i - first].get();
      std::string source_key = sources[i].first + "/" + sources[i].second;
      if (!read.ok() && read.status().code() != Code::kNotFound && error.ok()) {
        error = read.status().Annotate("reading source Secret " + source_key);
      }
      secrets.insert_or_assign(source_key, std::move(read));
    }
    if (!error.ok()) return error;
  }
  return Status::Ok();
}

}  // namespace syncbus::consumer
