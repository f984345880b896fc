// AMQPS against a real RabbitMQ node (3.10, and 4.0 in the copies named "[rabbitmq 4.0]") that
// listens with TLS only and requires client certificates (the `broker-tls` and `broker-tls-4.0`
// fixtures: scripts/tls-certs, scripts/rabbitmq-node --tls-dir).
// With the right CA and a client certificate a session connects and works; a wrong CA, a
// missing client certificate and an IP address the certificate does not name are refused, each
// with an error that says what to fix.
#include <doctest/doctest.h>

#include "common/amqp/session_impl.h"
#include "common/bus/topology.h"
#include "tests/support/test_broker.h"

using namespace syncbus;
using namespace syncbus::testing;
using namespace std::chrono_literals;

namespace {

struct TlsBroker {
  BrokerEnv env;
  std::string certs;

  // The node of this test's fixture (broker-tls, or broker-tls-4.0 for the RabbitMQ 4.0 copy):
  // $SYNCBUS_TEST_BROKER_ENV, whose SYNCBUS_TLS_DIR holds its CA and the client certificates.
  TlsBroker() {
    auto loaded = LoadBrokerEnv();
    REQUIRE_MESSAGE(loaded.ok(), loaded.status().ToString());
    env = *loaded;
    REQUIRE_MESSAGE(!env.tls_dir.empty(),
                    "the broker of $SYNCBUS_TEST_BROKER_ENV has no TLS directory");
    certs = env.tls_dir;
  }

  amqp::ConnectionOptions Options(const std::string& name) const {
    amqp::ConnectionOptions o;
    o.host = env.host;  // localhost: the name in the server certificate
    o.port = env.amqp_port;
    o.user = env.user;
    o.password = env.password;
    o.connection_name = name;
    o.connect_timeout = 5s;
    o.tls = true;
    o.tls_ca_file = certs + "/ca.pem";
    o.tls_cert_file = certs + "/client.pem";
    o.tls_key_file = certs + "/client-key.pem";
    return o;
  }
};

}  // namespace

TEST_CASE("AMQPS with peer verification and a client certificate connects and publishes") {
  TlsBroker broker;
  CHECK(broker.env.host == "localhost");
  amqp::RabbitmqSession session(broker.Options("tls-ok"));
  Status connected = session.Connect();
  REQUIRE_MESSAGE(connected.ok(), connected.ToString());
  REQUIRE(session.Declare(amqp::SyncbusTopology()).ok());
  amqp::Publication p{amqp::kTraceExchange, "", {}};
  p.message.body = "{}";
  CHECK(session.Publish(p, 10s).ok());
}

TEST_CASE("a broker certificate from another CA is refused and the error names the CA file") {
  TlsBroker broker;
  amqp::ConnectionOptions o = broker.Options("tls-wrong-ca");
  o.tls_ca_file = broker.certs + "/other-ca.pem";
  amqp::RabbitmqSession session(o);
  Status s = session.Connect();
  CHECK(s.code() == Code::kUnauthorized);
  CHECK_MESSAGE(
      s.message().find("SSL peer cert verification failed (the broker's certificate is not "
                       "signed by the CA in amqp.tls.caFile (" +
                       o.tls_ca_file + "))") != std::string::npos,
      s.message());
  CHECK_FALSE(session.connected());
}

TEST_CASE("an IP address the certificate does not name is refused, with how to connect instead") {
  TlsBroker broker;
  amqp::ConnectionOptions o = broker.Options("tls-ip");
  o.host = "127.0.0.1";
  amqp::RabbitmqSession session(o);
  Status s = session.Connect();
  CHECK(s.code() == Code::kUnauthorized);
  CHECK_MESSAGE(s.message().find("does not name \"127.0.0.1\" (only DNS names are matched") !=
                    std::string::npos,
                s.message());
}

TEST_CASE("without a client certificate the broker refuses, and the error asks for one") {
  TlsBroker broker;
  amqp::ConnectionOptions o = broker.Options("tls-no-cert");
  o.tls_cert_file.clear();
  o.tls_key_file.clear();
  amqp::RabbitmqSession session(o);
  Status s = session.Connect();
  CHECK_FALSE(s.ok());
  CHECK_MESSAGE(s.message().find("require a client certificate (amqp.tls.certFile, keyFile)") !=
                    std::string::npos,
                s.message());
}

TEST_CASE("several addresses over TLS: a dead node is skipped, every node is verified") {
  TlsBroker broker;
  amqp::ConnectionOptions o = broker.Options("tls-addresses");
  o.addresses = {{"localhost", 1}, {"localhost", broker.env.amqp_port}};
  amqp::RabbitmqSession session(o);
  for (int round = 0; round < 2; ++round) {
    Status connected = session.Connect();
    REQUIRE_MESSAGE(connected.ok(), connected.ToString());
    session.Close();
  }
  o.tls_ca_file = broker.certs + "/other-ca.pem";
  amqp::RabbitmqSession refused(o);
  Status s = refused.Connect();
  CHECK(s.code() == Code::kUnauthorized);  // the telling failure, not the dead node's
  CHECK(s.message().find("not signed by the CA") != std::string::npos);
}
