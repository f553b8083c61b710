#include "device/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace hetrl::device {
namespace {

constexpr std::size_t kAlign = 64;

std::size_t page_rounded(std::size_t bytes) noexcept {
  static const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

void* allocate_host(std::size_t bytes) noexcept {
  if (bytes < kHugePage) return std::aligned_alloc(kAlign, std::max(kAlign, (bytes + kAlign - 1) / kAlign * kAlign));
  const std::size_t length = page_rounded(bytes);
  void* raw = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  // The mapping is a huge page longer than asked: the part before the first boundary in it and
  // the part after the block go back.
  const auto first = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t start = (first + kHugePage - 1) / kHugePage * kHugePage;
  const std::uintptr_t end = start + length;
  if (start > first) munmap(raw, start - first);
  if (first + length + kHugePage > end) munmap(reinterpret_cast<void*>(end), first + length + kHugePage - end);
  void* block = reinterpret_cast<void*>(start);
  madvise(block, length, MADV_HUGEPAGE);
  return block;
}

void free_host(void* p, std::size_t bytes) noexcept {
  if (!p) return;
  if (bytes < kHugePage) {
    std::free(p);
  } else {
    munmap(p, page_rounded(bytes));
  }
}

}  // namespace hetrl::device
