// Choosing a backend by name: the ones built, auto's fallback, and the errors users see.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "device/backend.h"
#include "device/host_memory.h"

namespace hetrl::device {
namespace {

TEST_CASE("backends: cpu is always built and describes the host") {
  const std::vector<std::string> built = built_backends();
  CHECK(std::find(built.begin(), built.end(), "cpu") != built.end());
  const auto b = make_backend("cpu");
  CHECK(b->info().backend == "cpu");
  CHECK(b->info().memory > 0);
  CHECK(b->info().compute_units >= 1);
  CHECK(b->info().runtime.rfind("OpenBLAS", 0) == 0);
}

TEST_CASE("backends: the cpu's processes under a launcher share the host's memory, each its part") {
  // A process alone, then as Open MPI describes the second of two processes on this host.
  const char* names[] = {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                         "OMPI_COMM_WORLD_LOCAL_RANK"};
  const char* values[] = {"2", "1", "2", "1"};
  std::vector<std::string> kept;
  for (const char* name : names) {
    kept.emplace_back(std::getenv(name) ? std::getenv(name) : "");
    unsetenv(name);
  }
  const double alone = make_backend("cpu")->info().memory;
  for (int i = 0; i < 4; ++i) setenv(names[i], values[i], 1);
  const double shared = make_backend("cpu")->info().memory;
  for (int i = 0; i < 4; ++i) {
    if (kept[static_cast<std::size_t>(i)].empty()) {
      unsetenv(names[i]);
    } else {
      setenv(names[i], kept[static_cast<std::size_t>(i)].c_str(), 1);
    }
  }
  CHECK(shared == doctest::Approx(alone / 2));
}

TEST_CASE("backends: the cpu keeps a released large block for the next allocation of its size") {
  const auto b = make_backend("cpu");
  constexpr std::size_t kLarge = std::size_t{4} << 20;
  void* first = nullptr;
  {
    const Buffer block(*b, kLarge);
    first = block.data();
    b->fill_zero(block.data(), kLarge);
  }
  Buffer again(*b, kLarge);
  CHECK(again.data() == first);  // the same pages, not faulted in anew
  const Buffer other(*b, kLarge);
  CHECK(other.data() != first);  // a block is handed out once
  b->fill_zero(other.data(), kLarge);
  void* kept = again.data();
  again = Buffer();                     // released: kept for the next block of its size
  const Buffer larger(*b, 2 * kLarge);  // the kept block is too small for it
  CHECK(larger.data() != kept);
  b->fill_zero(larger.data(), 2 * kLarge);
}

TEST_CASE("backends: the cpu hands a kept block to any request its huge pages hold, up to an eighth more, counting what was asked") {
  const auto b = make_backend("cpu");
  const auto kept_block = [&](std::size_t bytes) {
    const Buffer block(*b, bytes);
    b->fill_zero(block.data(), bytes);
    return block.data();
  };
  // 4 MiB and 64 bytes spans three huge pages: so do 5 MiB and 1 MiB and 64 bytes over two.
  void* three = kept_block(2 * kHugePage + 64);
  const std::size_t before = b->memory_in_use();
  {
    const Buffer same_pages(*b, 2 * kHugePage + kHugePage / 2);
    CHECK(same_pages.data() == three);
    CHECK(b->memory_in_use() - before == 2 * kHugePage + kHugePage / 2);  // as asked, not the pages held
  }
  {
    // Two huge pages asked for: the three-page block is half as large again, too large.
    const Buffer two(*b, 2 * kHugePage);
    CHECK(two.data() != three);
  }
  // Eight huge pages kept: a request of seven and a half (eight pages) takes them, one of seven
  // (an eighth of seven is less than a page) does not.
  void* eight = kept_block(8 * kHugePage);
  {
    const Buffer seven(*b, 7 * kHugePage);
    CHECK(seven.data() != eight);
    b->fill_zero(seven.data(), seven.bytes());
  }
  {
    const Buffer nearly(*b, 7 * kHugePage + kHugePage / 2);
    CHECK(nearly.data() == eight);
  }
  // Seventeen huge pages asked for: eighteen kept are within an eighth, and taken.
  void* eighteen = kept_block(18 * kHugePage);
  const Buffer seventeen(*b, 17 * kHugePage);
  CHECK(seventeen.data() == eighteen);
  CHECK(b->memory_in_use() - before == 17 * kHugePage);
}

// The mapping of this process that holds `p`: where it ends and its flags (/proc/self/smaps'
// VmFlags line); an end of 0 and no flags where none does.
struct Mapping {
  std::uintptr_t end = 0;
  std::string flags;
};
Mapping mapping_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  Mapping found;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t first = 0, end = 0;
    char dash = 0;
    if (std::istringstream range(line); range >> std::hex >> first >> dash >> end && dash == '-') {
      if (!found.flags.empty()) break;
      found.end = first <= at && at < end ? end : 0;
    } else if (found.end != 0 && line.rfind("VmFlags:", 0) == 0) {
      found.flags = line;
    }
  }
  return found;
}

