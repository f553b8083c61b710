#include "io/profile_io.h"

#include "core/error.h"
#include "core/units.h"
#include "io/files.h"
#include "io/json_reader.h"

namespace hetrl::io {

hw::GpuProfile parse_profile(std::string_view text, std::string_view file) {
  const detail::Json json = detail::parse_json(text, file);
  detail::ObjectReader root(json, std::string(file), "");
  detail::check_schema(root, "hetrl.profile/v1");
  detail::read_provenance(root);
  hw::GpuProfile profile;
  profile.gpu_type = root.string("gpu_type");
  profile.device_name = root.optional_string("device_name").value_or("");
  profile.host = root.optional_string("host").value_or("");
  detail::ObjectReader m = root.object("measurements");
  profile.gemm_large_flops = m.optional_quantity("gemm_large_tflops", core::kTflops);
  profile.gemm_small_flops = m.optional_quantity("gemm_small_tflops", core::kTflops);
  profile.memory_bandwidth = m.optional_quantity("memory_bandwidth_gb_per_s", core::kGBps);
  profile.intra_node_bandwidth = m.optional_quantity("intra_node_bandwidth_gb_per_s", core::kGBps);
  profile.allreduce_bus_bandwidth = m.optional_quantity("allreduce_bus_gb_per_s", core::kGBps);
  m.finish();
  root.finish();
  return profile;
}

hw::GpuProfile read_profile(const std::string& path) {
  return parse_profile(read_text_file(path), path);
}

}  // namespace hetrl::io
