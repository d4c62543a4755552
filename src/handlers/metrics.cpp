#include "wheelforge/handlers/metrics.hpp"

#include <fmt/format.h>

#include <atomic>
#include <optional>

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

void StoreMetrics::Histogram::add(double seconds) {
  for (std::size_t i = 0; i < Metrics::kBuckets.size(); ++i) {
    if (seconds <= Metrics::kBuckets[i]) ++buckets[i];
  }
  ++count;
  sum += seconds;
}

namespace {

std::string_view call_kind_name(catalog::CallKind kind) {
  return kind == catalog::CallKind::read ? "read" : "write";
}

/// The label of a catalog error the metrics count: the server's failures (the database
/// unreachable, full, failing); nullopt for answers about the request (not_found, conflict,
/// ...), which are not the database's errors.
std::optional<std::string_view> counted_error(Errc code) {
  switch (code) {
    case Errc::unavailable:
      return "unavailable";
    case Errc::storage_full:
      return "storage_full";
    case Errc::io:
      return "io";
    case Errc::internal:
      return "internal";
    default:
      return std::nullopt;
  }
}

double seconds_of(std::chrono::nanoseconds took) {
  return std::chrono::duration<double>(took).count();
}

void render_histogram(std::string& out, std::string_view name, const std::string& labels,
                      const auto& h) {
  for (std::size_t i = 0; i < Metrics::kBuckets.size(); ++i) {
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, Metrics::kBuckets[i],
                       h.buckets[i]);
  }
  out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, h.count);
  out += fmt::format("{}_sum{{{}}} {}\n", name, labels, h.sum);
  out += fmt::format("{}_count{{{}}} {}\n", name, labels, h.count);
}

}  // namespace

void StoreMetrics::catalog_call(std::string_view backend, catalog::CallKind kind,
                                std::chrono::nanoseconds took, const Error* error) {
  const std::string_view k = call_kind_name(kind);
  std::lock_guard lock(mu_);
  catalog_calls_[{std::string(backend), std::string(k)}].add(seconds_of(took));
  if (error == nullptr) return;
  if (const auto label = counted_error(error->code)) {
    ++catalog_errors_[{std::string(backend), std::string(k), std::string(*label)}];
  }
}

void StoreMetrics::object_request(std::string_view operation, std::chrono::nanoseconds took,
                                  store::RequestFailure failure) {
  std::lock_guard lock(mu_);
  auto it = object_requests_.find(operation);
  if (it == object_requests_.end()) {
    it = object_requests_.emplace(std::string(operation), Histogram{}).first;
  }
  it->second.add(seconds_of(took));
  if (failure != store::RequestFailure::none) {
    ++object_errors_[{std::string(operation), std::string(store::request_failure_name(failure))}];
  }
}

std::string StoreMetrics::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  out +=
      "# HELP wheelforge_catalog_call_duration_seconds Catalog calls by backend and kind "
      "(read, write).\n"
      "# TYPE wheelforge_catalog_call_duration_seconds histogram\n";
  for (const auto& [key, h] : catalog_calls_) {
    render_histogram(out, "wheelforge_catalog_call_duration_seconds",
                     fmt::format("backend=\"{}\",kind=\"{}\"", key.first, key.second), h);
  }
  out +=
      "# HELP wheelforge_catalog_errors_total Catalog calls that failed on the database's side, "
      "by backend, kind and error (unavailable, storage_full, io, internal).\n"
      "# TYPE wheelforge_catalog_errors_total counter\n";
  for (const auto& [key, n] : catalog_errors_) {
    out += fmt::format(
        "wheelforge_catalog_errors_total{{backend=\"{}\",kind=\"{}\",error=\"{}\"}} {}\n",
        std::get<0>(key), std::get<1>(key), std::get<2>(key), n);
  }
  out +=
      "# HELP wheelforge_object_store_request_duration_seconds Requests to the object store by "
      "operation.\n"
      "# TYPE wheelforge_object_store_request_duration_seconds histogram\n";
  for (const auto& [operation, h] : object_requests_) {
    render_histogram(out, "wheelforge_object_store_request_duration_seconds",
                     fmt::format("operation=\"{}\"", operation), h);
  }
  out +=
      "# HELP wheelforge_object_store_errors_total Requests to the object store that failed, by "
      "operation and kind (unreachable, server_error, denied, rejected).\n"
      "# TYPE wheelforge_object_store_errors_total counter\n";
  for (const auto& [key, n] : object_errors_) {
    out += fmt::format("wheelforge_object_store_errors_total{{operation=\"{}\",kind=\"{}\"}} {}\n",
                       key.first, key.second, n);
  }
  return out;
}

}  // namespace wf::handlers
