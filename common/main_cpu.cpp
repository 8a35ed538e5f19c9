// main() of the CPU test binaries (the reference and harness tests).
#include "test_runtime.h"

int main(int argc, char** argv) { return course::run_tests(argc, argv); }
