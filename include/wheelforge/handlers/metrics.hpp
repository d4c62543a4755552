#pragma once
// Request metrics in the Prometheus text format. Each thread counts its requests in a shard of
// its own (a lock no other counting thread takes); rendering adds the shards up.

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/store/object_store.hpp"

namespace wf::handlers {

class Metrics {
 public:
  Metrics();
  static constexpr std::array<double, 14> kBuckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

  /// Counts one answered request under its route's label (Route::label: never the raw path).
  void request(std::string_view route, int status, double seconds, std::uint64_t bytes);
  void upload(std::string_view outcome);
  void connection_opened();

  /// The exposition text; `gauges` are extra "name value" lines (current connections, ...).
  [[nodiscard]] std::string render(const std::map<std::string, double>& gauges) const;

 private:
  struct Histogram {
    std::array<std::uint64_t, kBuckets.size()> buckets{};
    std::uint64_t count = 0;
    double sum = 0;
  };
  // Per route: counts by status, latency, bytes (looked up without building a string).
  struct Route {
    std::map<int, std::uint64_t> requests;
    Histogram latency;
    std::uint64_t bytes = 0;
  };
  using Routes = std::map<std::string, Route, std::less<>>;
  struct Shard {
    std::mutex mu;
    Routes routes;
  };
  /// The calling thread's shard, made on its first request.
  Shard& shard();

  std::uint64_t id_;  // tells this instance's shards from those of earlier ones
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Shard>> shards_;  // guarded by mu_; kept when threads end
  std::map<std::string, std::uint64_t, std::less<>> uploads_;
  std::uint64_t connections_total_ = 0;
};

/// The latency and errors of the two stores (docs/operations.md, "Metrics"): every catalog call
/// (by backend and read/write) and every object-store request (by operation), fed by the
/// catalog's and the object store's observers, which the app wires to one instance. Thread-safe;
/// counting takes a short lock (a few thousand calls a second at most: one per request that
/// reaches a store, never one per page served).
class StoreMetrics final : public catalog::CallObserver, public store::RequestObserver {
 public:
  void catalog_call(std::string_view backend, catalog::CallKind kind, std::chrono::nanoseconds took,
                    const Error* error) override;
  void object_request(std::string_view operation, std::chrono::nanoseconds took,
                      store::RequestFailure failure) override;

  /// The exposition text of these series.
  [[nodiscard]] std::string render() const;

 private:
  struct Histogram {
    std::array<std::uint64_t, Metrics::kBuckets.size()> buckets{};
    std::uint64_t count = 0;
    double sum = 0;
    void add(double seconds);
  };
  mutable std::mutex mu_;
  /// By (backend, "read"/"write").
  std::map<std::pair<std::string, std::string>, Histogram> catalog_calls_;
  /// By (backend, "read"/"write", error kind): server-side failures only.
  std::map<std::tuple<std::string, std::string, std::string>, std::uint64_t> catalog_errors_;
  /// By operation.
  std::map<std::string, Histogram, std::less<>> object_requests_;
  /// By (operation, failure kind).
  std::map<std::pair<std::string, std::string>, std::uint64_t> object_errors_;
};

}  // namespace wf::handlers
