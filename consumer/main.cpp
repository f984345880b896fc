// syncbus-consumer: takes sync requests, applies SyncSets to target clusters, writes ClusterSync.
#include "consumer/consumer_main.h"

int main(int argc, char** argv) {
  return syncbus::consumer::ConsumerMain(argc, argv);
}
