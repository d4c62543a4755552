#include "wheelforge/util/result.hpp"

namespace wf {

Error Problems::to_error(Errc code) const {
  std::string message;
  for (const auto& p : list_) {
    if (!message.empty()) message += "; ";
    message += p;
  }
  return Error{code, std::move(message)};
}

}  // namespace wf
