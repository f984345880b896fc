#include "tests/bench/bench_goal.h"

#include <doctest/doctest.h>

using namespace syncbus::testing;

TEST_CASE("a benchmark goal is met only by a figure measured within it") {
  CHECK(Verdict(1.1, 1.2) == "met");
  CHECK(Verdict(1.3, 1.2) == "MISSED");
  CHECK(Verdict(2400, 2000, /*at_most=*/false) == "met");
  CHECK(Verdict(0, 2000, /*at_most=*/false) == "MISSED");
  // Nothing measured (every sync failed, an empty pass): no verdict, never "met".
  CHECK(Verdict(Percentile({}, 0.99), 1.2) == "no data");
  CHECK(Verdict(std::nullopt, 150) == "no data");
}

TEST_CASE("percentiles of samples, none of none") {
  CHECK_FALSE(Percentile({}, 0.5).has_value());
  CHECK(*Percentile({3, 1, 2}, 0.5) == 2);
  CHECK(*Percentile({3, 1, 2}, 0.99) == 3);
  CHECK(*Percentile({5}, 0.0) == 5);
}
