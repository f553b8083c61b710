// hetrl-profile: measure this machine's device (a GPU through the cuda backend, or the CPU)
// and write a profile (hetrl.profile/v2) that hetrl-cluster --from-profile adopts; print a
// catalogue type's datasheet figures; or show a profile beside the datasheet.

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "common/tool.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/version.h"
#include "device/backend.h"
#include "device/comm.h"
#include "io/catalog_io.h"
#include "io/files.h"
#include "io/profile_io.h"
#include "profile/measure.h"
#include "profile/report.h"

namespace {

using namespace hetrl;

constexpr const char* kExamples = R"(Examples:
  hetrl-profile --quick -o profile.json            (the GPU if there is one, else the CPU)
  hetrl-profile --backend cpu --quick -o cpu.json
  mpirun -n 4 hetrl-profile -o node.json           (one device a process, and collectives between them)
  hetrl-cluster --from-profile cpu.json --node lab:1xcpu-amd-epyc -o cluster.json
  hetrl-profile show profile.json --compare H100-SXM
  hetrl-profile show today.json --against last-week.json
  hetrl-profile --catalog L40S)";

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string();
}

// A progress line on stderr, rewritten in place, when stderr is a terminal.
profile::Progress progress_line() {
  if (!isatty(fileno(stderr))) return {};
  return [](const std::string& step, double done) {
    std::fprintf(stderr, "\r\033[K[%3.0f%%] %s", 100 * done, step.c_str());
    std::fflush(stderr);
  };
}

// The profile's table beside another profile (`against`), or the datasheet of `compare`, or of
// the profile's own type when the catalogue has it (none otherwise).
std::string table_with_reference(const hw::GpuProfile& p, const std::string& compare, const std::string& against,
                                 const hw::Catalog& catalog) {
  if (!against.empty()) {
    const hw::GpuProfile other = io::read_profile(against);
    return profile::format_profile_table(p, {&other, "other", against});
  }
  const std::string type = !compare.empty() ? compare : catalog.find_gpu(p.gpu_type) ? p.gpu_type : "";
  if (type.empty()) return profile::format_profile_table(p);
  const hw::GpuProfile sheet = hw::datasheet_profile(catalog.gpu(type, "--compare"));
  return profile::format_profile_table(p, {&sheet, "datasheet", "the datasheet of " + type});
}

}  // namespace

