// Topology: the broker objects syncbus needs, defined once in code. The daemons declare its
// exchanges, queues and bindings at start (AMQP cannot set policies: rabbitmq/definitions.json and
// deploy/rabbitmq-topology.yaml carry those, and a test keeps them equal to the code).
// Value types; thread-compatible.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/json.h"

namespace syncbus::amqp {

struct ExchangeSpec {
  std::string name;
  std::string type;  // direct, fanout, headers, topic
  bool durable = true;
  Json arguments = Json::object();
};

struct QueueSpec {
  std::string name;
  bool durable = true;
  Json arguments = Json::object();  // x-queue-type, x-message-ttl, x-dead-letter-exchange, ...
};

struct BindingSpec {
  std::string source;       // exchange
  std::string destination;  // queue
  std::string routing_key;
  Json arguments = Json::object();
};

// A RabbitMQ policy: settings that can change on a live queue (a queue's x-arguments cannot).
struct PolicySpec {
  std::string name;
  std::string pattern;  // regular expression over queue names
  std::string apply_to = "queues";
  int priority = 0;
  Json definition = Json::object();  // delivery-limit, max-length, max-age, ...
};

struct Topology {
  std::vector<ExchangeSpec> exchanges;
  std::vector<QueueSpec> queues;
  std::vector<BindingSpec> bindings;
  std::vector<PolicySpec> policies;
};

}  // namespace syncbus::amqp
