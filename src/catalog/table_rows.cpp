// TableRows: the backend-neutral rows of export_rows() and import_rows().

#include <cstddef>
#include <optional>
#include <string_view>

#include "wheelforge/catalog/catalog.hpp"

namespace wf::catalog {

std::optional<std::size_t> TableRows::column(std::string_view name) const {
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == name) return i;
  }
  return std::nullopt;
}

}  // namespace wf::catalog
