#if COURSE_CATCH2_V3
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER  // this translation unit holds Catch2 v2's implementation, once
#include <catch2/catch.hpp>
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "test_runtime.h"

namespace course {

int run_tests(int argc, char** argv) {
  const char* expect = std::getenv("COURSE_EXPECT_FAILURE");
  const bool expect_failure = expect && std::strcmp(expect, "1") == 0;
  const int failed = Catch::Session().run(argc, argv);
  if (!expect_failure) return failed;
  if (failed == 0) {
    std::printf(
        "\nEXPECTED A FAILURE, GOT A PASS: this implementation is known to be wrong (a planted bug "
        "or an untouched skeleton), yet every test passed. The tests are too weak to catch it.\n");
    return 1;
  }
  std::printf("\nexpected failure: the tests rejected this implementation (%d failing). "
              "That is the correct outcome.\n", failed);
  return 0;
}

}  // namespace course
