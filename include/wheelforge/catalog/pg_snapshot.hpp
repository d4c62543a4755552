#pragma once
// A PostgreSQL catalog read as of one exported snapshot, for `wheelforge backup`: pg_dump
// dumps that snapshot (--snapshot), and what the backup reports and copies is read in it too.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::catalog {

/// What one snapshot of a catalog holds, as a backup describes it.
struct SnapshotSummary {
  std::size_t files = 0;
  std::size_t projects = 0;
  std::size_t tokens = 0;
  std::vector<BlobRef> refs;  ///< as Catalog::referenced_blobs() lists them
};

/// Opens a REPEATABLE READ, READ ONLY transaction on the PostgreSQL catalog at `uri`, exports
/// its snapshot (pg_export_snapshot()) and runs `dump(snapshot_id)` while the transaction holds
/// it (pg_dump --snapshot=ID dumps exactly that state); then reads, in the same snapshot, how
/// many files, projects and tokens it holds and the blobs its rows reference. Errors: the
/// database's (Errc::unavailable naming it when unreachable), or `dump`'s.
[[nodiscard]] Result<SnapshotSummary> with_exported_snapshot(
    std::string_view uri, const std::function<Status(const std::string& snapshot_id)>& dump);

}  // namespace wf::catalog
