#pragma once
// The change feed of a shared catalog (docs/scale.md): every committed change that pages or the
// token index depend on is one row of the PostgreSQL table `changes`, appended by triggers in
// the writing transaction with that transaction's id. A replica reads the feed from a position
// and applies what it names to its in-memory snapshot.
//
// Positions are transaction-id boundaries: a replica "at position P" has applied every change of
// every transaction whose id is below P. A read returns the rows of transactions in
// [from, xmin) where xmin is the oldest transaction still running when the read's snapshot was
// taken; every transaction below xmin has finished, and every transaction that may still commit
// has an id at or above it, so a row that commits late is read by a later call, never skipped.
// No lock is taken. Catalog::position() after a write is at or above that write's boundary.

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/util/result.hpp"

namespace wf::catalog {

/// What one feed entry says changed.
enum class ChangeKind : std::uint8_t {
  project,  ///< one project's files, yanks, deletions or claim
  tokens,   ///< the token table
  all,      ///< anything else a page depends on (damaged blobs): reload everything
};

struct Change {
  ChangeKind kind = ChangeKind::all;
  std::string project;  ///< for ChangeKind::project: its canonical name
  std::int64_t at_micros = 0;  ///< when the row was written (database clock)
};

/// The entries of one read and the position reached.
struct ChangeBatch {
  std::vector<Change> changes;
  std::uint64_t position = 0;
};

/// What a replica reloads for a batch: a full load, or the named projects (and the tokens).
struct ChangePlan {
  enum class Load : std::uint8_t { nothing, projects, everything };
  Load load = Load::nothing;
  std::set<std::string> projects;
  bool tokens = false;
};

/// Pure: the reload that applies `changes`. Everything when an entry says so, when more than
/// `max_projects` projects changed (one full load is cheaper), or when the tokens changed
/// (tokens come with every load; a project reload reloads them too).
[[nodiscard]] ChangePlan plan_changes(const std::vector<Change>& changes,
                                      std::size_t max_projects);

/// One replica's reader of the feed, over a connection of its own. Blocking; one thread uses
/// it (the server's follower).
class ChangeFeed {
 public:
  virtual ~ChangeFeed() = default;
  /// The position from which a snapshot loaded after this call needs no earlier entry.
  [[nodiscard]] virtual Result<std::uint64_t> start() = 0;
  /// The entries from `from` on, in commit-safe order, and the position reached (never below
  /// `from`). Errc::unavailable naming the database when it cannot be reached.
  [[nodiscard]] virtual Result<ChangeBatch> read(std::uint64_t from) = 0;
  /// Waits up to `timeout` for another process's NOTIFY (listening again after a lost
  /// connection). True when woken, false on timeout.
  [[nodiscard]] virtual Result<bool> wait(std::chrono::milliseconds timeout) = 0;
};

/// The feed of the catalog at `location`; null for SQLite (one process writes it: it watches
/// its generation). Connects lazily: a database that is down fails the first read.
[[nodiscard]] std::unique_ptr<ChangeFeed> open_change_feed(std::string_view location);

/// The NOTIFY channel writers wake readers on.
inline constexpr const char* kChangeChannel = "wheelforge_changes";

}  // namespace wf::catalog
