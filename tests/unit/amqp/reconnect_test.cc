#include "common/amqp/reconnect.h"

#include <doctest/doctest.h>

#include "common/bus/topology.h"
#include "tests/fakes/common/amqp/fake_session.h"
#include "tests/fakes/common/fake_clock.h"
#include "tests/fakes/common/fake_random.h"

namespace syncbus::amqp {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// FakeRandom(0.5) makes the jitter factor exactly 1: delays are 800, 1600, 3200 ms, ...
struct ReconnectFixture {
  FakeClock clock;
  FakeRandom random{0.5};
  FakeBroker broker{clock};
  FakeSession session{broker, "reconnect"};
  std::vector<milliseconds> waits;
  std::function<bool(int)> on_wait = [](int) { return true; };
  int setups = 0;
  Status setup_result;

  Reconnector Make(int max_attempts = 0) {
    Reconnector::Options options;
    options.max_attempts = max_attempts;
    return Reconnector(
        session, options, clock, random,
        [this](Duration d) {
          waits.push_back(std::chrono::duration_cast<milliseconds>(d));
          clock.Advance(d);
          return on_wait(static_cast<int>(waits.size()));
        },
        [this](Session& s) {
          ++setups;
          if (!setup_result.ok()) return setup_result;
          SYNCBUS_RETURN_IF_ERROR(DeclareTopology(s, SyncbusTopology()));
          return s.Consume(WorkQueueName(Lane::kChange), 4).status();
        });
  }
};

TEST_CASE("connects, declares the topology and runs the setup without waiting") {
  ReconnectFixture f;
  Reconnector r = f.Make();
  REQUIRE(r.EnsureConnected().ok());
  CHECK(f.session.connected());
  CHECK(f.broker.HasQueue(kDeadQueue));
  CHECK(f.setups == 1);
  CHECK(f.waits.empty());
  CHECK(f.session.Inspect(WorkQueueName(Lane::kChange))->consumers == 1);
  // Already connected: nothing happens.
  REQUIRE(r.EnsureConnected().ok());
  CHECK(f.setups == 1);
}

TEST_CASE("a down broker is retried with growing delays until it is back") {
  ReconnectFixture f;
  f.broker.SetAvailable(false);
  f.on_wait = [&](int n) {
    if (n == 3) f.broker.SetAvailable(true);
    return true;
  };
  Reconnector r = f.Make();
  REQUIRE(r.EnsureConnected().ok());
  CHECK(f.waits ==
        std::vector<milliseconds>{milliseconds(800), milliseconds(1600), milliseconds(3200)});
  CHECK(r.failures() == 0);
  CHECK(f.session.connected());
}

TEST_CASE("the wait function can cancel, max_attempts gives up with the last error") {
  ReconnectFixture f;
  f.broker.SetAvailable(false);
  f.on_wait = [](int n) { return n < 2; };
  Reconnector cancelled = f.Make();
  Status s = cancelled.EnsureConnected();
  CHECK(s.code() == Code::kCancelled);
  CHECK(s.message().find("connection refused") != std::string::npos);
  CHECK(cancelled.failures() == 2);

  ReconnectFixture g;
  g.broker.SetAvailable(false);
  Reconnector limited = g.Make(3);
  s = limited.EnsureConnected();
  CHECK(s.code() == Code::kUnavailable);
  CHECK(g.waits.size() == 2);
  CHECK(limited.failures() == 3);
}

TEST_CASE("a short-lived connection backs off, a healthy one resets the backoff") {
  ReconnectFixture f;
  Reconnector r = f.Make();
  REQUIRE(r.EnsureConnected().ok());

  f.broker.DropConnections();  // at once: flapping
  REQUIRE(r.EnsureConnected().ok());
  CHECK(f.waits == std::vector<milliseconds>{milliseconds(800)});
  f.broker.DropConnections();
  REQUIRE(r.EnsureConnected().ok());
  CHECK(f.waits.back() == milliseconds(1600));

  f.clock.Advance(seconds(31));  // stayed up: healthy
  f.broker.DropConnections();
  REQUIRE(r.EnsureConnected().ok());
  CHECK(f.waits.size() == 2);
  CHECK(f.setups == 4);
}

TEST_CASE("a failing setup counts as a failed attempt and closes the session") {
  ReconnectFixture f;
  f.setup_result = Status(Code::kNotFound, "no queue");
  f.on_wait = [&](int n) {
    if (n == 2) f.setup_result = Status::Ok();
    return true;
  };
  Reconnector r = f.Make();
  REQUIRE(r.EnsureConnected().ok());
  CHECK(f.setups == 3);
  CHECK(f.waits.size() == 2);
  CHECK(f.broker.LiveConnections() == 1);
}

}  // namespace
}  // namespace syncbus::amqp
