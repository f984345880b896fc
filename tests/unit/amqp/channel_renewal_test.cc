#include "common/amqp/channel_renewal.h"

#include <vector>

#include <doctest/doctest.h>

using namespace syncbus;
using namespace std::chrono_literals;

TEST_CASE(
    "a channel is renewed after 3 s of refusals, then 6 s, 12 s... up to a minute, until one is "
    "accepted") {
  amqp::ChannelRenewal renewal;
  const SteadyTime t0{};
  CHECK_FALSE(renewal.Due(t0, t0 + 2999ms));
  CHECK(renewal.Due(t0, t0 + 3s));
  std::vector<std::chrono::milliseconds> waits;
  for (int i = 0; i < 7; ++i) {
    renewal.Renewed();
    waits.push_back(renewal.wait());
  }
  CHECK(waits == std::vector<std::chrono::milliseconds>{6s, 12s, 24s, 48s, 60s, 60s, 60s});
  CHECK_FALSE(renewal.Due(t0, t0 + 59s));
  renewal.Accepted();
  CHECK(renewal.Due(t0, t0 + 3s));
}
