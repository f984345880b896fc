#include "publisher/publish_rate.h"

#include <doctest/doctest.h>

#include "tests/fakes/common/fake_clock.h"

using namespace syncbus;
using namespace syncbus::publisher;
using namespace std::chrono_literals;

// Its own namespace: the unit tests of an area compile as one unity batch.
namespace publish_rate_test {

TEST_CASE("publish rate: a burst of one second's worth, then tokens as time passes") {
  FakeClock clock;
  PublishRate rate(10, clock);
  int taken = 0;
  while (rate.TakeToken()) ++taken;
  CHECK(taken == 10);
  clock.Advance(500ms);
  taken = 0;
  while (rate.TakeToken()) ++taken;
  CHECK(taken == 5);
  clock.Advance(1h);  // the bucket holds one second's worth, however long it rested
  taken = 0;
  while (rate.TakeToken()) ++taken;
  CHECK(taken == 10);
}

TEST_CASE("publish rate: refusals hold publishing off 250 ms doubling to 2 s") {
  FakeClock clock;
  PublishRate rate(10, clock);
  CHECK_FALSE(rate.HoldingOff(clock.Now()));
  std::vector<std::chrono::milliseconds> hold_offs;
  for (int i = 0; i < 5; ++i) hold_offs.push_back(rate.Refused(clock.Now()));
  CHECK(hold_offs == std::vector<std::chrono::milliseconds>{250ms, 500ms, 1000ms, 2000ms, 2000ms});
  CHECK(rate.HoldingOff(clock.Now() + 1999ms));
  CHECK_FALSE(rate.HoldingOff(clock.Now() + 2000ms));
}

TEST_CASE("publish rate: accepted publishes restart the hold-offs, the running one runs out") {
  FakeClock clock;
  PublishRate rate(10, clock);
  rate.Refused(clock.Now());
  rate.Refused(clock.Now());  // 500 ms
  rate.Accepted();
  CHECK(rate.HoldingOff(clock.Now() + 499ms));
  CHECK(rate.Refused(clock.Now()) == 250ms);
  // A new connection instead of the refusing channel: no hold-off at all.
  rate.Cleared();
  CHECK_FALSE(rate.HoldingOff(clock.Now()));
  CHECK(rate.Refused(clock.Now()) == 250ms);
}

}  // namespace publish_rate_test
