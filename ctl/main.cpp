// syncbusctl: operators' command line for syncbus (also installed as kubectl-syncbus, the kubectl
// plugin `kubectl syncbus`).
#include "ctl/cli.h"

int main(int argc, char** argv) {
  return syncbus::ctl::RunCommandLine(argc, argv);
}
