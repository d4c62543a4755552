// Upstream pages shared through a PostgreSQL catalog (shared_pages.hpp): the table
// `upstream_pages` (migration 6), one statement per call on a connection of its own.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "catalog/pg_conn.hpp"
#include "wheelforge/catalog/shared_pages.hpp"

namespace wf::catalog {
namespace {

using pg::Params;

// One statement: the claim (a new row, or an old copy nobody fetches now) or, when there is
// none, the row as it stands. A row another server inserts at the same moment is not seen by
// the second SELECT (the statement's snapshot): the caller finds neither copy nor claim, and
// looks again as it does while another server fetches.
constexpr const char* kLook =
    "WITH claim AS ("
    " INSERT INTO upstream_pages AS p (key, fetching_until) VALUES ($1, $3)"
    " ON CONFLICT (key) DO UPDATE SET fetching_until = $3"
    " WHERE p.validated < $2 AND p.fetching_until <= $4"
    " RETURNING p.body, p.validated, true AS claimed) "
    "SELECT body, validated, claimed FROM claim UNION ALL "
    "SELECT body, validated, false FROM upstream_pages"
    " WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM claim)";

class PgSharedPages final : public SharedPages {
 public:
  explicit PgSharedPages(std::string_view uri) : conn_(pg::Conn::lazy(std::string(uri))) {}

  Result<Look> look(std::string_view key, Micros fresh_after, Micros claim_until,
                    Micros now) override {
    std::lock_guard lock(mu_);
    auto rows = conn_->exec("look up a shared upstream page", kLook,
                            Params().add(key).add(fresh_after).add(claim_until).add(now));
    if (!rows) return rows.error();
    Look out;
    if (rows->empty()) return out;
    out.fetch = rows->text(0, 2) == "t";
    if (!rows->null(0, 0)) out.copy = Copy{rows->text(0, 0), rows->i64(0, 1)};
    return out;
  }

  Status put(std::string_view key, const Copy& copy) override {
    std::lock_guard lock(mu_);
    auto rows = conn_->exec("store a shared upstream page",
                            "INSERT INTO upstream_pages (key, body, validated) VALUES ($1, $2, $3)"
                            " ON CONFLICT (key) DO UPDATE SET body = EXCLUDED.body,"
                            " validated = EXCLUDED.validated, fetching_until = 0",
                            Params().add(key).add(copy.text).add(copy.validated));
    if (!rows) return rows.error();
    // Now and then, the copies nobody has validated for a week go (a page asked for again is
    // fetched again): the table holds what the replicas use, not every page ever asked for.
    if (++puts_ % kPruneEvery == 1) {
      auto gone = conn_->exec("prune shared upstream pages",
                              "DELETE FROM upstream_pages WHERE validated < $1"
                              " AND fetching_until = 0",
                              Params().add(copy.validated - kKeepUnused));
      if (!gone) return gone.error();
    }
    return ok_status();
  }

  Status renew(std::string_view key, Micros validated) override {
    std::lock_guard lock(mu_);
    auto rows = conn_->exec("renew a shared upstream page",
                            "UPDATE upstream_pages SET validated = greatest(validated, $2),"
                            " fetching_until = 0 WHERE key = $1",
                            Params().add(key).add(validated));
    if (!rows) return rows.error();
    return ok_status();
  }

  Status release(std::string_view key) override {
    std::lock_guard lock(mu_);
    auto rows = conn_->exec("release a shared upstream page",
                            "UPDATE upstream_pages SET fetching_until = 0 WHERE key = $1",
                            Params().add(key));
    if (!rows) return rows.error();
    return ok_status();
  }

 private:
  static constexpr std::uint64_t kPruneEvery = 256;
  static constexpr Micros kKeepUnused = 7LL * 24 * 3600 * 1'000'000;

  std::mutex mu_;
  std::unique_ptr<pg::Conn> conn_;
  std::uint64_t puts_ = 0;
};

}  // namespace

std::unique_ptr<SharedPages> open_shared_pages(std::string_view location) {
  if (!pg::is_uri(location)) return nullptr;
  return std::make_unique<PgSharedPages>(location);
}

}  // namespace wf::catalog
