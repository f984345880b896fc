// Connection lifecycle on a real RabbitMQ 3.10: login, client properties, heartbeats, forced
// close by an operator and recovery through the Reconnector.
#include <set>
#include <thread>

#include <doctest/doctest.h>

#include "common/amqp/reconnect.h"
#include "common/amqp/session_impl.h"
#include "common/bus/topology.h"
#include "common/clock.h"
#include "common/random.h"
#include "tests/support/session_helpers.h"
#include "tests/support/test_broker.h"

namespace syncbus::amqp {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using namespace syncbus::testing;

// The management API lists a new connection after its stats arrive (up to a few seconds).
Json ConnectionInfo(const TestVhost& vhost, const std::string& connection_name) {
  const auto deadline = std::chrono::steady_clock::now() + seconds(15);
  for (;;) {
    auto list =
        vhost.api().Get("/api/vhosts/" + ManagementApi::Escape(vhost.name()) + "/connections");
    REQUIRE(list.ok());
    for (const auto& c : *list) {
      if (c["client_properties"].value("connection_name", "") == connection_name) return c;
    }
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                    connection_name << " never appeared in the management API");
    std::this_thread::sleep_for(milliseconds(200));
  }
}

TEST_CASE("login advertises the connection name and capabilities, heartbeat is negotiated") {
  TestVhost vhost = NewTestVhost();
  ConnectionOptions options = vhost.Options("syncbus-consumer-7");
  options.heartbeat_seconds = 5;
  RabbitmqSession session(options);
  REQUIRE(session.Connect().ok());
  Json info = ConnectionInfo(vhost, "syncbus-consumer-7");
  CHECK(info["timeout"] == 5);
  const Json& caps = info["client_properties"]["capabilities"];
  CHECK(caps["connection.blocked"] == true);
  CHECK(caps["consumer_cancel_notify"] == true);
  CHECK(caps["publisher_confirms"] == true);
  CHECK(caps["basic.nack"] == true);
  CHECK(info["client_properties"]["product"] == "syncbus");
}

TEST_CASE("bad credentials, unknown vhosts and closed ports fail with clear statuses") {
  TestVhost vhost = NewTestVhost();
  ConnectionOptions wrong_password = vhost.Options("bad-login");
  wrong_password.password = "not-the-password";
  RabbitmqSession a(wrong_password);
  Status s = a.Connect();
  CHECK(s.code() == Code::kUnauthorized);
  CHECK(s.message().find("ACCESS_REFUSED") != std::string::npos);
  CHECK(!a.connected());

  ConnectionOptions no_vhost = vhost.Options("bad-vhost");
  no_vhost.vhost = vhost.name() + "-missing";
  RabbitmqSession b(no_vhost);
  s = b.Connect();
  CHECK(s.code() == Code::kUnauthorized);
  CHECK(s.message().find(no_vhost.vhost) != std::string::npos);

  ConnectionOptions closed_port = vhost.Options("bad-port");
  closed_port.port = 1;
  closed_port.connect_timeout = milliseconds(2000);
  RabbitmqSession c(closed_port);
  s = c.Connect();
  CHECK(s.code() == Code::kUnavailable);
  CHECK(s.message().find("127.0.0.1:1") != std::string::npos);
}

TEST_CASE(
    "with several broker addresses a dead node is skipped and every connect finds the live one") {
  TestVhost vhost = NewTestVhost();
  ConnectionOptions options = vhost.Options("addresses");
  // Port 1 on loopback refuses at once: a node that is down.
  options.addresses = {{"127.0.0.1", 1}, {options.host, options.port}, {"127.0.0.1", 1}};
  options.connect_timeout = milliseconds(2000);
  RabbitmqSession session(options);
  for (int round = 0; round < 3; ++round) {
    Status connected = session.Connect();
    REQUIRE_MESSAGE(connected.ok(), connected.ToString());
    CHECK(session.Declare(SyncbusTopology()).ok());
    session.Close();
  }

  ConnectionOptions none = options;
  none.addresses = {{"127.0.0.1", 1}, {"127.0.0.1", 2}};
  RabbitmqSession nowhere(none);
  Status s = nowhere.Connect();
  CHECK(s.code() == Code::kUnavailable);
  CHECK(s.message().find("no AMQP broker of 2 reachable") != std::string::npos);
  CHECK(s.message().find("127.0.0.1:1") != std::string::npos);
  CHECK(s.message().find("127.0.0.1:2") != std::string::npos);

  // A refused login is reported as such even when other nodes were down.
  ConnectionOptions bad_login = options;
  bad_login.password = "not-the-password";
  RabbitmqSession refused(bad_login);
  s = refused.Connect();
  CHECK(s.code() == Code::kUnauthorized);
  CHECK(s.message().find("ACCESS_REFUSED") != std::string::npos);
}

