// Includes Catch2's test macros, whichever major version (2 or 3) the build found.
#pragma once
#if DYNVM_CATCH_V3
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
