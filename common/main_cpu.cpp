// main() of the CPU test binaries (the reference and harness tests). No watchdog: nothing here
// waits on a GPU, and CTest's timeout covers a CPU loop that never ends.
#include "test_runtime.h"

int main(int argc, char** argv) { return course::run_tests(argc, argv); }
