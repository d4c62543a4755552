#pragma once
// Upstream pages shared by the servers of one PostgreSQL catalog (docs/scale.md, "Upstream
// pages"): the copy of a page that one server fetched, and which server is fetching it now, so
// that every replica offers the same upstream files and N replicas missing one page make one
// upstream fetch. Each server keeps its own copies too (memory and disk); this is where they
// meet. A server that misses a page looks here first: a fresh copy is used as it is; an old or
// absent one is claimed by one server, which fetches the page and puts the copy (or releases
// the claim when the fetch failed), while the others wait for that copy. A claim lasts until
// its deadline, so a server that dies while it fetches holds no page back for longer.
//
// The copy is the text of a server's disk copy of the page (handlers/upstreams.cpp), and a
// page's key is "UPSTREAM\nPROJECT". Every call is one statement outside any transaction and
// blocks on the database: call it from a worker, never from a network thread.

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "wheelforge/util/result.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::catalog {

class SharedPages {
 public:
  struct Copy {
    std::string text;
    Micros validated = 0;  ///< when the upstream last confirmed it
  };
  struct Look {
    std::optional<Copy> copy;  ///< the shared copy, when there is one
    /// True when this server claimed the page: the copy was absent or validated before
    /// `fresh_after` and nobody else was fetching it. The caller fetches it and then calls
    /// put(), renew() or release().
    bool fetch = false;
  };

  virtual ~SharedPages() = default;
  SharedPages() = default;
  SharedPages(const SharedPages&) = delete;
  SharedPages& operator=(const SharedPages&) = delete;

  /// The shared copy of `key`, claimed for fetching until `claim_until` when it is older than
  /// `fresh_after` and no claim made by another server runs past `now`.
  [[nodiscard]] virtual Result<Look> look(std::string_view key, Micros fresh_after,
                                          Micros claim_until, Micros now) = 0;
  /// Stores a fetched copy and ends the claim.
  [[nodiscard]] virtual Status put(std::string_view key, const Copy& copy) = 0;
  /// The upstream confirmed the shared copy (304): its validation time moves, the claim ends.
  [[nodiscard]] virtual Status renew(std::string_view key, Micros validated) = 0;
  /// Ends the claim without a copy (the fetch failed): the next server to look claims it.
  [[nodiscard]] virtual Status release(std::string_view key) = 0;
};

/// The shared pages of a catalog `location` (a libpq URI); null for "sqlite", whose one server
/// shares nothing.
[[nodiscard]] std::unique_ptr<SharedPages> open_shared_pages(std::string_view location);

}  // namespace wf::catalog
