#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common/fake_clock.h"
#include "consumer/request_limiter.h"

using namespace syncbus;
using namespace syncbus::consumer;

TEST_CASE("limiter: the global and per-cluster in-flight caps hold requests back until releases") {
  FakeClock clock;
  RequestLimiter limiter({/*max_in_flight=*/3, /*per_cluster_in_flight=*/2, /*per_cluster_qps=*/0}, clock);
  std::vector<std::string> started;
  auto submit = [&](const std::string& c, const std::string& tag) {
    limiter.Submit(c, [&started, tag] { started.push_back(tag); });
  };
  submit("a", "a1");
  submit("a", "a2");
  submit("a", "a3");   // per-cluster cap
  submit("b", "b1");   // global cap reached after this one
  submit("c", "c1");
  CHECK(started == std::vector<std::string>{"a1", "a2", "b1"});
  CHECK(limiter.stats().in_flight == 3);
  CHECK(limiter.stats().queued == 2);

  limiter.Release("b");   // the global slot goes to the cluster that waited for it
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
  FakeClock clock;   // frozen: no token comes back by itself
  RequestLimiter limiter({100, 100, /*per_cluster_qps=*/3}, clock);
  int started = 0;
  for (int i = 0; i < 5; ++i) limiter.Submit("a", [&] { ++started; });
  CHECK(started == 3);
  CHECK(limiter.stats().queued == 2);
  int other = 0;
  limiter.Submit("b", [&] { ++other; });   // another cluster has its own bucket
  CHECK(other == 1);
}
