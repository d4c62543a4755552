#pragma once
// Row mappings shared by the SQLite and PostgreSQL catalogs, private to the catalog module: one
// reading of a file, token, build and job row for both, through any row type with the
// accessors of sqlite::Stmt (i64, text, opt_int, opt_i64, opt_text by column).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/catalog/jobs.hpp"
#include "wheelforge/core/binding.hpp"
#include "wheelforge/core/wheel_variant.hpp"
#include "wheelforge/util/strings.hpp"
#include "wheelforge/util/time.hpp"

namespace wf::catalog::detail {

/// The columns read_file_row() reads, in its order (files f JOIN projects p).
extern const char* const kFileColumns;
/// How many columns kFileColumns selects: a query that selects more after them reads those
/// from this index on.
constexpr int kFileColumnCount = 33;

// Bumped when the label parser learns something new, so that stored hints are recomputed.
constexpr std::int64_t kHintsVersion = 1;

inline std::string_view backend_name(core::Backend b) {
  switch (b) {
    case core::Backend::none:
      return "none";
    case core::Backend::cuda:
      return "cuda";
    case core::Backend::cpu:
      return "cpu";
    case core::Backend::rocm:
      return "rocm";
  }
  return "none";
}

inline core::Backend parse_backend(std::string_view s) {
  if (s == "cuda") return core::Backend::cuda;
  if (s == "cpu") return core::Backend::cpu;
  if (s == "rocm") return core::Backend::rocm;
  return core::Backend::none;
}

/// A file row selected with kFileColumns.
template <class Row>
core::FileRecord file_from_row(const Row& s) {
  core::FileRecord f;
  f.id = s.i64(0);
  f.filename = s.text(1);
  f.project = s.text(2);
  f.version = s.text(3);
  f.kind = s.text(4) == "sdist" ? core::DistKind::sdist : core::DistKind::wheel;
  f.sha256 = s.text(5);
  f.size = static_cast<std::uint64_t>(s.i64(6));
  f.upload_time = s.i64(7);
  f.requires_python = s.opt_text(8);
  f.metadata_sha256 = s.text(9);
  f.metadata_size = static_cast<std::uint64_t>(s.i64(10));
  if (s.i64(11) != 0) f.yanked = s.opt_text(12).value_or("");
  f.tags.build_tag = s.opt_text(13);
  f.tags.python_tag = s.text(14);
  f.tags.abi_tag = s.text(15);
  f.tags.platform_tag = s.text(16);
  core::VariantHints& h = f.hints;
  h.backend = parse_backend(s.text(17));
  h.cuda_major = s.opt_int(18);
  h.cuda_minor = s.opt_int(19);
  h.rocm_major = s.opt_int(20);
  h.rocm_minor = s.opt_int(21);
  if (const auto major = s.opt_int(22), minor = s.opt_int(23); major && minor) {
    h.torch = core::TorchSeries{*major, *minor};
  }
  if (const auto abi = s.opt_int(24)) h.cxx11_abi = *abi != 0;
  const std::string extra = s.text(25);
  for (const auto part : split(extra, '.')) {
    if (!part.empty()) h.extra.emplace_back(part);
  }
  f.damaged = s.i64(26) != 0;
  f.uploaded_by = s.text(27);
  f.uploaded_by_token = s.opt_i64(28).value_or(0);
  if (const auto binaries = s.opt_text(29)) f.binaries = core::decode_findings(*binaries);
  if (const auto variant = s.opt_text(30)) {
    f.variant = core::decode_variant(*variant);
    if (f.variant) f.tags.variant_label = f.variant->label;
  }
  f.provenance_sha256 = s.text(31);
  f.provenance_size = static_cast<std::uint64_t>(s.i64(32));
  return f;
}

/// A token row selected with the token columns (id, hash, scope, project, description,
/// created_at, revoked_at, expires_at, last_used_at, created_by, publisher_id).
template <class Row>
TokenRecord token_from_row(const Row& s) {
  TokenRecord t;
  t.id = s.i64(0);
  t.hash = s.text(1);
  t.scope = parse_scope(s.text(2)).value_or(Scope::read);
  t.project = s.opt_text(3);
  t.description = s.text(4);
  t.created_at = s.i64(5);
  t.revoked = s.opt_text(6).has_value();
  t.expires_at = s.opt_i64(7);
  t.last_used_at = s.opt_i64(8);
  t.created_by = s.text(9);
  t.publisher_id = s.opt_i64(10).value_or(0);
  return t;
}

/// A job row selected with the job columns, and a build row (id, recipe, version, force,
/// yank_superseded, created_at).
template <class Row>
JobRecord job_from_row(const Row& q) {
  JobRecord j;
  j.id = q.i64(0);
  j.build_id = q.i64(1);
  j.recipe = q.text(2);
  j.version = q.text(3);
  j.cell.python = q.text(4);
  j.cell.torch = core::parse_torch_series(q.text(5)).value_or(core::TorchSeries{});
  j.cell.cuda = core::parse_cuda_version(q.text(6)).value_or(core::CudaVersion{});
  j.state = core::parse_job_state(q.text(7)).value_or(core::JobState::failed);
  j.reason = q.text(8);
  j.attempts = static_cast<int>(q.i64(9));
  j.max_jobs = static_cast<unsigned>(q.i64(10));
  j.nvcc_threads = static_cast<unsigned>(q.i64(11));
  j.wheel = q.text(12);
  j.created_at = q.i64(13);
  j.started_at = q.opt_i64(14);
  j.finished_at = q.opt_i64(15);
  j.toolchain.nvcc = q.text(16);
  j.toolchain.nvcc_version = q.text(17);
  j.toolchain.torch_version = q.text(18);
  j.toolchain.torch_cuda = q.text(19);
  j.toolchain.python = q.text(20);
  j.toolchain.python_version = q.text(21);
  j.build_number = static_cast<std::uint64_t>(q.i64(22));
  j.glibc_floor = q.text(23);
  j.executor_job = q.text(24);
  j.provenance.image = q.text(25);
  j.provenance.image_digest = q.text(26);
  j.provenance.engine_command = q.text(27);
  j.claimed_by = q.text(28);
  j.lease_expires_at = q.opt_i64(29);
  return j;
}

template <class Row>
BuildRecord build_from_row(const Row& q) {
  return BuildRecord{q.i64(0), q.text(1), q.text(2), q.i64(3) != 0, q.i64(4) != 0, q.i64(5)};
}

/// The audit trail's target for a token: "token #ID".
inline std::string token_target(std::int64_t id) {
  return "token #" + std::to_string(id);
}

/// What a token's audit entry says about it (never the secret, nor its hash).
inline std::string token_detail(const TokenRecord& t) {
  std::string d = "scope=" + std::string(scope_name(t.scope));
  if (t.project) d += " project=" + *t.project;
  if (t.expires_at) d += " expires=" + iso8601_micros(*t.expires_at);
  if (!t.description.empty()) d += " description=" + t.description;
  return d;
}

/// The columns publisher_from_row() reads, in its order.
inline constexpr const char* kPublisherColumns =
    "id, project, issuer, claims, description, created_at, created_by";

/// A trusted_publishers row (kPublisherColumns).
template <class Row>
PublisherRecord publisher_from_row(const Row& q) {
  return PublisherRecord{q.i64(0),  q.text(1), q.text(2), decode_claims(q.text(3)),
                         q.text(4), q.i64(5),  q.text(6)};
}

/// The audit trail's target for a publisher: "publisher #ID".
inline std::string publisher_target(std::int64_t id) {
  return "publisher #" + std::to_string(id);
}

/// What a publisher's audit entry says about it: its issuer and claims.
inline std::string publisher_detail(const PublisherRecord& p) {
  std::string d = "issuer=" + p.issuer;
  for (const auto& [k, v] : p.claims) d += " " + k + "=" + v;
  if (!p.description.empty()) d += " description=" + p.description;
  return d;
}

/// The record insert_file() returns with InsertOutcome::reserved: the deleted file whose
/// name (and bytes) the new one would take.
inline core::FileRecord reserved_record(const DeletedFile& d) {
  core::FileRecord r;
  r.filename = d.filename;
  r.project = d.project;
  r.sha256 = d.sha256;
  return r;
}

}  // namespace wf::catalog::detail
