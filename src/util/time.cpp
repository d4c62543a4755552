#include "wheelforge/util/time.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace wf {

Micros now_micros() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::microseconds>(now).count();
}

namespace {
std::tm utc_tm(Micros t) {
  const std::time_t secs = static_cast<std::time_t>(t / 1'000'000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return tm;
}
}  // namespace

std::string iso8601_micros(Micros t) {
  const std::tm tm = utc_tm(t);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(((t % 1'000'000) + 1'000'000) % 1'000'000));
  return buf;
}

std::string http_date(Micros t) {
  const std::tm tm = utc_tm(t);
  char buf[40];
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

}  // namespace wf
