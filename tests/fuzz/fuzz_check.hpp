#pragma once
// Invariant checks for the fuzz targets: a broken invariant aborts, which libFuzzer records as
// a crash with the input that caused it.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#define WF_FUZZ_CHECK(cond)                                                             \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (false)

namespace wf::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace wf::fuzz
