// syncbus-kubesim as a process, against clients that vanish in the middle of a response: a
// consumer SIGKILLed while its watch is open leaves the simulator writing to a closed
// connection, which must cost that connection only. A chaos run once lost the whole simulator to
// SIGPIPE (a write to a socket the peer had reset), as any server process that does not ignore it.
#include <doctest/doctest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/kube/resource.h"
#include "common/unique_fd.h"
#include "tests/support/process_rig.h"

using namespace syncbus;
using namespace syncbus::testing;
using namespace std::chrono_literals;

namespace {

// Opens a watch of namespaces over a raw socket, reads the response head and closes, as a
// killed process's kernel does: the server's next write is answered with a reset, the one after
// fails with EPIPE.
void OpenAndDropWatch(int port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM, 0));
  REQUIRE(fd.get() >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const std::string request =
      "GET /api/v1/namespaces?watch=1&allowWatchBookmarks=true HTTP/1.1\r\nHost: sim\r\n\r\n";
  REQUIRE(send(fd.get(), request.data(), request.size(), 0) ==
          static_cast<ssize_t>(request.size()));
  char head[512];
  REQUIRE(recv(fd.get(), head, sizeof head, 0) > 0);
}

}  // namespace

TEST_CASE("syncbus-kubesim survives watchers that vanish") {
  ProcessRig rig("syncbus-kubesim-vanish");
  rig.StartSimulator({"--clusters", "2"});
  for (int round = 0; round < 3; ++round) OpenAndDropWatch(rig.sim_port);
  // Events for the dead watches, one at a time: the server writes into closed connections.
  for (int i = 0; i < 20; ++i) {
    Json ns = {{"apiVersion", "v1"},
               {"kind", "Namespace"},
               {"metadata", {{"name", "vanish-" + std::to_string(i)}}}};
    auto created = rig.hub->Create(kube::Collection(kube::resources::kNamespaces), ns);
    REQUIRE_MESSAGE(created.ok(), created.status().ToString());
  }
  auto listed = rig.hub->List(kube::Collection(kube::resources::kNamespaces), {});
  CHECK_MESSAGE(listed.ok(), listed.status().ToString());
  CHECK_MESSAGE(rig.sim->running(), rig.sim->Log());
  // The write that fails with EPIPE raises SIGPIPE in the writing process: it must not kill it.
  REQUIRE(kill(rig.sim->pid(), SIGPIPE) == 0);
  listed = rig.hub->List(kube::Collection(kube::resources::kNamespaces), {});
  CHECK_MESSAGE(listed.ok(), listed.status().ToString());
  CHECK_MESSAGE(rig.sim->running(), rig.sim->Log());
}
