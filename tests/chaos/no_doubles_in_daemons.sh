#!/usr/bin/env bash
# Checks that no test double or test hook is compiled into a daemon: none of the binaries below
# has a symbol of tests/fakes (namespace syncbus::testing, the fake broker, clock or random) or
# the planted crash's log line. The chaos run's consumer, which does carry them, is the control:
# if it showed neither, the check could not see what it looks for.
# usage: no_doubles_in_daemons.sh BUILD_DIR
set -euo pipefail
build=$1
doubles='syncbus::testing::|syncbus::amqp::Fake|FakeClock|FakeRandom|InProcessTransport'
crash_line='crashing on purpose'
carries() {   # carries BINARY: prints what of the doubles it carries
  local symbols
  symbols=$(nm -C "$1") || { echo "FAIL: nm could not read $1" >&2; return 1; }
  grep -E -o "$doubles" <<<"$symbols" | sort -u | tr '\n' ' ' || true
  if grep -a -q "$crash_line" "$1"; then printf '%s' "the planted crash's log line"; fi
}
status=0
# A binary that is not there carries nothing, and shows nothing either: that is a failure.
for binary in publisher/syncbus-publisher consumer/syncbus-consumer ctl/syncbusctl tests/chaos/syncbus-consumer-chaos; do
  if [[ ! -f $build/$binary ]]; then
    echo "FAIL: $build/$binary is missing: nothing was checked"
    exit 1
  fi
done
for daemon in publisher/syncbus-publisher consumer/syncbus-consumer ctl/syncbusctl; do
  if ! found=$(carries "$build/$daemon"); then
    status=1
  elif [[ -n $found ]]; then
    echo "FAIL: $daemon carries test code: $found"
    status=1
  else
    echo "ok: $daemon carries no test double or hook"
  fi
done
control=$(carries "$build/tests/chaos/syncbus-consumer-chaos") || status=1
if [[ $control != *syncbus::testing::* || $control != *"planted crash"* ]]; then
  echo "FAIL: the control, tests/chaos/syncbus-consumer-chaos, shows neither (found: '$control'): the check sees nothing"
  status=1
fi
exit $status
