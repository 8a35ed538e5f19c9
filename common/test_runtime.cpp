#if COURSE_CATCH2_V3
#include <catch2/catch_session.hpp>
#include <catch2/catch_test_case_info.hpp>
#include <catch2/reporters/catch_reporter_event_listener.hpp>
#include <catch2/reporters/catch_reporter_registrars.hpp>
#else
#define CATCH_CONFIG_RUNNER  // this translation unit holds Catch2 v2's implementation, once
#include <catch2/catch.hpp>
#endif

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "test_runtime.h"

namespace course {
namespace {

// What the listener saw. Plain atomics because the watchdog thread reads the current test case
// while the main thread runs it.
struct RunRecord {
  std::atomic<long> test_cases_started{0};
  std::atomic<long> failed_assertions{0};
  std::atomic<long> failed_cases{0};
  // steady_clock nanoseconds at which the running test case started; 0 between test cases.
  std::atomic<long long> case_started_ns{0};
  // Name of the running test case, written before case_started_ns is set, read only after.
  char case_name[256] = {0};
};
RunRecord g_run;

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Counts test cases and failed assertions. Catch2's exit code cannot tell a failed assertion
// from a bad flag or an empty filter; these counters can.
#if COURSE_CATCH2_V3
class VerdictListener : public Catch::EventListenerBase {
 public:
  using Catch::EventListenerBase::EventListenerBase;
  static std::string getDescription() { return "counts failed assertions for the course verdict"; }
  void testCaseStarting(Catch::TestCaseInfo const& info) override { on_case_start(info.name); }
  void testCaseEnded(Catch::TestCaseStats const& stats) override { on_case_end(stats); }
  void assertionEnded(Catch::AssertionStats const& stats) override {
    if (!stats.assertionResult.isOk()) ++g_run.failed_assertions;
  }
#else
class VerdictListener : public Catch::TestEventListenerBase {
 public:
  using Catch::TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(Catch::TestCaseInfo const& info) override { on_case_start(info.name); }
  void testCaseEnded(Catch::TestCaseStats const& stats) override { on_case_end(stats); }
  bool assertionEnded(Catch::AssertionStats const& stats) override {
    if (!stats.assertionResult.isOk()) ++g_run.failed_assertions;
    return true;
  }
#endif

 private:
  static void on_case_end(Catch::TestCaseStats const& stats) {
    g_run.case_started_ns = 0;
    if (stats.totals.assertions.failed > 0) ++g_run.failed_cases;
  }
  static void on_case_start(const std::string& name) {
    g_run.case_started_ns = 0;  // the watchdog must not pair the old start with the new name
    std::snprintf(g_run.case_name, sizeof g_run.case_name, "%s", name.c_str());
    ++g_run.test_cases_started;
    g_run.case_started_ns = now_ns();
  }
};

CATCH_REGISTER_LISTENER(VerdictListener)

// Seconds a test case may run; 0 = no watchdog. Anything unparsable falls back to the default
// with a warning rather than silently disabling the protection.
int test_timeout_seconds() {
  const char* env = std::getenv("COURSE_TEST_TIMEOUT");
  if (!env || !*env) return 30;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end != '\0' || v < 0) {
    std::fprintf(stderr, "COURSE_TEST_TIMEOUT='%s' is not a number of seconds; using 30\n", env);
    return 30;
  }
  return static_cast<int>(v);
}

// Flushes what the tests printed so far without waiting for stdout's lock: the main thread may
// hold it, and the watchdog must never hang itself.
void flush_stdout_if_free() {
  if (ftrylockfile(stdout) == 0) {
    std::fflush(stdout);
    funlockfile(stdout);
  }
}

// The watchdog. When a test case runs past the limit, the main thread is almost always stuck
// in a CUDA call (a synchronize waiting on a kernel that never ends), so the only way out is to
// end the process from here: _exit skips destructors and atexit handlers, which would try to
// talk to the same stuck CUDA context.
class Watchdog {
 public:
  explicit Watchdog(int limit_s) : limit_s_(limit_s) {
    if (limit_s_ > 0) thread_ = std::thread([this] { loop(); });
  }
  ~Watchdog() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    const long long limit_ns = static_cast<long long>(limit_s_) * 1000000000LL;
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const long long started = g_run.case_started_ns;
      if (started == 0 || now_ns() - started < limit_ns) continue;
      flush_stdout_if_free();
      std::fprintf(stderr,
                   "\nHANG: test case \"%s\" has been running for more than %d s "
                   "(COURSE_TEST_TIMEOUT=%d).\n"
                   "A GPU test case normally takes well under a second. What usually causes this:\n"
                   "  - a loop whose bound never becomes false (a stride of 0, a counter that is "
                   "not advanced,\n    `i += blockDim.x` where blockDim.x is not what you think, "
                   "an unsigned index counting down)\n"
                   "  - a __syncthreads() inside a branch that not all threads of the block take "
                   "(the others\n    never arrive at the barrier)\n"
                   "  - a spin-wait on a flag that no other thread or block ever sets\n"
                   "The process was ended (exit 124); the GPU is released when it exits. If the "
                   "test is only slow on\n  your GPU, raise the limit: COURSE_TEST_TIMEOUT=120 "
                   "(seconds; 0 turns the watchdog off).\n",
                   g_run.case_name, limit_s_, limit_s_);
      std::fflush(stderr);
      _exit(124);
    }
  }

