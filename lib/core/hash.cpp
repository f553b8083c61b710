#include "core/hash.h"

#include <fmt/format.h>

namespace hetrl::core {

std::uint64_t fnv1a64(std::string_view bytes) {
  std::uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string content_hash(std::string_view bytes) {
  return fmt::format("fnv1a64:{:016x}", fnv1a64(bytes));
}

}  // namespace hetrl::core
