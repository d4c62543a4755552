// The SQLite catalog's export and import of whole tables (`wheelforge migrate`).

#include <charconv>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "catalog/sqlite_catalog_impl.hpp"
#include "catalog/table_export.hpp"

namespace wf::catalog::detail {

namespace {

using Values = std::vector<std::optional<std::string>>;

// Binds a value as its column takes it: an integer column's decimal text as an integer.
void bind_value(Stmt& s, int index, const ExportColumn& column,
                const std::optional<std::string>& value) {
  if (!value) {
    s.bind_null(index);
    return;
  }
  if (column.integer) {
    std::int64_t v = 0;
    const char* end = value->data() + value->size();
    const auto [ptr, ec] = std::from_chars(value->data(), end, v);
    if (ec == std::errc() && ptr == end) {
      s.bind(index, v);
      return;
    }
  }
  s.bind(index, *value);
}

}  // namespace

Result<std::vector<TableRows>> SqliteCatalog::export_rows() {
  std::lock_guard lock(mu_);
  return db_.read_transaction([&]() -> Result<std::vector<TableRows>> {
    std::vector<TableRows> out;
    for (const auto& table : export_tables()) {
      TableRows rows;
      rows.table = std::string(table.name);
      for (const auto& c : table.columns) rows.columns.emplace_back(c.name);
      const std::string sql = "SELECT " + table.column_list() + " FROM " + std::string(table.name) +
                              " ORDER BY " + std::string(table.key);
      Stmt s(db_, sql);
      if (!s.valid()) return db_.error("prepare the export of " + rows.table);
      int rc = SQLITE_OK;
      while ((rc = s.step()) == SQLITE_ROW) {
        Values row;
        row.reserve(table.columns.size());
        for (std::size_t i = 0; i < table.columns.size(); ++i) {
          row.push_back(s.opt_text(static_cast<int>(i)));
        }
        rows.rows.push_back(std::move(row));
      }
      if (rc != SQLITE_DONE) return db_.error("export " + rows.table);
      out.push_back(std::move(rows));
    }
    return out;
  });
}

Result<ImportCounts> SqliteCatalog::import_rows(const TableRows& rows) {
  auto checked = checked_import(rows);
  if (!checked) return checked.error();
  const ExportTable& table = **checked;
  const std::size_t key = table.key_index();
  const std::string name(table.name);
  const std::string select = "SELECT " + table.column_list() + " FROM " + name + " WHERE " +
                             std::string(table.key) + " = ?";
  std::string insert = "INSERT INTO " + name + " (" + table.column_list() + ") VALUES (";
  for (std::size_t i = 0; i < table.columns.size(); ++i) insert += i == 0 ? "?" : ", ?";
  insert += ")";
  std::lock_guard lock(mu_);
  return db_.write_transaction(
      [&]() -> Result<ImportCounts> {
        ImportCounts counts;
        for (const auto& row : rows.rows) {
          const std::string key_text = row[key].value_or("NULL");
          {
            Stmt s(db_, select);
            if (!s.valid()) return db_.error("prepare the import into " + name);
            bind_value(s, 1, table.columns[key], row[key]);
            const int rc = s.step();
            if (rc == SQLITE_ROW) {
              Values stored;
              for (std::size_t i = 0; i < table.columns.size(); ++i) {
                stored.push_back(s.opt_text(static_cast<int>(i)));
              }
              if (const auto diff = first_difference(stored, row)) {
                return row_conflict(table, key_text, *diff);
              }
              ++counts.skipped;
              continue;
            }
            if (rc != SQLITE_DONE) return db_.error("read " + name);
          }
          Stmt ins(db_, insert);
          if (!ins.valid()) return db_.error("prepare the import into " + name);
          for (std::size_t i = 0; i < table.columns.size(); ++i) {
            bind_value(ins, static_cast<int>(i + 1), table.columns[i], row[i]);
          }
          if (ins.step() != SQLITE_DONE) {
            auto e = db_.error("import into " + name + " (" + std::string(table.key) + " " +
                               key_text + ")");
            if (sqlite3_extended_errcode(db_.get()) == SQLITE_CONSTRAINT_UNIQUE) {
              e.code = Errc::conflict;
            }
            return e;
          }
          ++counts.inserted;
        }
        return counts;
      },
      [](const auto&) { return true; });
}

}  // namespace wf::catalog::detail
