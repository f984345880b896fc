// main() of every doctest binary: doctest's own, made strict. A run that names its tests
// (--test-case=..., as ctest runs each discovered test) fails when no test case matched, so a
// test whose name ctest mangled can never pass by running nothing. SIGPIPE is ignored.
#define DOCTEST_CONFIG_IMPLEMENT
#include <csignal>
#include <cstdio>
#include <string_view>

#include <doctest/doctest.h>

namespace {

unsigned g_matched = 0;  // test cases that passed the filters in the last run

// Records how many test cases the filters selected; reports nothing else.
struct MatchCounter : doctest::IReporter {
  explicit MatchCounter(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    g_matched = stats.numTestCasesPassingFilters;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("syncbus-match-counter", 1, MatchCounter);

bool NamesTests(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg(argv[i]);
    for (std::string_view flag : {"--test-case=", "-tc=", "--dt-test-case=", "--dt-tc="}) {
      if (arg.substr(0, flag.size()) == flag) return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  // Tests run HTTP servers in process: as the binaries do, a write to a connection its peer reset
  // must fail that connection, not end the test run with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  doctest::Context context(argc, argv);
  int failed = context.run();
  if (context.shouldExit()) return failed;  // --list-test-cases, --help, ...
  if (failed == 0 && g_matched == 0 && NamesTests(argc, argv)) {
    std::fprintf(
        stderr,
        "no test case matched the --test-case filter (a ';' in a test name? ctest splits on it)\n");
    return 1;
  }
  return failed;
}
