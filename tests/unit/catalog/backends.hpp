#pragma once
// The catalog backends the catalog and job store tests run against: SQLite (a file in the
// test's directory) and PostgreSQL (a throwaway cluster this test binary starts on first use,
// on a temp directory and a free loopback port, and stops at exit; each test gets a fresh
// database). When PostgreSQL's server programs are missing, the PostgreSQL tests fail.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "wheelforge/util/result.hpp"

namespace wf::catalog::backends {

enum class Backend { sqlite, postgresql };

/// "sqlite" or "postgresql" (test name suffixes).
[[nodiscard]] std::string backend_label(Backend backend);

/// Names a parameterized test's instance after its backend.
struct BackendName {
  std::string operator()(const ::testing::TestParamInfo<Backend>& p) const {
    return backend_label(p.param);
  }
};

/// A location for open_catalog(): "sqlite" (the catalog is `dir`/wheelforge.db), or the URI of
/// a new, empty database on the test cluster (started on the first call).
[[nodiscard]] Result<std::string> fresh_location(Backend backend);

/// The running test's name, usable as a file name (a parameterized test's "/" replaced).
[[nodiscard]] std::string test_dir_name();

/// Stops the test cluster if it runs (registered as a gtest Environment by backends.cpp).
void stop_cluster();

/// Stops (true) or starts again (false) the running test cluster's server, keeping its data:
/// the tests of connection loss.
[[nodiscard]] Status set_server_stopped(bool stopped);

}  // namespace wf::catalog::backends
