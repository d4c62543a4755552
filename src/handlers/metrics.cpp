#include "wheelforge/handlers/metrics.hpp"

#include <fmt/format.h>

#include <atomic>

namespace wf::handlers {

namespace {

std::atomic<std::uint64_t> g_next_metrics_id{1};

/// The shards the calling thread counts in, by the id of their Metrics.
thread_local std::vector<std::pair<std::uint64_t, void*>> t_shards;

}  // namespace

Metrics::Metrics() : id_(g_next_metrics_id.fetch_add(1)) {}

Metrics::Shard& Metrics::shard() {
  for (const auto& [owner, shard] : t_shards) {
    if (owner == id_) return *static_cast<Shard*>(shard);
  }
  // Entries of Metrics that are gone are never matched again; keep the list short.
  if (t_shards.size() >= 8) t_shards.clear();
  std::lock_guard lock(mu_);
  Shard& shard = *shards_.emplace_back(std::make_unique<Shard>());
  t_shards.emplace_back(id_, &shard);
  return shard;
}

void Metrics::request(std::string_view route, int status, double seconds, std::uint64_t bytes) {
  Shard& shard = this->shard();
  std::lock_guard lock(shard.mu);
  auto it = shard.routes.find(route);
  if (it == shard.routes.end()) it = shard.routes.emplace(std::string(route), Route{}).first;
  Route& r = it->second;
  ++r.requests[status];
  Histogram& h = r.latency;
  for (std::size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) ++h.buckets[i];
  }
  ++h.count;
  h.sum += seconds;
  r.bytes += bytes;
}

void Metrics::upload(std::string_view outcome) {
  std::lock_guard lock(mu_);
  auto it = uploads_.find(outcome);
  if (it == uploads_.end()) it = uploads_.emplace(std::string(outcome), 0).first;
  ++it->second;
}

void Metrics::connection_opened() {
  std::lock_guard lock(mu_);
  ++connections_total_;
}

std::string Metrics::render(const std::map<std::string, double>& gauges) const {
  std::lock_guard lock(mu_);
  Routes routes;
  for (const auto& shard : shards_) {
    std::lock_guard shard_lock(shard->mu);
    for (const auto& [name, from] : shard->routes) {
      Route& to = routes[name];
      for (const auto& [status, n] : from.requests) to.requests[status] += n;
      for (std::size_t i = 0; i < kBuckets.size(); ++i) {
        to.latency.buckets[i] += from.latency.buckets[i];
      }
      to.latency.count += from.latency.count;
      to.latency.sum += from.latency.sum;
      to.bytes += from.bytes;
    }
  }
  std::string out;
  out += "# HELP wheelforge_http_requests_total HTTP requests by route and status.\n";
  out += "# TYPE wheelforge_http_requests_total counter\n";
  for (const auto& [route, r] : routes) {
    for (const auto& [status, n] : r.requests) {
      out += fmt::format("wheelforge_http_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", route,
                         status, n);
    }
  }
  out +=
      "# HELP wheelforge_http_request_duration_seconds Time from request head to response sent.\n";
  out += "# TYPE wheelforge_http_request_duration_seconds histogram\n";
  for (const auto& [route, r] : routes) {
    const Histogram& h = r.latency;
    for (std::size_t i = 0; i < kBuckets.size(); ++i) {
      out += fmt::format(
          "wheelforge_http_request_duration_seconds_bucket{{route=\"{}\",le=\"{}\"}} {}\n", route,
          kBuckets[i], h.buckets[i]);
    }
    out += fmt::format(
        "wheelforge_http_request_duration_seconds_bucket{{route=\"{}\",le=\"+Inf\"}} {}\n", route,
        h.count);
    out += fmt::format("wheelforge_http_request_duration_seconds_sum{{route=\"{}\"}} {}\n", route,
                       h.sum);
    out += fmt::format("wheelforge_http_request_duration_seconds_count{{route=\"{}\"}} {}\n", route,
                       h.count);
  }
  out += "# HELP wheelforge_http_response_bytes_total Body bytes sent, by route.\n";
  out += "# TYPE wheelforge_http_response_bytes_total counter\n";
  for (const auto& [route, r] : routes) {
    out += fmt::format("wheelforge_http_response_bytes_total{{route=\"{}\"}} {}\n", route, r.bytes);
  }
  out += "# HELP wheelforge_uploads_total Uploads by outcome.\n";
  out += "# TYPE wheelforge_uploads_total counter\n";
  for (const auto& [outcome, n] : uploads_) {
    out += fmt::format("wheelforge_uploads_total{{outcome=\"{}\"}} {}\n", outcome, n);
  }
  out += "# HELP wheelforge_connections_total Connections accepted.\n";
  out += "# TYPE wheelforge_connections_total counter\n";
  out += fmt::format("wheelforge_connections_total {}\n", connections_total_);
  for (const auto& [name, value] : gauges) {
    out += fmt::format("# TYPE {} gauge\n{} {}\n", name, name, value);
  }
  return out;
}

}  // namespace wf::handlers
