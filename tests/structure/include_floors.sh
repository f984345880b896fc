#!/usr/bin/env bash
# The include floors of the product code, checked on the sources:
#   common/ (platform: amqp, http, kube, hive, status, log, ...)  includes nothing above it;
#   common/bus/ (what the programs agree on)                       includes only common/;
#   publisher/, consumer/                                           include common/, never each other;
#   ctl/                                                            includes common/, never a daemon's folder.
# Prints every include that breaks a floor, with its file and line; exit 1 if any.
# usage: include_floors.sh SOURCE_DIR
set -euo pipefail
cd "$1"
status=0
# check FILES_GLOB_DIR FORBIDDEN_REGEX WHY [EXCLUDE_DIR]
check() {
  local dir=$1 forbidden=$2 why=$3 exclude=${4:-}
  local hits
  hits=$({ grep -rn --include='*.h' --include='*.cc' --include='*.cpp' -E "^#include \"($forbidden)/" "$dir" || true; } |
         { if [[ -n $exclude ]]; then grep -v "^$exclude/" || true; else cat; fi; })
  if [[ -n $hits ]]; then
    echo "FAIL: $why:"
    while IFS= read -r line; do echo "  $line"; done <<< "$hits"
    status=1
  else
    echo "ok: $why"
  fi
}
check common 'common/bus|publisher|consumer|ctl|tests' "common/ (platform) includes no floor above it" common/bus
check common/bus 'publisher|consumer|ctl|tests' "common/bus includes only common/"
check publisher 'consumer|ctl|tests' "publisher/ includes neither consumer/ nor ctl/"
check consumer 'publisher|ctl|tests' "consumer/ includes neither publisher/ nor ctl/"
check ctl 'publisher|consumer|tests' "ctl/ includes no daemon's folder"
exit $status
