#pragma once
// Request metrics in the Prometheus text format. Updated and rendered on the network thread
// only, so nothing here locks.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "message.hpp"

namespace wf::http {

/// A low-cardinality name for the route a request took (never the raw path).
[[nodiscard]] std::string_view route_label(const Request& req);

class Metrics {
 public:
  static constexpr std::array<double, 14> kBuckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

  void request(std::string_view route, int status, double seconds, std::uint64_t bytes);
  void upload(std::string_view outcome) { ++uploads_[std::string(outcome)]; }
  void connection_opened() { ++connections_total_; }

  /// The exposition text; `gauges` are extra "name value" lines (current connections, ...).
  [[nodiscard]] std::string render(const std::map<std::string, double>& gauges) const;

 private:
  struct Histogram {
    std::array<std::uint64_t, kBuckets.size()> buckets{};
    std::uint64_t count = 0;
    double sum = 0;
  };
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::map<std::string, Histogram> latency_;
  std::map<std::string, std::uint64_t> bytes_;
  std::map<std::string, std::uint64_t> uploads_;
  std::uint64_t connections_total_ = 0;
};

}  // namespace wf::http
