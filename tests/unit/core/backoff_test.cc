#include "common/backoff.h"

#include <doctest/doctest.h>

#include "tests/fakes/common/fake_clock.h"
#include "tests/fakes/common/fake_random.h"

using namespace syncbus;
using namespace std::chrono_literals;

TEST_CASE("backoff doubles from 800ms up to the cap and resets") {
  FakeRandom random(0.5);  // no jitter at the midpoint
  Backoff b({800ms, 30000ms, 2.0, 0.2}, random);
  CHECK(b.Next() == 800ms);
  CHECK(b.Next() == 1600ms);
  CHECK(b.Next() == 3200ms);
  for (int i = 0; i < 10; ++i) b.Next();
  CHECK(b.Next() == 30000ms);
  b.Reset();
  CHECK(b.Next() == 800ms);
}

TEST_CASE("backoff jitter stays within bounds and never exceeds the cap") {
  FakeRandom low(0.0), high(0.999999);
  Backoff a({1000ms, 30000ms, 2.0, 0.2}, low);
  Backoff b({1000ms, 30000ms, 2.0, 0.2}, high);
  CHECK(a.Next() == 800ms);
  CHECK(b.Next() >= 1199ms);
  for (int i = 0; i < 20; ++i) CHECK(b.Next() <= 30000ms);
}

TEST_CASE("fake clock moves only when advanced") {
  FakeClock clock;
  auto t0 = clock.Now();
  auto w0 = clock.WallNow();
  clock.Advance(1500ms);
  CHECK(clock.Now() - t0 == 1500ms);
  CHECK(clock.WallNow() - w0 == 1500ms);
}
