#include "device/backend.h"

#include "core/error.h"

namespace hetrl::device {

const char* purpose_name(Purpose purpose) {
  switch (purpose) {
    case Purpose::kWeights: return "weights";
    case Purpose::kGradients: return "gradients";
    case Purpose::kOptimizer: return "optimizer";
    case Purpose::kActivations: return "activations";
    case Purpose::kKvCache: return "kv_cache";
    case Purpose::kWorkspace: return "workspace";
    case Purpose::kCommunication: return "communication";
    case Purpose::kOther: return "other";
  }
  return "other";
}

std::vector<std::string> built_backends() {
#if defined(HETRL_HAVE_CUDA)
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

std::unique_ptr<Backend> make_backend(const std::string& name, int index) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "cuda" || name == "auto") {
#if defined(HETRL_HAVE_CUDA)
    const int devices = cuda_device_count();
    if (devices > 0) {
      if (index < 0 || index >= devices) {
        throw DeviceError("cuda: no device " + std::to_string(index) + " (" + std::to_string(devices) + " present)");
      }
      return make_cuda_backend(index);
    }
    if (name == "cuda") throw DeviceError("cuda: no CUDA device is present");
#else
    (void)index;
    if (name == "cuda") throw DeviceError("cuda: this build has no CUDA backend (built without the CUDA toolkit)");
#endif
    return make_cpu_backend();
  }
  const std::vector<std::string> known{"auto", "cpu", "cuda"};
  throw core::InputError("unknown backend \"" + name + "\"" + core::did_you_mean(name, known) +
                         "; known: auto, cpu, cuda");
}

}  // namespace hetrl::device
