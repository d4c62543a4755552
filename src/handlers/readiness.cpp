#include "wheelforge/handlers/context.hpp"

namespace wf::handlers {

bool Readiness::record(Part part, const Status& looked) {
  std::lock_guard lock(mu_);
  std::string& slot = part == Part::catalog ? catalog_ : blob_store_;
  std::string now = looked ? std::string() : looked.error().message;
  // One line each (libpq's messages span several); an empty message still means "failed".
  for (char& c : now) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (!looked && now.empty()) now = "unreachable";
  const bool changed = slot.empty() != now.empty();
  slot = std::move(now);
  return changed;
}

std::string Readiness::problems() const {
  std::lock_guard lock(mu_);
  std::string out;
  if (!catalog_.empty()) out += "catalog: " + catalog_ + "\n";
  if (!blob_store_.empty()) out += "blob store: " + blob_store_ + "\n";
  return out;
}

bool Readiness::reachable(Part part) const {
  std::lock_guard lock(mu_);
  return (part == Part::catalog ? catalog_ : blob_store_).empty();
}

}  // namespace wf::handlers
