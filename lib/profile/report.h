#pragma once
// A profile as a table: each fitted figure measured, beside what the catalogue's datasheet and
// efficiencies expect of a GPU type when one is given, and their ratio; then the GEMM curve.

#include <string>

#include "hw/profile.h"

namespace hetrl::profile {

// `datasheet` may be null (a device the catalogue does not know, and no type to compare with).
std::string format_profile_table(const hw::GpuProfile& measured, const hw::GpuProfile* datasheet);

}  // namespace hetrl::profile
