// ConsumerMain: the whole syncbus-consumer process (command line, configuration, hub and broker
// connections, admin server, ConsumerApp until a stop signal) as one function, so that
// consumer/main.cpp stays one line and a whole-system test build (tests/chaos) runs the very
// same process with its syncs' hub reads decorated. Call once, from main's thread.
#pragma once

#include "consumer/consumer_app.h"

namespace syncbus::consumer {

// Returns the process's exit code. `decorate_reader`: see ConsumerDeps (empty in production).
int ConsumerMain(int argc, char** argv, ReaderDecorator decorate_reader = {});

}  // namespace syncbus::consumer
