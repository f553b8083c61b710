#pragma once
// A measured GPU profile (what hetrl-profile writes) and how it replaces datasheet figures.
// A profile gives achieved rates; against the catalogue's datasheet peaks they become the
// efficiency factors of that GPU type (measured / peak), and a measured GPU-to-GPU bandwidth
// replaces the intra-node link's. A rate above the datasheet peak means the profile names
// the wrong GPU type, and is an error.

#include <optional>
#include <string>

#include "hw/gpu.h"

namespace hetrl::hw {

struct GpuProfile {
  std::string gpu_type;
  std::string device_name;
  std::string host;
  std::optional<double> gemm_large_flops;         // FLOP/s, GEMMs of >= 2048 tokens
  std::optional<double> gemm_small_flops;         // FLOP/s, GEMMs of about 256 tokens
  std::optional<double> memory_bandwidth;         // bytes/s
  std::optional<double> intra_node_bandwidth;     // bytes/s per direction, GPU to GPU
  std::optional<double> allreduce_bus_bandwidth;  // bytes/s, NCCL bus bandwidth
};

// `source` names the profile in the override (e.g. its file name and hash).
GpuTypeOverride override_from_profile(const GpuProfile& profile, const Catalog& catalog,
                                      const std::string& source);

// Merges `later` into `earlier` (same GPU type): fields `later` sets win.
void merge_override(GpuTypeOverride& earlier, const GpuTypeOverride& later);

}  // namespace hetrl::hw
