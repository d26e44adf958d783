// The precompiled header of halfgrad_tests (tests/meson.build): what nearly every test file
// includes. Meson compiles it once per build and puts it before each test file's own code.
#include <catch2/catch.hpp>

#include "halfgrad.h"
