#include "consumer/request_limiter.h"

#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "tests/fakes/common/fake_clock.h"

using namespace syncbus;
using namespace syncbus::consumer;

TEST_CASE("limiter: the global and per-cluster in-flight caps hold requests back until releases") {
  FakeClock clock;
  RequestLimiter limiter({/*max_in_flight=*/3, /*per_cluster_in_flight=*/2, /*per_cluster_qps=*/0},
                         clock);
  std::vector<std::string> started;
  auto submit = [&](const std::string& c, const std::string& tag) {
    limiter.Submit(c, [&started, tag] { started.push_back(tag); });
  };
  submit("a", "a1");
  submit("a", "a2");
  submit("a", "a3");  // per-cluster cap
  submit("b", "b1");  // global cap reached after this one
  submit("c", "c1");
  CHECK(started == std::vector<std::string>{"a1", "a2", "b1"});
  CHECK(limiter.stats().in_flight == 3);
  CHECK(limiter.stats().queued == 2);

  limiter.Release("b");  // the global slot goes to the cluster that waited for it
  CHECK(started.back() == "c1");
  limiter.Release("a");
  CHECK(started.back() == "a3");
  CHECK(limiter.stats().peak_in_flight == 3);
  CHECK(limiter.stats().queued == 0);
  limiter.Release("a");
  limiter.Release("a");
  limiter.Release("c");
  CHECK(limiter.stats().in_flight == 0);
  CHECK(limiter.stats().started == 5);
}

TEST_CASE("limiter: the per-cluster rate allows one second of burst, then paces") {
  FakeClock clock;  // frozen: no token comes back by itself
  RequestLimiter limiter({100, 100, /*per_cluster_qps=*/3}, clock);
  int started = 0;
  for (int i = 0; i < 5; ++i) limiter.Submit("a", [&] { ++started; });
  CHECK(started == 3);
  CHECK(limiter.stats().queued == 2);
  int other = 0;
  limiter.Submit("b", [&] { ++other; });  // another cluster has its own bucket
  CHECK(other == 1);
}

TEST_CASE(
    "limiter: paced requests start as tokens come back over time, and idle time buys one second of "
    "burst at most") {
  FakeClock clock;
  RequestLimiter::Options options{100, 100, /*per_cluster_qps=*/4};
  options.pacing_thread = false;
  RequestLimiter limiter(options, clock);
  int started = 0;
  for (int i = 0; i < 10; ++i) limiter.Submit("a", [&] { ++started; });
  CHECK(started == 4);  // the full bucket: one second of burst
  limiter.PaceDue();
  CHECK(started == 4);  // no time passed, no token
  clock.Advance(std::chrono::milliseconds(240));
  limiter.PaceDue();
  CHECK(started == 4);  // 0.96 of a token
  clock.Advance(std::chrono::milliseconds(10));
  limiter.PaceDue();
  CHECK(started == 5);  // 250 ms = one token at 4/s
  clock.Advance(std::chrono::milliseconds(250));
  limiter.PaceDue();
  CHECK(started == 6);
  clock.Advance(std::chrono::seconds(1));
  limiter.PaceDue();
  CHECK(started == 10);  // four more tokens in one second
  CHECK(limiter.stats().queued == 0);

  clock.Advance(std::chrono::seconds(60));  // idle for a minute
  for (int i = 0; i < 10; ++i) limiter.Submit("a", [&] { ++started; });
  CHECK(started == 14);  // the bucket holds one second's worth, not a minute's
  CHECK(limiter.stats().queued == 6);
}
