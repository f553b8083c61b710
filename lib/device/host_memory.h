#pragma once
// Host memory in large pages: the cpu backend's device memory and the host messages processes
// hand each other (Communicator::post).
//
// A block of half a huge page (1 MiB) or more is mapped on its own, on whole huge pages (2
// MiB), with the kernel's transparent huge pages advised for it (a hint: where the kernel has
// none, small pages), as a GPU maps its memory in large pages and a GPU host stages its
// transfers in pinned memory. On 4 KiB pages a stream over a large buffer misses the TLB every
// 4 KiB (under a hypervisor each miss walks two page tables) and a transfer between processes
// pins the sender's pages one at a time. On a 2-core VM, in stand-alone programs (two runs of
// each): six pairs of 89 MiB buffers allocated together and copied 12 times each in turn took
// 7.3-9.8 ms a copy by pair (medians) on small pages, 6.3-6.9 on huge pages; 148.6 MB sent as
// 18 MPI_Isend messages to another process's huge-page buffers (Open MPI) moved at 4.6-4.8
// GB/s from small pages, 11.9-12.4 from huge pages; the calibration actor's 29 tensors (148.6
// MB, the 16 of 1.6 MB and 0.23 MB on small pages in both processes, the rest on huge pages)
// took 14.0-15.6 ms, 11.6-12.9 with every tensor on whole huge pages (medians of 8, 5 runs of
// each). A block rounded up to whole huge pages holds at most 2 MiB it was not asked for (the
// memory counted is what was asked). Smaller blocks come from the C library.

#include <cstddef>
#include <new>
#include <vector>

namespace hetrl::device {

inline constexpr std::size_t kHugePage = std::size_t{2} << 20;
inline constexpr std::size_t kWholeHugePagesFrom = kHugePage / 2;

// Every block's alignment, and the least it holds.
inline constexpr std::size_t kHostAlign = 64;

// `bytes` rounded up to whole kHostAlign (at least one).
constexpr std::size_t host_aligned_bytes(std::size_t bytes) noexcept {
  return bytes < kHostAlign ? kHostAlign : (bytes + kHostAlign - 1) / kHostAlign * kHostAlign;
}

// The bytes a block of `bytes` holds: whole huge pages from kWholeHugePagesFrom up, else
// host_aligned_bytes.
constexpr std::size_t host_block_bytes(std::size_t bytes) noexcept {
  if (bytes >= kWholeHugePagesFrom) return (bytes + kHugePage - 1) / kHugePage * kHugePage;
  return host_aligned_bytes(bytes);
}

// `bytes` of host memory aligned to 64 bytes (on whole huge pages from kWholeHugePagesFrom up),
// or null where the host has none left; give it back with free_host(p, bytes), the same `bytes`.
void* allocate_host(std::size_t bytes) noexcept;
void free_host(void* p, std::size_t bytes) noexcept;

// A standard allocator over allocate_host, for host buffers that are streamed or sent.
template <typename T>
struct HostAllocator {
  using value_type = T;
  HostAllocator() = default;
  template <typename U>
  HostAllocator(const HostAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n > static_cast<std::size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    void* p = allocate_host(n * sizeof(T));
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept { free_host(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const HostAllocator<U>&) const noexcept {
    return true;
  }
};

// The bytes of a host message between processes.
using HostBytes = std::vector<std::byte, HostAllocator<std::byte>>;

}  // namespace hetrl::device
