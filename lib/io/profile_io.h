#pragma once
// The GPU profile file (hetrl.profile/v1), as hetrl-profile writes it:
//
//   {"schema": "hetrl.profile/v1", "gpu_type": "A100-SXM-80G",
//    "device_name": "NVIDIA A100-SXM4-80GB", "host": "node-17",
//    "measurements": {"gemm_large_tflops": 218, "gemm_small_tflops": 205,
//                     "memory_bandwidth_gb_per_s": 1530,
//                     "intra_node_bandwidth_gb_per_s": 240, "allreduce_bus_gb_per_s": 170}}
//
// Every measurement is optional; those present replace the catalogue's figures.

#include <string>
#include <string_view>

#include "hw/profile.h"

namespace hetrl::io {

hw::GpuProfile parse_profile(std::string_view text, std::string_view file);
hw::GpuProfile read_profile(const std::string& path);

}  // namespace hetrl::io
