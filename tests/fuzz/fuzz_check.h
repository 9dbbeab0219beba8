#pragma once

// The invariants a fuzz target asserts. A failure prints what broke and the detail, then aborts:
// the driver (tests/fuzz/fuzz_driver.cpp) or libFuzzer catches the abort, saves the input and
// names the file. Not assert(): it must hold in release builds too.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace shardscope::fuzz {

[[noreturn]] inline void fail(const char* what, std::string_view detail, const char* file, int line)
{
    std::fprintf(stderr, "\n==shardscope-fuzz== invariant failed at %s:%d: %s\n%.*s\n", file, line, what,
                 static_cast<int>(detail.size()), detail.data());
    std::fflush(stderr);
    std::abort();
}

inline std::string text(const std::uint8_t* data, std::size_t size)
{
    return std::string(reinterpret_cast<const char*>(data), size);
}

} // namespace shardscope::fuzz

// FUZZ_CHECK(condition, detail): `detail` (anything convertible to std::string_view) is evaluated
// only on failure.
#define FUZZ_CHECK(condition, detail)                                                                                            \
    do {                                                                                                                         \
        if (!(condition))                                                                                                        \
            ::shardscope::fuzz::fail(#condition, (detail), __FILE__, __LINE__);                                                  \
    } while (false)