TEST_CASE("backends: the cpu maps a block of half a huge page or more on whole huge pages, marked for huge pages") {
  const auto b = make_backend("cpu");
  const Buffer large(*b, 3 * kHugePage + 4096), half(*b, kHugePage / 2 + 64);
  b->fill_zero(large.data(), large.bytes());
  b->fill_zero(half.data(), half.bytes());
  CHECK(reinterpret_cast<std::uintptr_t>(large.data()) % kHugePage == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(half.data()) % kHugePage == 0);
  // Where the kernel has transparent huge pages at all, the mapping carries their advice.
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(thp, modes);
  if (!modes.empty() && modes.find("[never]") == std::string::npos) {
    CHECK(mapping_of(large.data()).flags.find(" hg") != std::string::npos);
    // The half block's mapping holds the whole huge page.
    const Mapping whole = mapping_of(half.data());
    CHECK(whole.flags.find(" hg") != std::string::npos);
    CHECK(whole.end >= reinterpret_cast<std::uintptr_t>(half.data()) + kHugePage);
    // A smaller block stays with the C library, without the advice.
    const Buffer small(*b, kHugePage / 4);
    CHECK(mapping_of(small.data()).flags.find(" hg") == std::string::npos);
  }
}

TEST_CASE("backends: OpenBLAS's generic kernels give way to the CPU's vector units, nothing else does") {
  const CpuFeatures avx512{true, true}, avx2{true, false}, neither{};
  // Its fallback for a CPU model it does not know, in any case.
  CHECK(better_blas_core("Prescott", avx512) == "SkylakeX");
  CHECK(better_blas_core("PRESCOTT", avx2) == "Haswell");
  CHECK(better_blas_core("Prescott", neither).empty());
  // A choice of its own for a model it knows stands, whatever the CPU has.
  CHECK(better_blas_core("Haswell", avx512).empty());
  CHECK(better_blas_core("Zen", avx2).empty());
  CHECK(better_blas_core("", avx512).empty());
  // AVX-512 implies AVX2 on every CPU that has it.
  const CpuFeatures here = cpu_features();
  CHECK((!here.avx512 || here.avx2_fma));
}

TEST_CASE("backends: an unknown name is an input error with the closest name") {
  try {
    (void)make_backend("cdua");
    FAIL("no error");
  } catch (const core::InputError& e) {
    CHECK(std::string(e.what()) == "unknown backend \"cdua\" (did you mean \"cuda\"?); known: auto, cpu, cuda");
  }
}

TEST_CASE("backends: auto falls back to the cpu without a CUDA device, cuda then fails with the reason") {
#if defined(HETRL_HAVE_CUDA)
  const bool has_gpu = cuda_device_count() > 0;
#else
  const bool has_gpu = false;
#endif
  const auto b = make_backend("auto");
  CHECK(b->info().backend == (has_gpu ? "cuda" : "cpu"));
  if (!has_gpu) {
    try {
      (void)make_backend("cuda");
      FAIL("no error");
    } catch (const DeviceError& e) {
#if defined(HETRL_HAVE_CUDA)
      CHECK(std::string(e.what()) == "cuda: no CUDA device is present");
#else
      CHECK(std::string(e.what()) == "cuda: this build has no CUDA backend (built without the CUDA toolkit)");
#endif
    }
  }
}

}  // namespace
}  // namespace hetrl::device
