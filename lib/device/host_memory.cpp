#include "device/host_memory.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>

namespace hetrl::device {

void* allocate_host(std::size_t bytes) noexcept {
  const std::size_t length = host_block_bytes(bytes);
  if (bytes < kWholeHugePagesFrom) return std::aligned_alloc(kHostAlign, length);
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
  if (bytes < kWholeHugePagesFrom) {
    std::free(p);
  } else {
    munmap(p, host_block_bytes(bytes));
  }
}

}  // namespace hetrl::device
