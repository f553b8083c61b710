#pragma once
// Content hashes that identify the inputs a file was made from (a plan names the cluster and
// workload it was made for). FNV-1a, 64 bits, written as "fnv1a64:<16 hex digits>": an
// identity check, not a security measure.

#include <cstdint>
#include <string>
#include <string_view>

namespace hetrl::core {

std::uint64_t fnv1a64(std::string_view bytes);
std::string content_hash(std::string_view bytes);

}  // namespace hetrl::core
