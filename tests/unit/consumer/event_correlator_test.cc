#include "consumer/event_correlator.h"

#include <doctest/doctest.h>

#include "common/time_format.h"
#include "tests/fakes/common/fake_clock.h"

using namespace syncbus;
using namespace syncbus::consumer;
using namespace std::chrono_literals;

namespace {

EventRecord Failure(const std::string& message, const std::string& cluster = "c1") {
  EventRecord e;
  e.object = {"hiveinternal.openshift.io/v1alpha1", "ClusterSync", cluster, cluster,
              "uid-" + cluster};
  e.type = "Warning";
  e.reason = "SyncFailed";
  e.message = message;
  e.source_component = "syncbus-consumer";
  e.source_host = "consumer-1";
  return e;
}

// What the API server would answer: the Event as written, with a resourceVersion.
EventRecord Stored(const Correlated& c, int rv) {
  Json stored = c.event.ToJson();
  stored["metadata"]["resourceVersion"] = std::to_string(rv);
  return EventRecord::FromStored(stored, c.event);
}

}  // namespace

TEST_CASE("a repeated Event is patched with its count, not created again") {
  FakeClock clock;
  EventCorrelator correlator(clock);
  Correlated first = correlator.Correlate(Failure("boom"));
  CHECK_FALSE(first.skip);
  CHECK_FALSE(first.update);
  CHECK(first.event.count == 1);
  CHECK(first.event.name.rfind("c1.", 0) == 0);
  correlator.UpdateState(Stored(first, 10));

  clock.Advance(30s);
  Correlated second = correlator.Correlate(Failure("boom"));
  CHECK(second.update);
  CHECK(second.event.count == 2);
  CHECK(second.event.name == first.event.name);
  CHECK(second.event.resource_version == "10");
  CHECK(second.event.first_timestamp == first.event.first_timestamp);
  CHECK(second.event.last_timestamp == first.event.last_timestamp + 30s);
  Json patch = second.event.Patch();
  CHECK(patch == Json{{"count", 2},
                      {"lastTimestamp", FormatRfc3339(second.event.last_timestamp)},
                      {"message", "boom"}});

  // Another message is another Event; another cluster too.
  CHECK_FALSE(correlator.Correlate(Failure("other")).update);
  CHECK_FALSE(correlator.Correlate(Failure("boom", "c2")).update);
}

TEST_CASE("the Event is a core/v1 Event about the object, in its namespace") {
  FakeClock clock;
  EventCorrelator correlator(clock);
  Json e = correlator.Correlate(Failure("boom")).event.ToJson();
  CHECK(e["apiVersion"] == "v1");
  CHECK(e["kind"] == "Event");
  CHECK(e["metadata"]["namespace"] == "c1");
  CHECK(e["involvedObject"] == Json{{"apiVersion", "hiveinternal.openshift.io/v1alpha1"},
                                    {"kind", "ClusterSync"},
                                    {"namespace", "c1"},
                                    {"name", "c1"},
                                    {"uid", "uid-c1"}});
  CHECK(e["type"] == "Warning");
  CHECK(e["reason"] == "SyncFailed");
  CHECK(e["source"] == Json{{"component", "syncbus-consumer"}, {"host", "consumer-1"}});
  CHECK(e["count"] == 1);
  CHECK(e["firstTimestamp"] == e["lastTimestamp"]);
  // A long object name is cut so that the Event's name stays a valid object name.
  EventRecord long_name = Failure("x", std::string(250, 'n'));
  CHECK(correlator.Correlate(long_name).event.name.size() <= 253);
}

TEST_CASE("ten different messages of one reason within ten minutes are combined into one Event") {
  FakeClock clock;
  EventCorrelator correlator(clock);
  for (int i = 0; i < 9; ++i) {
    Correlated c = correlator.Correlate(Failure("attempt " + std::to_string(i)));
    CHECK_FALSE(c.update);
    CHECK(c.event.message == "attempt " + std::to_string(i));
    correlator.UpdateState(Stored(c, 100 + i));
    clock.Advance(10s);
  }
  Correlated tenth = correlator.Correlate(Failure("attempt 9"));
  CHECK(tenth.event.message == "(combined from similar events): attempt 9");
  CHECK_FALSE(tenth.update);
  CHECK(tenth.event.count == 1);
  correlator.UpdateState(Stored(tenth, 200));
  // Later ones, whatever their message, count on the combined Event.
  Correlated eleventh = correlator.Correlate(Failure("attempt 10"));
  CHECK(eleventh.update);
  CHECK(eleventh.event.name == tenth.event.name);
  CHECK(eleventh.event.count == 2);
  CHECK(eleventh.event.message == "(combined from similar events): attempt 10");

  // Another reason of the same object is aggregated on its own.
  EventRecord parked = Failure("parked");
  parked.reason = "SyncParked";
  CHECK(correlator.Correlate(parked).event.message == "parked");

  // Once the reason has been quiet for more than ten minutes, messages stand alone again.
  clock.Advance(11min);
  CHECK(correlator.Correlate(Failure("attempt 11")).event.message == "attempt 11");
}

TEST_CASE(
    "an object gets 25 Events at once, then one every five minutes, and the held back are "
    "counted") {
  FakeClock clock;
  EventCorrelator correlator(clock);
  Correlated last;
  for (int i = 0; i < 25; ++i) {
    last = correlator.Correlate(Failure("boom"));
    REQUIRE_FALSE(last.skip);
    correlator.UpdateState(Stored(last, i + 1));
  }
  CHECK(last.event.count == 25);
  CHECK(correlator.Correlate(Failure("boom")).skip);  // counted as the 26th, not written
  CHECK(correlator.Correlate(Failure("boom")).skip);
  // Another object has its own budget.
  CHECK_FALSE(correlator.Correlate(Failure("boom", "c2")).skip);

  clock.Advance(5min);
  Correlated refilled = correlator.Correlate(Failure("boom"));
  CHECK_FALSE(refilled.skip);
  CHECK(refilled.update);
  CHECK(refilled.event.count == 28);  // the two held back are in the count
  CHECK(correlator.Correlate(Failure("boom")).skip);
}