int main(int argc, char** argv) {
  device::choose_blas_kernels(argv);  // first: it may run this program again
  CLI::App app{"Measure this machine's GPU (or CPU) and write a device profile (hetrl.profile/v2).", "hetrl-profile"};
  app.set_version_flag("--version", std::string(core::kVersion));
  app.footer(kExamples);

  std::string backend_name = "auto", dtype_name = "bf16", gpu_type, output, catalog_type, compare;
  int device_index = 0;
  bool quick = false;
  app.add_option("--backend", backend_name, "cuda, cpu or auto (cuda when a GPU is present)")->capture_default_str();
  app.add_option("--device", device_index, "Which device of the backend (default: the process's local rank under mpirun)")
      ->check(apps::whole_number(0, 1023));
  app.add_flag("--quick", quick, "Fewer sizes and repeats: under 30 s");
  app.add_option("--dtype", dtype_name, "Storage type of the GEMMs and attention")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}));
  app.add_option("--gpu-type", gpu_type,
                 "The GPU type the profile is of (default: the catalogue type the device's name names, or a new "
                 "type named after the device)");
  app.add_option("--compare", compare, "Compare with this catalogue type's datasheet (default: the profile's type)");
  app.add_option("-o,--output", output, "Write the profile here (default: JSON to stdout)");
  app.add_option("--catalog", catalog_type, "Print a catalogue GPU type's datasheet figures instead of measuring");
  CLI::App* show = app.add_subcommand("show", "Show a profile's figures beside the datasheet");
  std::string show_file;
  show->add_option("file", show_file, "The profile (hetrl.profile/v1 or v2)")->required();
  show->add_option("--compare", compare, "Compare with this catalogue type's datasheet (default: the profile's type)");
  std::string against;
  show->add_option("--against", against, "Compare with another profile (its figures in place of the datasheet's)")
      ->excludes(show->get_option("--compare"));
  app.require_subcommand(0, 1);

  return apps::run_tool(app, argc, argv, [&] {
    const hw::Catalog& catalog = io::builtin_catalogs().hardware;
    if (show->parsed()) {
      const hw::GpuProfile p = io::read_profile(show_file);
      fmt::print("{}", table_with_reference(p, compare, against, catalog));
      return apps::kExitOk;
    }
    if (!catalog_type.empty()) {
      const hw::GpuProfile p = hw::datasheet_profile(catalog.gpu(catalog_type, "--catalog"));
      if (output == io::kStdout) {
        fmt::print("{}", io::profile_to_json(p));
        return apps::kExitOk;
      }
      if (!output.empty()) {
        io::write_file_atomic(output, io::profile_to_json(p));
        fmt::print("wrote {}\n\n", output);
      }
      fmt::print("{}", profile::format_profile_table(p));
      return apps::kExitOk;
    }
    if (!compare.empty()) (void)catalog.gpu(compare, "--compare");
    if (!gpu_type.empty() && catalog.find_gpu(gpu_type) == nullptr && gpu_type.find_first_of(" \t:,") != std::string::npos) {
      apps::usage_error(fmt::format("--gpu-type {}: a type name has no spaces, ':' or ','", core::quoted(gpu_type)));
    }
    // Under mpirun each process measures one device (its local rank's) and rank 0 writes.
    const device::Launch launch = device::launch_from_environment();
    const bool writer = launch.rank == 0;
    if (writer && !output.empty()) io::check_writable(output);  // before minutes of measuring
    std::unique_ptr<device::Backend> backend;
    std::unique_ptr<device::Communicator> comm;
    try {
      backend = device::make_backend(backend_name, app.count("--device") ? device_index : launch.local_rank);
      comm = device::make_communicator(*backend, launch);
    } catch (const device::DeviceError& e) {
      throw core::JobError(e.what());
    }
    if (app.count("--device") && device_index != 0 && backend->info().backend == "cpu") {
      apps::usage_error(fmt::format("--device {}: the cpu backend is one device a process (run more under mpirun)",
                                    device_index));
    }
    if (writer && comm->size() == 1 && backend->info().count > 1) {
      std::fprintf(stderr, "hetrl-profile: measuring device %d of %d; `mpirun -n %d hetrl-profile` measures the "
                           "collectives between them\n", backend->info().index, backend->info().count,
                   backend->info().count);
    }
    profile::ProfileParams params = quick ? profile::ProfileParams::quick_settings() : profile::ProfileParams{};
    params.dtype = dtype_name == "fp32" ? device::DType::kF32 : dtype_name == "fp16" ? device::DType::kF16
                                                                                     : device::DType::kBf16;
    const core::SteadyClock clock;
    hw::GpuProfile p;
    const bool terminal = writer && isatty(fileno(stderr));
    try {
      p = profile::measure(*backend, *comm, clock, params, terminal ? progress_line() : profile::Progress{});
    } catch (const device::DeviceError& e) {
      if (terminal) std::fprintf(stderr, "\n");
      const std::string message = fmt::format("the device failed while profiling: {}", e.what());
      if (comm->size() > 1) {
        // The other processes wait for this one in a collective: end them all.
        std::fprintf(stderr, "hetrl-profile: error: rank %d: %s\n", comm->rank(), message.c_str());
        comm->abort(apps::kExitFailure);
      }
      throw core::JobError(message);
    }
    if (terminal) std::fprintf(stderr, "\r\033[K");
    if (!writer) return apps::kExitOk;
    p.gpu_type = !gpu_type.empty() ? gpu_type : profile::match_gpu_type(backend->info(), catalog);
    if (p.gpu_type.empty()) p.gpu_type = profile::new_type_name(backend->info());
    p.host = host_name();
    p.settings = hw::ProfileSettings{params.quick, dtype_name, params.passes * params.repeats, params.passes};
    p.provenance.tool = "hetrl-profile";
    p.provenance.version = core::kVersion;
    const std::string json = io::profile_to_json(p);
    if (output.empty() || output == io::kStdout) {
      fmt::print("{}", json);
      return apps::kExitOk;
    }
    io::write_file_atomic(output, json);
    fmt::print("wrote {}\n\n{}", output, table_with_reference(p, compare, "", catalog));
    return apps::kExitOk;
  });
}
