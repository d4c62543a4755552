// The PostgreSQL catalog's export and import of whole tables (`wheelforge migrate`).

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "catalog/pg_catalog_impl.hpp"
#include "catalog/table_export.hpp"

namespace wf::catalog::detail {

namespace {

using Values = std::vector<std::optional<std::string>>;

Values row_values(const pg::Rows& rows, int row, std::size_t columns) {
  Values out;
  out.reserve(columns);
  for (std::size_t i = 0; i < columns; ++i) out.push_back(rows.opt_text(row, static_cast<int>(i)));
  return out;
}

}  // namespace

Result<std::vector<TableRows>> PgCatalog::export_rows() {
  std::lock_guard lock(mu_);
  return conn_->read_transaction([&]() -> Result<std::vector<TableRows>> {
    std::vector<TableRows> out;
    for (const auto& table : export_tables()) {
      TableRows rows;
      rows.table = std::string(table.name);
      for (const auto& c : table.columns) rows.columns.emplace_back(c.name);
      auto got = conn_->exec("export " + rows.table, "SELECT " + table.column_list() + " FROM " +
                                                         rows.table + " ORDER BY " +
                                                         std::string(table.key));
      if (!got) return got.error();
      for (int r = 0; r < got->size(); ++r) {
        rows.rows.push_back(row_values(*got, r, table.columns.size()));
      }
      out.push_back(std::move(rows));
    }
    return out;
  });
}

Result<ImportCounts> PgCatalog::import_rows(const TableRows& rows) {
  auto checked = checked_import(rows);
  if (!checked) return checked.error();
  const ExportTable& table = **checked;
  const std::size_t key = table.key_index();
  const std::string name(table.name);
  const std::string select = "SELECT " + table.column_list() + " FROM " + name + " WHERE " +
                             std::string(table.key) + " = $1";
  std::string insert = "INSERT INTO " + name + " (" + table.column_list() + ") VALUES (";
  for (std::size_t i = 0; i < table.columns.size(); ++i) {
    insert += (i == 0 ? "$" : ", $") + std::to_string(i + 1);
  }
  insert += ")";
  std::lock_guard lock(mu_);
  return conn_->write_transaction(
      [&]() -> Result<ImportCounts> {
        ImportCounts counts;
        for (const auto& row : rows.rows) {
          const std::string key_text = row[key].value_or("NULL");
          auto found = conn_->exec("read " + name, select, pg::Params().add(row[key]));
          if (!found) return found.error();
          if (!found->empty()) {
            if (const auto diff =
                    first_difference(row_values(*found, 0, table.columns.size()), row)) {
              return row_conflict(table, key_text, *diff);
            }
            ++counts.skipped;
            continue;
          }
          pg::Params params;
          for (const auto& v : row) params.add(v);
          auto ins = conn_->exec(
              "import into " + name + " (" + std::string(table.key) + " " + key_text + ")", insert,
              params);
          if (!ins) return ins.error();
          ++counts.inserted;
        }
        if (table.has_identity() && counts.inserted > 0) {
          // Ids were given: the identity's sequence moves past them, so that rows written
          // later get new ones.
          auto moved = conn_->exec("move the id sequence of " + name,
                                   "SELECT setval(pg_get_serial_sequence('" + name +
                                       "', 'id'), COALESCE(MAX(id), 0) + 1, false) FROM " + name);
          if (!moved) return moved.error();
        }
        return counts;
      },
      [](const auto&) { return true; });
}

}  // namespace wf::catalog::detail
