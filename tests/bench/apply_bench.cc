// syncbus-apply-bench: drives the consumer's apply engine (ClusterSyncer) directly against a hub
// and target clusters served by syncbus-kubesim, with a full reapply of every cluster, and
// prints throughput, CPU per apply, peak RSS, peak requests in flight and per-cluster sync time
// against the slowest set's serial latency. scripts/bench starts the simulator and runs this.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <prometheus/registry.h>
#include <sys/resource.h>

#include "common/clock.h"
#include "common/http/curl_transport.h"
#include "common/kube/client_impl.h"
#include "common/kube/config.h"
#include "common/log.h"
#include "consumer/cluster_syncer.h"
#include "consumer/target_clients.h"
#include "tests/bench/bench_goal.h"

namespace {

using namespace syncbus;

struct ClusterResult {
  double seconds = 0;                            // the whole Sync call
  std::optional<consumer::SyncOutcome> outcome;  // unset when Sync failed
};

using testing::Verdict;

// For printing: a percentile, 0 without samples (the verdicts say "no data" then).
double Percentile(const std::vector<double>& v, double q) {
  return testing::Percentile(v, q).value_or(0);
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

long PeakRssKiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

int Run(int argc, char** argv) {
  CLI::App cli{"syncbus-apply-bench: the consumer's apply engine against syncbus-kubesim"};
  std::string kubeconfig;
  int workers = 40;
  int passes = 1;
  long max_idle = 1024;
  consumer::SyncerOptions options;
  options.parallel_sync_sets = 60;
  options.max_in_flight = 4000;
  options.per_cluster_in_flight = 60;
  options.per_cluster_qps = 0;
  cli.add_option("--kubeconfig", kubeconfig, "the simulator's hub kubeconfig")->required();
  cli.add_option("--workers", workers, "clusters synced at once (the delivery loop's workers)")
      ->capture_default_str();
  cli.add_option("--parallel-sync-sets", options.parallel_sync_sets)->capture_default_str();
  cli.add_option("--max-idle-connections", max_idle,
                 "connections kept open by idle targets (closed least recently used first)")
      ->capture_default_str();
  cli.add_option("--passes", passes, "full reapplies of the fleet, one after another")
      ->capture_default_str();
  cli.add_option("--max-in-flight", options.max_in_flight)->capture_default_str();
  cli.add_option("--per-cluster-in-flight", options.per_cluster_in_flight)->capture_default_str();
  cli.add_option("--per-cluster-qps", options.per_cluster_qps, "0 = unlimited")
      ->capture_default_str();
  CLI11_PARSE(cli, argc, argv);
  log::Init("warn", "text", "bench");

  auto config = kube::LoadKubeconfigFile(kubeconfig);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 1;
  }
  http::CurlTransport::Options topts;
  // HTTP/1.1 to the simulator: one connection per request in flight.
  topts.max_host_connections = 0;
  topts.max_idle_connections = max_idle;
  auto curl = http::CurlTransport::Create(topts);
  if (!curl.ok()) {
    std::fprintf(stderr, "%s\n", curl.status().ToString().c_str());
    return 1;
  }
  http::CurlTransport& curl_transport = **curl;
  std::shared_ptr<http::Transport> transport = std::move(*curl);
  kube::ClientImpl hub(*config, transport);
  auto cds = hub.List(kube::Collection(kube::resources::kClusterDeployments), {});
  if (!cds.ok()) {
    std::fprintf(stderr, "listing ClusterDeployments: %s\n", cds.status().ToString().c_str());
    return 1;
  }
  std::vector<std::pair<std::string, std::string>> clusters;
  for (const auto& cd : cds->items) {
    clusters.emplace_back(cd["metadata"].value("namespace", ""), cd["metadata"].value("name", ""));
  }
  prometheus::Registry registry;
  consumer::TargetClients targets(transport, 0);
  consumer::DirectHubReader reader(hub);
  consumer::ClusterSyncer syncer(options, hub, reader, targets, RealClock(), registry);

  // One pass syncs every cluster once; later passes find the per-cluster clients and discovery
  // caches warm, as a consumer does on the periodic reapply of clusters it has seen.
  auto run_pass = [&](int pass) -> long {
    std::printf("pass %d (%s caches)\n", pass, pass == 1 ? "cold" : "warm");
    std::vector<ClusterResult> results(clusters.size());
    std::atomic<size_t> next{0};
    double cpu_before = CpuSeconds();
    auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int w = 0; w < workers; ++w) {
      threads.emplace_back([&] {
        for (size_t i = next++; i < clusters.size(); i = next++) {
          SyncRequest req;
          req.cluster_namespace = clusters[i].first;
          req.cluster_name = clusters[i].second;
          req.full_reapply = true;
          auto t0 = std::chrono::steady_clock::now();
          auto out = syncer.Sync(req);
          results[i].seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (out.ok()) results[i].outcome = std::move(*out);
        }
      });
    }
    for (auto& t : threads) t.join();
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double cpu = CpuSeconds() - cpu_before;

    long applies = 0, failed = 0;
    std::vector<double> sync_s, target_s, prepare_s, store_s, ratio, target_ratio;
    for (const auto& r : results) {
      sync_s.push_back(r.seconds);
      if (!r.outcome || !r.outcome->failed_sets.empty()) ++failed;
      if (!r.outcome) continue;
      const consumer::SyncOutcome& o = *r.outcome;
      applies += o.applies;
      target_s.push_back(o.target_seconds);
      prepare_s.push_back(o.prepare_seconds);
      store_s.push_back(o.store_seconds);
      if (o.slowest_set_serial_seconds > 0) {
        ratio.push_back(r.seconds / o.slowest_set_serial_seconds);
        target_ratio.push_back(o.target_seconds / o.slowest_set_serial_seconds);
      }
    }
    const double us_per_apply = applies > 0 ? cpu * 1e6 / static_cast<double>(applies) : 0.0;
    // Per-apply CPU of a pass that applied nothing is unknown, not zero.
    const std::optional<double> cpu_per_apply =
        applies > 0 ? std::optional<double>(us_per_apply) : std::nullopt;
    const double rss_mib = static_cast<double>(PeakRssKiB()) / 1024.0;
    uint64_t sim_peak = 0;
    auto stats = hub.GetPath("/_sim/stats");
    if (stats.ok() && stats->contains("total"))
      sim_peak = (*stats)["total"].value("peakInFlight", uint64_t{0});
    auto lim = syncer.limiter_stats();
    std::printf("clusters            %zu (%ld failed)\n", clusters.size(), failed);
    std::printf("applies             %ld in %.2f s = %.0f applies/s\n", applies, elapsed,
                static_cast<double>(applies) / elapsed);
    std::printf("consumer CPU        %.2f s = %.1f us per apply\n", cpu, us_per_apply);
    std::printf("peak RSS            %.1f MiB\n", rss_mib);
    std::printf("peak in flight      %d (engine), %llu (simulator, all servers)\n",
                lim.peak_in_flight, static_cast<unsigned long long>(sim_peak));
    auto ts = curl_transport.stats();
    std::printf("connections opened  %llu for %llu requests\n",
                static_cast<unsigned long long>(ts.connections),
                static_cast<unsigned long long>(ts.completed));
    std::printf("cluster sync time   p50 %.3f s, p99 %.3f s, max %.3f s\n", Percentile(sync_s, 0.5),
                Percentile(sync_s, 0.99), Percentile(sync_s, 1.0));
    std::printf(
        "target phase time   p50 %.3f s, p99 %.3f s (deletions + applies, without hub "
        "reads/writes)\n",
        Percentile(target_s, 0.5), Percentile(target_s, 0.99));
    std::printf(
        "before / after      p50 %.3f s, p99 %.3f s (hub reads, kubeconfig, discovery) / "
        "p50 %.3f s, p99 %.3f s (status write, lease)\n",
        Percentile(prepare_s, 0.5), Percentile(prepare_s, 0.99), Percentile(store_s, 0.5),
        Percentile(store_s, 0.99));
    std::printf(
        "sync / slowest set  p50 %.2f, p99 %.2f; target phase / slowest set p50 %.2f, p99 %.2f\n"
        "                    (1.00 = the slowest set's serial latency)\n",
        Percentile(ratio, 0.5), Percentile(ratio, 0.99), Percentile(target_ratio, 0.5),
        Percentile(target_ratio, 0.99));
    // The targets for one consumer process (figures, not a pass/fail of the run); a figure of
    // a pass that measured nothing has "no data", never "met".
    const std::optional<double> in_flight =
        applies > 0 ? std::optional<double>(lim.peak_in_flight) : std::nullopt;
    std::printf(
        "targets             in flight >= 2000: %s; CPU <= 150 us/apply: %s; RSS <= 256 MiB: %s;\n"
        "                    target phase <= 1.20 x slowest set: p50 %s, p99 %s\n",
        Verdict(in_flight, 2000, /*at_most=*/false).c_str(), Verdict(cpu_per_apply, 150).c_str(),
        Verdict(applies > 0 ? std::optional<double>(rss_mib) : std::nullopt, 256).c_str(),
        Verdict(testing::Percentile(target_ratio, 0.5), 1.2).c_str(),
        Verdict(testing::Percentile(target_ratio, 0.99), 1.2).c_str());
    return failed;
  };
  long failed = 0;
  for (int pass = 1; pass <= passes; ++pass) failed += run_pass(pass);
  return failed == 0 ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  return Run(argc, argv);
}
