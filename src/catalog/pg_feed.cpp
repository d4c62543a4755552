// The change feed of a PostgreSQL catalog (change_feed.hpp) and the pure planning of what a
// batch of entries reloads.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "catalog/pg_conn.hpp"
#include "wheelforge/catalog/change_feed.hpp"

namespace wf::catalog {

ChangePlan plan_changes(const std::vector<Change>& changes, std::size_t max_projects) {
  ChangePlan plan;
  for (const Change& c : changes) {
    switch (c.kind) {
      case ChangeKind::all:
        plan.load = ChangePlan::Load::everything;
        break;
      case ChangeKind::tokens:
        plan.tokens = true;
        break;
      case ChangeKind::project:
        plan.projects.insert(c.project);
        break;
    }
  }
  if (plan.load == ChangePlan::Load::everything || plan.projects.size() > max_projects) {
    plan.load = ChangePlan::Load::everything;
    plan.projects.clear();
  } else if (!plan.projects.empty() || plan.tokens) {
    plan.load = ChangePlan::Load::projects;
  }
  return plan;
}

namespace {

// One statement, so that the boundary and the rows come from one snapshot: the rows of the
// transactions in [$1, xmin), every one of which has finished.
constexpr const char* kReadFeed =
    "WITH s AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS upto) "
    "SELECT s.upto::text, c.kind, c.project, c.at FROM s LEFT JOIN changes c "
    "ON c.xid >= $1::text::xid8 AND c.xid < s.upto ORDER BY c.id";

class PgChangeFeed final : public ChangeFeed {
 public:
  explicit PgChangeFeed(std::string_view uri) : conn_(pg::Conn::lazy(std::string(uri))) {}

  Result<std::uint64_t> start() override {
    auto rows = conn_->exec("read the change feed's position",
                            "SELECT pg_snapshot_xmin(pg_current_snapshot())::text");
    if (!rows) return rows.error();
    return std::stoull(rows->text(0, 0));
  }

  Result<ChangeBatch> read(std::uint64_t from) override {
    auto rows =
        conn_->exec("read the change feed", kReadFeed, pg::Params().add(std::to_string(from)));
    if (!rows) return rows.error();
    ChangeBatch batch;
    batch.position = from;
    for (int i = 0; i < rows->size(); ++i) {
      if (i == 0) batch.position = std::max<std::uint64_t>(from, std::stoull(rows->text(0, 0)));
      if (rows->null(i, 1)) continue;  // the LEFT JOIN's row when there is no entry
      Change c;
      const std::string kind = rows->text(i, 1);
      c.kind = kind == "project"  ? ChangeKind::project
               : kind == "tokens" ? ChangeKind::tokens
                                  : ChangeKind::all;
      c.project = rows->text(i, 2);
      c.at_micros = rows->i64(i, 3);
      batch.changes.push_back(std::move(c));
    }
    return batch;
  }

  Result<bool> wait(std::chrono::milliseconds timeout) override {
    if (listened_on_ == 0 || listened_on_ != conn_->connects()) {
      auto listened = conn_->exec("listen for changes", std::string("LISTEN ") + kChangeChannel);
      if (!listened) return listened.error();
      listened_on_ = conn_->connects();
      // Whatever was announced before the LISTEN is found by the read that follows.
      return true;
    }
    return conn_->wait_notification(timeout);
  }

 private:
  std::unique_ptr<pg::Conn> conn_;
  std::uint64_t listened_on_ = 0;
};

}  // namespace

std::unique_ptr<ChangeFeed> open_change_feed(std::string_view location) {
  if (!pg::is_uri(location)) return nullptr;
  return std::make_unique<PgChangeFeed>(location);
}

}  // namespace wf::catalog
