#include "spread.hpp"

namespace wf::http {

std::size_t choose_thread(std::span<const ThreadLoad> threads, std::size_t pack) {
  std::size_t fewest = 0;
  for (std::size_t i = 0; i < threads.size(); ++i) {
    if (threads[i].connections < pack && !threads[i].busy) return i;
    if (threads[i].connections < threads[fewest].connections) fewest = i;
  }
  return fewest;
}

}  // namespace wf::http
