#include "wheelforge/handlers/metrics.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace wf::handlers {
namespace {

TEST(Metrics, AddsUpTheCountsOfEveryThread) {
  Metrics metrics;
  constexpr int kThreads = 4;
  constexpr int kRequests = 1000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics, t] {
      for (int i = 0; i < kRequests; ++i) {
        metrics.request("file", t == 0 ? 404 : 200, 0.25, 10);
      }
    });
  }
  for (auto& th : threads) th.join();
  metrics.request("metadata", 200, 20.0, 5);  // and this thread's own shard
  metrics.upload("stored");
  metrics.connection_opened();

  const std::string text = metrics.render({{"wheelforge_files", 3}});
  const auto has = [&text](const std::string& line) {
    return text.find(line + "\n") != std::string::npos;
  };
  EXPECT_TRUE(has("wheelforge_http_requests_total{route=\"file\",status=\"200\"} 3000")) << text;
  EXPECT_TRUE(has("wheelforge_http_requests_total{route=\"file\",status=\"404\"} 1000"));
  EXPECT_TRUE(has("wheelforge_http_requests_total{route=\"metadata\",status=\"200\"} 1"));
  EXPECT_TRUE(has("wheelforge_http_request_duration_seconds_bucket{route=\"file\",le=\"0.1\"} 0"));
  EXPECT_TRUE(
      has("wheelforge_http_request_duration_seconds_bucket{route=\"file\",le=\"0.25\"} 4000"));
  EXPECT_TRUE(
      has("wheelforge_http_request_duration_seconds_bucket{route=\"file\",le=\"+Inf\"} 4000"));
  EXPECT_TRUE(has("wheelforge_http_request_duration_seconds_count{route=\"file\"} 4000"));
  EXPECT_TRUE(has("wheelforge_http_request_duration_seconds_sum{route=\"file\"} 1000"));
  EXPECT_TRUE(
      has("wheelforge_http_request_duration_seconds_bucket{route=\"metadata\",le=\"10\"} 0"));
  EXPECT_TRUE(
      has("wheelforge_http_request_duration_seconds_bucket{route=\"metadata\",le=\"+Inf\"} 1"));
  EXPECT_TRUE(has("wheelforge_http_response_bytes_total{route=\"file\"} 40000"));
  EXPECT_TRUE(has("wheelforge_uploads_total{outcome=\"stored\"} 1"));
  EXPECT_TRUE(has("wheelforge_connections_total 1"));
  EXPECT_TRUE(has("wheelforge_files 3"));
}

TEST(Metrics, ASecondInstanceStartsFromZero) {
  {
    Metrics first;
    first.request("file", 200, 0.001, 1);
  }
  Metrics second;  // this thread's shard of `first` must not be reused
  second.request("file", 200, 0.001, 1);
  EXPECT_NE(
      second.render({}).find("wheelforge_http_requests_total{route=\"file\",status=\"200\"} 1\n"),
      std::string::npos);
}

TEST(StoreMetrics, CountsCallsAndTheStoresOwnFailures) {
  using std::chrono::milliseconds;
  StoreMetrics metrics;
  const Error down = make_error(Errc::unavailable, "PostgreSQL at h:5432/db is unavailable");
  const Error absent = make_error(Errc::not_found, "no such token");
  metrics.catalog_call("postgresql", catalog::CallKind::write, milliseconds(3), nullptr);
  metrics.catalog_call("postgresql", catalog::CallKind::write, milliseconds(20), &down);
  metrics.catalog_call("postgresql", catalog::CallKind::read, milliseconds(1), &absent);
  metrics.object_request("put", milliseconds(2), store::RequestFailure::none);
  metrics.object_request("put", milliseconds(2), store::RequestFailure::unreachable);
  metrics.object_request("head", milliseconds(2), store::RequestFailure::none);

  const std::string text = metrics.render();
  const auto has = [&text](const std::string& line) {
    return text.find(line + "\n") != std::string::npos;
  };
  EXPECT_TRUE(
      has("wheelforge_catalog_call_duration_seconds_count{backend=\"postgresql\","
          "kind=\"write\"} 2"))
      << text;
  EXPECT_TRUE(
      has("wheelforge_catalog_call_duration_seconds_bucket{backend=\"postgresql\","
          "kind=\"write\",le=\"0.005\"} 1"));
  EXPECT_TRUE(
      has("wheelforge_catalog_call_duration_seconds_count{backend=\"postgresql\","
          "kind=\"read\"} 1"));
  EXPECT_TRUE(
      has("wheelforge_catalog_errors_total{backend=\"postgresql\",kind=\"write\","
          "error=\"unavailable\"} 1"));
  // An answer about the request (not_found) is no error of the database.
  EXPECT_EQ(text.find("kind=\"read\",error="), std::string::npos);
  EXPECT_TRUE(has("wheelforge_object_store_request_duration_seconds_count{operation=\"put\"} 2"));
  EXPECT_TRUE(
      has("wheelforge_object_store_errors_total{operation=\"put\",kind=\"unreachable\"} 1"));
  EXPECT_EQ(text.find("wheelforge_object_store_errors_total{operation=\"head\""),
            std::string::npos);
}

}  // namespace
}  // namespace wf::handlers
