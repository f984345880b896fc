// Topology: the broker objects syncbus needs, defined once in code. The daemons declare it at
// start; rabbitmq/definitions.json is the same topology as data (a test keeps them equal).
// Value types; thread-compatible.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/json.h"

namespace syncbus::amqp {

struct ExchangeSpec {
  std::string name;
  std::string type;               // direct, fanout, headers, topic
  bool durable = true;
  Json arguments = Json::object();
};

struct QueueSpec {
  std::string name;
  bool durable = true;
  Json arguments = Json::object();  // x-queue-type, x-message-ttl, x-dead-letter-exchange, ...
};

struct BindingSpec {
  std::string source;             // exchange
  std::string destination;        // queue
  std::string routing_key;
  Json arguments = Json::object();
};

struct Topology {
  std::vector<ExchangeSpec> exchanges;
  std::vector<QueueSpec> queues;
  std::vector<BindingSpec> bindings;
};

}  // namespace syncbus::amqp