TEST_CASE(
    "a connection closed by an operator fails Next, after reconnecting, unacked "
    "deliveries come back redelivered") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("dropped"));
  REQUIRE(session.Connect().ok());
  REQUIRE(session.Declare(SyncbusTopology()).ok());
  for (int i = 0; i < 3; ++i) {
    REQUIRE(session.Publish(Work("change", std::to_string(i)), kBrokerTimeout).ok());
  }
  REQUIRE(session.Consume(WorkQueueName(Lane::kChange), 5).ok());
  std::vector<Delivery> held;
  for (int i = 0; i < 3; ++i) held.push_back(NextOrFail(session));
  for (const auto& d : held) CHECK(!d.redelivered);

  auto closed = vhost.CloseConnections("dropped", seconds(15));
  REQUIRE_MESSAGE(closed.ok(), closed.status().ToString());
  CHECK(*closed == 1);
  auto next = session.Next(kBrokerTimeout);
  CHECK(next.status().code() == Code::kUnavailable);
  CHECK(next.status().message().find("CONNECTION_FORCED") != std::string::npos);
  CHECK(!session.connected());
  CHECK(session.Ack(held[0].delivery_tag).code() == Code::kUnavailable);

  REQUIRE(session.Connect().ok());
  // A tag from the old connection is refused without disturbing the new channel.
  CHECK(session.Ack(held[0].delivery_tag).code() == Code::kUnavailable);
  REQUIRE(session.Consume(WorkQueueName(Lane::kChange), 5).ok());
  std::set<std::string> bodies;
  for (int i = 0; i < 3; ++i) {
    Delivery d = NextOrFail(session);
    CHECK(d.redelivered);
    bodies.insert(d.message.body);
    REQUIRE(session.Ack(d.delivery_tag).ok());
  }
  CHECK(bodies == std::set<std::string>{"0", "1", "2"});
  CHECK(session.Publish(Work("change", "after"), kBrokerTimeout).ok());
}

TEST_CASE("heartbeats keep an idle but waiting connection alive, a silent one is dropped") {
  TestVhost vhost = NewTestVhost();
  ConnectionOptions options = vhost.Options("heartbeat");
  options.heartbeat_seconds = 1;
  RabbitmqSession session(options);
  REQUIRE(session.Connect().ok());
  REQUIRE(session.Declare(SyncbusTopology()).ok());
  REQUIRE(session.Consume(WorkQueueName(Lane::kChange), 1).ok());

  // Three heartbeat intervals with nothing to deliver, spent inside Next().
  auto idle = session.Next(milliseconds(3500));
  REQUIRE_MESSAGE(idle.ok(), idle.status().ToString());
  CHECK(!idle->has_value());
  CHECK(session.connected());
  REQUIRE(session.Publish(Work("change", "still here"), kBrokerTimeout).ok());
  CHECK(NextOrFail(session).message.body == "still here");

  // Poll() alone is enough while busy elsewhere.
  for (int i = 0; i < 7; ++i) {
    std::this_thread::sleep_for(milliseconds(500));
    REQUIRE(session.Poll().ok());
  }
  CHECK(session.Inspect(WorkQueueName(Lane::kChange)).ok());

  // Not calling in at all for several intervals: the broker gives up on us.
  std::this_thread::sleep_for(milliseconds(4500));
  Status late = session.Poll();
  if (late.ok()) late = session.Inspect(WorkQueueName(Lane::kChange)).status();
  CHECK(late.code() == Code::kUnavailable);
  CHECK(!session.connected());
}

TEST_CASE("the Reconnector restores a forced-closed session with topology and consumer") {
  TestVhost vhost = NewTestVhost();
  RabbitmqSession session(vhost.Options("reconnector"));
  Reconnector::Options options;
  options.backoff.initial = milliseconds(100);
  int setups = 0;
  Reconnector reconnector(
      session, options, RealClock(), RealRandom(),
      [](Duration d) {
        std::this_thread::sleep_for(d);
        return true;
      },
      [&](Session& s) {
        ++setups;
        SYNCBUS_RETURN_IF_ERROR(DeclareTopology(s, SyncbusTopology()));
        return s.Consume(WorkQueueName(Lane::kChange), 2).status();
      });
  REQUIRE(reconnector.EnsureConnected().ok());
  REQUIRE(session.Publish(Work("change", "one"), kBrokerTimeout).ok());
  CHECK(NextOrFail(session).message.body == "one");

  REQUIRE(vhost.CloseConnections("reconnector", seconds(15)).ok());
  CHECK(!session.Next(kBrokerTimeout).ok());
  REQUIRE(reconnector.EnsureConnected().ok());
  CHECK(setups == 2);
  Delivery again = NextOrFail(session);
  CHECK(again.message.body == "one");
  CHECK(again.redelivered);
}

}  // namespace
}  // namespace syncbus::amqp