  int limit_s_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// True when the command line asked for something other than running tests (help, a listing):
// running zero test cases is then the expected outcome, not an error.
bool only_lists_or_helps(Catch::Session& session) {
  const auto& c = session.configData();
#if COURSE_CATCH2_V3
  return c.showHelp || c.listTests || c.listTags || c.listReporters || c.listListeners;
#else
  return c.showHelp || c.listTests || c.listTestNamesOnly || c.listTags || c.listReporters;
#endif
}

// "ex_02_matmul" -> "02_matmul"; "" when the binary is not an exercise's test.
std::string exercise_of(const char* argv0, bool* is_solution) {
  std::string name = argv0 ? argv0 : "";
  const size_t slash = name.find_last_of('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  *is_solution = name.rfind("sol_", 0) == 0;
  for (const char* prefix : {"ex_", "sol_", "wrong_"}) {
    if (name.rfind(prefix, 0) == 0) {
      name = name.substr(std::strlen(prefix));
      const size_t bug = name.find("__");
      return bug == std::string::npos ? name : name.substr(0, bug);
    }
  }
  return "";
}

}  // namespace

IndexRun run_index_checks(const char* argv0) {
  IndexRun out;
  std::string tag = kIndexTag;
  char* args[] = {const_cast<char*>(argv0 ? argv0 : "test"), &tag[0]};
  Catch::Session session;
  if (session.applyCommandLine(2, args) != 0) return out;
  session.run();
  out.cases = g_run.test_cases_started;
  out.failed_cases = g_run.failed_cases;
  return out;
}

int index_verdict(const IndexRun& run) {
  const char* expect = std::getenv("COURSE_EXPECT_FAILURE");
  const bool expect_failure = expect && std::strcmp(expect, "1") == 0;
  if (run.failed_cases == 0) return 77;  // nothing wrong found, and the kernel did not run
  if (expect_failure) {
    std::printf(
        "expected failure: the index checks rejected this implementation. That is the "
        "correct outcome (the kernel itself was not run).\n");
    return 0;
  }
  return 1;
}

int run_tests(int argc, char** argv, bool with_watchdog) {
  const char* expect = std::getenv("COURSE_EXPECT_FAILURE");
  const bool expect_failure = expect && std::strcmp(expect, "1") == 0;

  Catch::Session session;
  if (session.applyCommandLine(argc, argv) != 0) {
    std::printf("\nERROR: the command line was not understood (see above); no test ran.\n");
    return 2;
  }
  if (only_lists_or_helps(session)) {
    session.run();  // Catch2 v2 returns the number of listed items here, which is no error
    return 0;
  }

  int catch_rc = 0;
  {
    Watchdog watchdog(with_watchdog ? test_timeout_seconds() : 0);
    catch_rc = session.run();
  }
  const long cases = g_run.test_cases_started;
  const long failed = g_run.failed_assertions;

  if (cases == 0) {
    std::printf(
        "\nERROR: no test case ran (does the filter on the command line match any "
        "test case? list them with --list-tests). Nothing was checked.\n");
    return 2;
  }
  if (failed == 0 && catch_rc != 0) {
    std::printf(
        "\nERROR: Catch2 reported a failed run (exit %d) without any failed assertion; "
        "that is not a test verdict.\n",
        catch_rc);
    return 2;
  }

  if (expect_failure) {
    if (failed == 0) {
      std::printf(
          "\nEXPECTED A FAILURE, GOT A PASS: this implementation is known to be wrong (a planted "
          "bug or an untouched skeleton), yet every test passed. The tests are too weak to catch "
          "it.\n");
      return 1;
    }
    std::printf(
        "\nexpected failure: the tests rejected this implementation (%ld failed "
        "assertion%s). That is the correct outcome.\n",
        failed, failed == 1 ? "" : "s");
    return 0;
  }

  if (failed > 0 && with_watchdog) {
    bool is_solution = false;
    const std::string id = exercise_of(argc > 0 ? argv[0] : nullptr, &is_solution);
    if (!id.empty()) {
      std::printf(
          "\nIf a failure above looks random (it moves between runs, or only large shapes "
          "fail), look for a race or an out-of-bounds access:\n  make sanitize EX=%s%s\n"
          "runs this test's [quick] cases under compute-sanitizer (memcheck, racecheck, "
          "synccheck, initcheck).\n",
          id.c_str(), is_solution ? " SOLUTION=1" : "");
    }
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace course
