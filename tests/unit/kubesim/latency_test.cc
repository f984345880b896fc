// Tests for the simulator's lognormal latency model.
#include "tests/kubesim/latency.h"

#include <algorithm>
#include <vector>

#include <doctest/doctest.h>

#include "common/random_impl.h"
#include "tests/fakes/common/fake_random.h"

namespace syncbus::kubesim {
namespace {

TEST_CASE("InverseNormalCdf matches known standard normal quantiles") {
  CHECK(InverseNormalCdf(0.5) == doctest::Approx(0.0).epsilon(1e-9));
  CHECK(InverseNormalCdf(0.975) == doctest::Approx(1.959963985).epsilon(1e-8));
  CHECK(InverseNormalCdf(0.01) == doctest::Approx(-2.326347874).epsilon(1e-8));
  CHECK(InverseNormalCdf(0.999) == doctest::Approx(3.090232306).epsilon(1e-8));
  CHECK(InverseNormalCdf(1e-6) == doctest::Approx(-4.753424309).epsilon(1e-7));
  CHECK(InverseNormalCdf(0.3) == doctest::Approx(-InverseNormalCdf(0.7)).epsilon(1e-12));
}

TEST_CASE("LognormalLatency fitted to p50 and p99 reproduces them exactly") {
  auto latency = LognormalLatency::Fit(27, 230);
  REQUIRE(latency.ok());
  CHECK(latency->QuantileMs(0.5) == doctest::Approx(27).epsilon(1e-9));
  CHECK(latency->QuantileMs(0.99) == doctest::Approx(230).epsilon(1e-7));
  // A scripted random draws exactly the quantile asked for.
  FakeRandom median(0.5);
  CHECK(latency->Sample(median) == std::chrono::milliseconds(27));
  FakeRandom tail(0.99);
  CHECK(latency->Sample(tail) == std::chrono::milliseconds(230));
  // A zero draw stays finite.
  FakeRandom zero(0.0);
  CHECK(latency->SampleMs(zero) >= 0);
}

TEST_CASE("LognormalLatency sample quantiles are within a few percent of the targets") {
  auto latency = LognormalLatency::Fit(27, 230);
  REQUIRE(latency.ok());
  SeededRandom random(42);
  std::vector<double> samples;
  constexpr size_t kDraws = 100000;
  samples.reserve(kDraws);
  for (size_t i = 0; i < kDraws; ++i) samples.push_back(latency->SampleMs(random));
  std::sort(samples.begin(), samples.end());
  double p50 = samples[kDraws / 2];
  double p99 = samples[kDraws * 99 / 100];
  CHECK(p50 == doctest::Approx(27).epsilon(0.03));
  CHECK(p99 == doctest::Approx(230).epsilon(0.05));
  CHECK(samples.front() > 0);
}

TEST_CASE("LognormalLatency with p50 equal to p99 is a constant") {
  auto latency = LognormalLatency::Fit(50, 50);
  REQUIRE(latency.ok());
  SeededRandom random(7);
  for (int i = 0; i < 100; ++i) CHECK(latency->Sample(random) == std::chrono::milliseconds(50));
}

TEST_CASE("LognormalLatency rejects impossible targets") {
  CHECK_FALSE(LognormalLatency::Fit(0, 10).ok());
  CHECK_FALSE(LognormalLatency::Fit(-1, 10).ok());
  CHECK_FALSE(LognormalLatency::Fit(30, 20).ok());
  CHECK(LognormalLatency::Fit(30, 20).status().code() == Code::kInvalidArgument);
}

}  // namespace
}  // namespace syncbus::kubesim
