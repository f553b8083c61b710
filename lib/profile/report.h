#pragma once
// A profile as a table: each fitted figure measured, beside a reference when one is given (what
// the catalogue's datasheet and efficiencies expect of a GPU type, or another profile) and the
// ratio of the two; then the GEMM curve, the collectives and the device-to-device matrix.

#include <string>

#include "hw/profile.h"

namespace hetrl::profile {

struct Reference {
  const hw::GpuProfile* profile = nullptr;  // null: no reference column
  std::string column = "datasheet";         // the column's heading
  std::string described;                    // e.g. "the datasheet of L4", "other.json"
};

std::string format_profile_table(const hw::GpuProfile& measured, const Reference& reference = {});

}  // namespace hetrl::profile
