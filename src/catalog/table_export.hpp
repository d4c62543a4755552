#pragma once
// The tables export_rows() and import_rows() move between catalogs (`wheelforge migrate`),
// private to the catalog module: both backends hold them with the same columns (the schema
// after SQLite's migrations, pg_schema.cpp's first migration), listed here once so that the
// two implementations read and write the same rows. A column added by a migration is added
// here too.

#include <algorithm>
#include <array>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wheelforge/catalog/catalog.hpp"
#include "wheelforge/util/result.hpp"

namespace wf::catalog::detail {

struct ExportColumn {
  std::string_view name;
  bool integer = false;  ///< an INTEGER/BIGINT column (SQLite binds it as one)
};

struct ExportTable {
  std::string_view name;
  std::string_view key;  ///< the primary key
  std::vector<ExportColumn> columns;
  /// The key is an identity column whose sequence must move past imported ids (PostgreSQL).
  [[nodiscard]] bool has_identity() const { return key == "id"; }
  [[nodiscard]] std::size_t key_index() const {
    for (std::size_t i = 0; i < columns.size(); ++i) {
      if (columns[i].name == key) return i;
    }
    return 0;
  }
  /// "a, b, c".
  [[nodiscard]] std::string column_list() const {
    std::string out;
    for (const auto& c : columns) {
      if (!out.empty()) out += ", ";
      out += c.name;
    }
    return out;
  }
};

/// The tables in the order an import must take them (references first).
inline const std::vector<ExportTable>& export_tables() {
  static const std::vector<ExportTable> tables = [] {
    auto cols = [](std::initializer_list<std::string_view> ints,
                   std::initializer_list<std::string_view> names) {
      std::vector<ExportColumn> out;
      for (const auto n : names) {
        out.push_back({n, std::find(ints.begin(), ints.end(), n) != ints.end()});
      }
      return out;
    };
    std::vector<ExportTable> t;
    t.push_back(
        {"tokens", "id",
         cols({"id", "created_at", "revoked_at", "expires_at", "last_used_at", "publisher_id"},
              {"id", "hash", "scope", "project", "description", "created_at", "revoked_at",
               "expires_at", "last_used_at", "created_by", "publisher_id"})});
    t.push_back(
        {"projects", "id",
         cols({"id", "created_at", "owner_token_id"},
              {"id", "name", "display_name", "created_at", "claimed_by", "owner_token_id"})});
    t.push_back(
        {"files", "id",
         cols({"id", "project_id", "size", "upload_time", "metadata_size", "yanked", "cuda_major",
               "cuda_minor", "rocm_major", "rocm_minor", "torch_major", "torch_minor", "cxx11_abi",
               "hints_version", "uploaded_by_token", "provenance_size"},
              {"id",
               "project_id",
               "filename",
               "version",
               "kind",
               "sha256",
               "size",
               "upload_time",
               "requires_python",
               "metadata_sha256",
               "metadata_size",
               "yanked",
               "yanked_reason",
               "build_tag",
               "python_tag",
               "abi_tag",
               "platform_tag",
               "requires_dist",
               "backend",
               "cuda_major",
               "cuda_minor",
               "rocm_major",
               "rocm_minor",
               "torch_major",
               "torch_minor",
               "cxx11_abi",
               "label_extra",
               "hints_version",
               "canonical",
               "uploaded_by",
               "uploaded_by_token",
               "binaries",
               "variant",
               "provenance_sha256",
               "provenance_size"})});
    t.push_back(
        {"deleted_files", "filename",
         cols({"deleted_at"}, {"filename", "project", "sha256", "deleted_at", "canonical"})});
    t.push_back({"damaged_blobs", "sha256", cols({"found_at"}, {"sha256", "detail", "found_at"})});
    t.push_back({"upstream_blobs", "sha256",
                 cols({"size", "stored_at", "last_used_at"},
                      {"sha256", "upstream", "filename", "size", "stored_at", "last_used_at"})});
    t.push_back(
        {"audit", "id",
         cols({"id", "at", "token_id"}, {"id", "at", "action", "token_id", "token_description",
                                         "origin", "address", "project", "target", "detail"})});
    t.push_back({"builds", "id",
                 cols({"id", "force", "yank_superseded", "created_at"},
                      {"id", "recipe", "version", "force", "yank_superseded", "created_at"})});
    t.push_back(
        {"jobs", "id",
         cols({"id", "build_id", "attempts", "max_jobs", "nvcc_threads", "created_at", "started_at",
               "finished_at", "build_number"},
              {"id",          "build_id",       "recipe",        "version",       "python",
               "torch",       "cuda",           "state",         "reason",        "attempts",
               "max_jobs",    "nvcc_threads",   "wheel",         "created_at",    "started_at",
               "finished_at", "nvcc_path",      "nvcc_version",  "torch_version", "torch_cuda",
               "python_path", "python_version", "glibc_floor",   "build_number",  "executor_job",
               "image",       "image_digest",   "engine_command"})});
    t.push_back({"trusted_publishers", "id",
                 cols({"id", "created_at"}, {"id", "project", "issuer", "claims", "description",
                                             "created_at", "created_by"})});
    // Exchanged OIDC token ids: a copy keeps refusing them until their tokens expire.
    t.push_back({"oidc_jtis", "jti", cols({"expires_at"}, {"jti", "expires_at"})});
    return t;
  }();
  return tables;
}

/// The table `rows` names, checked: Errc::invalid unless the catalog knows the table, its
/// columns are the ones listed, in order, and every row has one value per column.
inline Result<const ExportTable*> checked_import(const TableRows& rows) {
  const auto& tables = export_tables();
  const auto it = std::find_if(tables.begin(), tables.end(),
                               [&](const ExportTable& t) { return t.name == rows.table; });
  if (it == tables.end()) {
    return make_error(Errc::invalid, "import: no catalog table is named " + rows.table);
  }
  bool same = rows.columns.size() == it->columns.size();
  for (std::size_t i = 0; same && i < rows.columns.size(); ++i) {
    same = rows.columns[i] == it->columns[i].name;
  }
  if (!same) {
    return make_error(Errc::invalid, "import into " + rows.table +
                                         ": the columns are not the ones this catalog holds");
  }
  for (const auto& row : rows.rows) {
    if (row.size() != rows.columns.size()) {
      return make_error(Errc::invalid, "import into " + rows.table + ": a row has " +
                                           std::to_string(row.size()) + " values for " +
                                           std::to_string(rows.columns.size()) + " columns");
    }
  }
  return &*it;
}

/// The first column whose value differs between the stored row and the imported one, by
/// position; nullopt when they are equal.
inline std::optional<std::size_t> first_difference(
    const std::vector<std::optional<std::string>>& stored,
    const std::vector<std::optional<std::string>>& imported) {
  for (std::size_t i = 0; i < stored.size() && i < imported.size(); ++i) {
    if (stored[i] != imported[i]) return i;
  }
  return std::nullopt;
}

/// The conflict of a row present with other values.
inline Error row_conflict(const ExportTable& table, const std::string& key, std::size_t column) {
  return make_error(Errc::conflict, "table " + std::string(table.name) + ": the row " +
                                        std::string(table.key) + " " + key +
                                        " holds other values than the source's (column " +
                                        std::string(table.columns[column].name) + ")");
}

}  // namespace wf::catalog::detail
