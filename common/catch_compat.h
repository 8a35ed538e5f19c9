// Catch2 v3 (Ubuntu 24.04) and v2 (Debian 12, Ubuntu 22.04) behind one include. The tests use
// only macros that both versions spell the same way.
#pragma once
#if COURSE_CATCH2_V3
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#else
#include <catch2/catch.hpp>
#endif
