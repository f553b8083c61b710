#pragma once
// Device profile files, as hetrl-profile writes them. Version 2 (written) keeps the machine,
// the settings, every raw measurement and the fitted figures:
//
//   {"schema": "hetrl.profile/v2", "generator": {...}, "gpu_type": "H200", "host": "node-17",
//    "device": {"backend": "cuda", "name": "NVIDIA H200", "count": 1, "memory_gib": 139.8,
//               "compute_units": 132, "driver": "...", "runtime": "..."},
//    "settings": {"quick": false, "dtype": "bf16", "repeats": 5},
//    "measurements": {"launch": {...}, "gemm": [...], "memory": [...], "attention": [...],
//                     "collectives": [...]},
//    "fitted": {"gemm_large_tflops": 710, "gemm_small_tflops": 520, "fp32_tflops": 51,
//               "gemm_curve": [{"tokens": 1, "tflops": 9.5}, ...],
//               "gemm_curves": [{"width": 1024, "gemm_curve": [...]}, ...],
//               "memory_bandwidth_gb_per_s": 4100, "launch_overhead_us": 4.1, ...}}
//
// Times are in milliseconds (launch overhead in microseconds), each as the median, minimum and
// maximum over the repeats. Version 1 (read) has only the fitted figures, under
// "measurements". Every figure is optional; those present replace the catalogue's.

#include <string>
#include <string_view>

#include "hw/profile.h"

namespace hetrl::io {

hw::GpuProfile parse_profile(std::string_view text, std::string_view file);
hw::GpuProfile read_profile(const std::string& path);

// The profile as hetrl.profile/v2 JSON.
std::string profile_to_json(const hw::GpuProfile& profile);

}  // namespace hetrl::io
