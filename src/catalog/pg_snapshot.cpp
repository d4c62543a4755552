// A PostgreSQL catalog read as of one exported snapshot (pg_snapshot.hpp).

#include "wheelforge/catalog/pg_snapshot.hpp"

#include <string>
#include <utility>

#include "catalog/pg_catalog_impl.hpp"
#include "catalog/pg_conn.hpp"

namespace wf::catalog {

Result<SnapshotSummary> with_exported_snapshot(
    std::string_view uri, const std::function<Status(const std::string& snapshot_id)>& dump) {
  auto conn = pg::Conn::open(std::string(uri));
  if (!conn) return conn.error();
  // READ ONLY REPEATABLE READ: every read below sees the snapshot pg_dump dumps. A lost
  // connection fails the transaction (no silent reconnect inside it).
  return (*conn)->read_transaction([&]() -> Result<SnapshotSummary> {
    auto id = (*conn)->exec("export snapshot", "SELECT pg_export_snapshot()");
    if (!id) return id.error();
    if (auto st = dump(id->text(0, 0)); !st) return st.error();
    auto counts = (*conn)->exec("count rows",
                                "SELECT (SELECT count(*) FROM files), (SELECT count(*) FROM"
                                " projects), (SELECT count(*) FROM tokens)");
    if (!counts) return counts.error();
    SnapshotSummary summary;
    summary.files = static_cast<std::size_t>(counts->i64(0, 0));
    summary.projects = static_cast<std::size_t>(counts->i64(0, 1));
    summary.tokens = static_cast<std::size_t>(counts->i64(0, 2));
    auto refs = detail::read_referenced_blobs(**conn);
    if (!refs) return refs.error();
    summary.refs = std::move(*refs);
    return summary;
  });
}

}  // namespace wf::catalog
