// Tests for the simulator's fault settings and seeded per-request draws.
#include "tests/kubesim/faults.h"

#include <map>

#include <doctest/doctest.h>

#include "common/random_impl.h"
#include "tests/fakes/common/fake_random.h"

namespace syncbus::kubesim {
namespace {

std::map<FaultAction, int> Count(FaultTable& table, const std::string& cluster, int draws) {
  std::map<FaultAction, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[table.Decide(cluster).action];
  return counts;
}

TEST_CASE("FaultSpec parses the control API's JSON") {
  Json body = Json::parse(R"({"latency": {"p50Ms": 27, "p99Ms": 230}, "errorRate": 0.1,
      "throttleRate": 0.05, "retryAfterSeconds": 3, "timeoutRate": 0.02, "dropRate": 0.01})");
  auto spec = FaultSpec::FromJson(body);
  REQUIRE(spec.ok());
  CHECK(spec->latency_p50_ms == 27);
  CHECK(spec->latency_p99_ms == 230);
  CHECK(spec->error_rate == 0.1);
  CHECK(spec->throttle_rate == 0.05);
  CHECK(spec->retry_after_seconds == 3);
  CHECK(spec->timeout_rate == 0.02);
  CHECK(spec->drop_rate == 0.01);
  // Round trip.
  auto again = FaultSpec::FromJson(spec->ToJson());
  REQUIRE(again.ok());
  CHECK(again->ToJson() == spec->ToJson());
  // Absent fields are off.
  auto empty = FaultSpec::FromJson(Json::object());
  REQUIRE(empty.ok());
  CHECK_FALSE(empty->has_latency());
  CHECK(empty->error_rate == 0);
}

TEST_CASE("FaultSpec rejects invalid settings") {
  for (const char* text : {R"({"errorRate": 1.5})", R"({"dropRate": -0.1})",
                           R"({"errorRate": 0.6, "throttleRate": 0.6})", R"({"errorRate": "high"})",
                           R"({"latency": {"p50Ms": 50, "p99Ms": 10}})", R"({"latency": 5})",
                           R"([1, 2])", R"({"retryAfterSeconds": -2})"}) {
    CAPTURE(text);
    auto spec = FaultSpec::FromJson(Json::parse(text));
    CHECK_FALSE(spec.ok());
    CHECK(spec.status().code() == Code::kInvalidArgument);
  }
}

TEST_CASE("DecideFault follows the configured rates over many seeded draws") {
  FaultTable table(1234);
  FaultSpec spec;
  spec.error_rate = 0.10;
  spec.throttle_rate = 0.05;
  spec.timeout_rate = 0.02;
  spec.drop_rate = 0.03;
  REQUIRE(table.SetDefault(spec).ok());
  constexpr int kDraws = 200000;
  auto counts = Count(table, "cluster-0001", kDraws);
  auto rate = [&](FaultAction a) { return static_cast<double>(counts[a]) / kDraws; };
  CHECK(rate(FaultAction::kError500) + rate(FaultAction::kError503) ==
        doctest::Approx(0.10).epsilon(0.05));
  CHECK(rate(FaultAction::kError500) == doctest::Approx(0.05).epsilon(0.08));
  CHECK(rate(FaultAction::kThrottle) == doctest::Approx(0.05).epsilon(0.08));
  CHECK(rate(FaultAction::kTimeout) == doctest::Approx(0.02).epsilon(0.12));
  CHECK(rate(FaultAction::kDrop) == doctest::Approx(0.03).epsilon(0.1));
  CHECK(rate(FaultAction::kNone) == doctest::Approx(0.80).epsilon(0.02));
}

TEST_CASE("DecideFault sets Retry-After on throttling and draws latency") {
  FaultSpec spec;
  spec.throttle_rate = 1;
  spec.retry_after_seconds = 7;
  spec.latency_p50_ms = 40;
  spec.latency_p99_ms = 40;
  auto latency = LognormalLatency::Fit(40, 40);
  REQUIRE(latency.ok());
  FakeRandom random(0.5);
  FaultDecision d = DecideFault(spec, &*latency, random);
  CHECK(d.action == FaultAction::kThrottle);
  CHECK(d.retry_after_seconds == 7);
  CHECK(d.delay == std::chrono::milliseconds(40));
}

TEST_CASE("FaultTable draws are reproducible from the seed and independent per cluster") {
  FaultSpec spec;
  spec.error_rate = 0.3;
  spec.drop_rate = 0.2;
  spec.latency_p50_ms = 27;
  spec.latency_p99_ms = 230;
  FaultTable a(99), b(99), c(100);
  REQUIRE(a.SetDefault(spec).ok());
  REQUIRE(b.SetDefault(spec).ok());
  REQUIRE(c.SetDefault(spec).ok());
  std::vector<std::pair<FaultAction, long long>> seq_a, seq_b, seq_c;
  for (int i = 0; i < 500; ++i) {
    FaultDecision da = a.Decide("cluster-0001");
    // Requests to other clusters in between do not disturb cluster-0001's sequence.
    b.Decide("cluster-0002");
    b.Decide("hub");
    FaultDecision db = b.Decide("cluster-0001");
    FaultDecision dc = c.Decide("cluster-0001");
    seq_a.emplace_back(da.action, da.delay.count());
    seq_b.emplace_back(db.action, db.delay.count());
    seq_c.emplace_back(dc.action, dc.delay.count());
  }
  CHECK(seq_a == seq_b);
  CHECK(seq_a != seq_c);
}

TEST_CASE("FaultTable with no faults answers without delay") {
  FaultTable table(1);
  for (int i = 0; i < 100; ++i) {
    FaultDecision d = table.Decide("hub");
    CHECK(d.action == FaultAction::kNone);
    CHECK(d.delay.count() == 0);
  }
}

TEST_CASE("FaultTable Apply targets named clusters or every cluster") {
  FaultTable table(5);
  auto known = [](const std::string& name) { return name == "hub" || name == "cluster-0001"; };
  REQUIRE(
      table.Apply(Json::parse(R"({"clusters": ["cluster-0001"], "errorRate": 1})"), known).ok());
  CHECK(table.Get("cluster-0001").error_rate == 1);
  CHECK(table.Get("hub").error_rate == 0);
  CHECK(Count(table, "cluster-0001", 50)[FaultAction::kNone] == 0);
  CHECK(Count(table, "hub", 50)[FaultAction::kNone] == 50);

  // Unknown names and invalid bodies change nothing.
  Status missing = table.Apply(Json::parse(R"({"clusters": ["nope"], "dropRate": 1})"), known);
  CHECK(missing.code() == Code::kNotFound);
  Status invalid = table.Apply(Json::parse(R"({"clusters": ["hub"], "dropRate": 2})"), known);
  CHECK(invalid.code() == Code::kInvalidArgument);
  CHECK(table.Get("hub").drop_rate == 0);

  // "*" replaces the default and clears overrides.
  REQUIRE(table.Apply(Json::parse(R"({"clusters": ["*"], "throttleRate": 0.5})"), known).ok());
  CHECK(table.Get("cluster-0001").error_rate == 0);
  CHECK(table.Get("cluster-0001").throttle_rate == 0.5);
  CHECK(table.Get("hub").throttle_rate == 0.5);
  // No "clusters" means every cluster.
  REQUIRE(table.Apply(Json::parse(R"({"dropRate": 0.25})"), known).ok());
  CHECK(table.Get("cluster-0001").drop_rate == 0.25);
  CHECK(table.ToJson()["default"]["dropRate"] == 0.25);
}

}  // namespace
}  // namespace syncbus::kubesim
