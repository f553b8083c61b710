// hetrl-exec: run a plan's RL iterations with real computation on this machine's device, and
// set each task's measured seconds beside the cost model's prediction for the same workload
// (scaled down on request, so that it fits).

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/tool.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/units.h"
#include "core/version.h"
#include "cost/cost_model.h"
#include "device/backend.h"
#include "device/comm.h"
#include "exec/calibrate.h"
#include "exec/run.h"
#include "exec/transformer.h"
#include "io/catalog_io.h"
#include "io/exec_io.h"
#include "io/files.h"
#include "io/inputs.h"
#include "io/plan_io.h"
#include "io/profile_io.h"
#include "io/sim_io.h"
#include "plan/evaluate.h"
#include "sim/recorder.h"
#include "hw/profile.h"
#include "sim/run_text.h"

namespace {

using namespace hetrl;

constexpr const char* kExamples = R"(Examples:
  hetrl-exec --cluster c.json --workload w.json --plan plan.json --report exec.json
  hetrl-exec --cluster lab.json --workload w.json --plan p.json --layers 2 --hidden 256 --vocab 4096 \
             --batch-scale 0.05 --iterations 3 --backend cpu
  hetrl-exec --cluster lab.json --workload w.json --plan p.json --iterations 5 --fit-profile fitted.json
  hetrl-cluster --from-profile fitted.json --node lab:2xcpu-amd-epyc -o calibrated.json)";

// Ends this process when the run has made no progress (no task begun) for `limit` seconds:
// under mpirun, a process waiting in a collective for one that died or hangs would wait
// forever. It says so in one line and exits 1; mpirun then ends the others. Rank 0 waits
// `limit`, the others two seconds more, so that the one that reports is the one that says why.
class Watchdog {
 public:
  Watchdog(double limit, int rank) : limit_(limit + (rank == 0 ? 0.0 : 2.0)), rank_(rank) {
    last_ = Clock::now();
    thread_ = std::thread([this] { watch(); });
  }
  ~Watchdog() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  void progress(std::string doing) {
    const std::lock_guard<std::mutex> lock(mutex_);
    last_ = Clock::now();
    doing_ = std::move(doing);
  }

 private:
  using Clock = std::chrono::steady_clock;
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_) {
      wake_.wait_for(lock, std::chrono::milliseconds(200));
      if (done_) return;
      if (std::chrono::duration<double>(Clock::now() - last_).count() > limit_) {
        std::fprintf(stderr,
                     "hetrl-exec: error: rank %d: no progress for %g s (%s): a process has died or hangs; ending the "
                     "run (--stall-timeout)\n",
                     rank_, limit_, doing_.c_str());
        std::fflush(stderr);
        std::_Exit(apps::kExitFailure);
      }
    }
  }
  double limit_;
  int rank_;
  std::mutex mutex_;
  std::condition_variable wake_;
  Clock::time_point last_;
  std::string doing_ = "starting";
  bool done_ = false;
  std::thread thread_;
};

// A test's stand-in for a process that hangs: the process of rank HETRL_EXEC_STALL_RANK stops
// at its first task and waits forever (docs/exec.md).
bool stalls(int rank) {
  const char* text = std::getenv("HETRL_EXEC_STALL_RANK");
  return text && *text && std::string(text) == std::to_string(rank);
}

// The measured iterations as hetrl-sim's recorder holds a simulated run, from the first one's
// start: each task on its group's track (CPU tasks and the weight sync on the last), each
// replica's stretches of work on its own row. On one device they follow one another.
sim::Recorder measured_timeline(const exec::RunResult& run, const plan::Plan& plan, const workload::TaskGraph& graph) {
  sim::Recorder r;
  double origin = std::numeric_limits<double>::infinity();
  for (const exec::IterationMeasurement& it : run.iterations) {
    for (const exec::TaskMeasurement& t : it.tasks) {
      if (t.ran) origin = std::min(origin, t.start);
    }
  }
  for (std::size_t i = 0; i < run.iterations.size(); ++i) {
    const exec::IterationMeasurement& it = run.iterations[i];
    for (std::size_t task = 0; task < it.tasks.size(); ++task) {
      const exec::TaskMeasurement& t = it.tasks[task];
      if (!t.ran) continue;
      const bool placed = graph.tasks[task].on_gpu();
      const int group = placed ? plan.group_of(static_cast<int>(task)) : -1;
      r.tasks.push_back({static_cast<int>(i), static_cast<int>(task), group, t.start - origin, t.end - origin});
      for (const exec::ReplicaSpan& s : t.spans) {
        r.replicas.push_back({static_cast<int>(i), static_cast<int>(task), group, s.replica, s.start - origin,
                              s.end - origin, 0.0, static_cast<std::uint64_t>(s.decode_steps), s.samples});
      }
    }
  }
  return r;
}

// Splits `layers` over the replica's stages in proportion to the layers they held (largest
// remainders first), at least one each.
void rescale_layers(plan::Replica& r, int layers, const std::string& task) {
  int held = 0;
  for (const plan::Stage& stage : r.stages) held += stage.layers;
  if (held == layers) return;
  const int stages = static_cast<int>(r.stages.size());
  if (layers < stages) {
    throw core::JobError(fmt::format("task {} runs {} pipeline stages; the scaled model has {} layers (--layers {} at least)",
                                     task, stages, layers, stages));
  }
  std::vector<std::pair<double, std::size_t>> remainders;
  int given = 0;
  for (std::size_t i = 0; i < r.stages.size(); ++i) {
    const double exact = static_cast<double>(r.stages[i].layers) * layers / held;
    r.stages[i].layers = std::max(1, static_cast<int>(exact));
    given += r.stages[i].layers;
    remainders.emplace_back(exact - std::floor(exact), i);
  }
  std::stable_sort(remainders.begin(), remainders.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t k = 0; given < layers; k = (k + 1) % remainders.size(), ++given) ++r.stages[remainders[k].second].layers;
  for (std::size_t k = 0; given > layers; k = (k + 1) % r.stages.size()) {
    if (r.stages[k].layers > 1) {
      --r.stages[k].layers;
      --given;
    }
  }
}

// Each device's memory at its most, by purpose, next to the cost model's need of the plan GPU it
// stands for (under mpirun; in one process the device runs every plan GPU's replicas in turn).
void print_memory(std::FILE* text, const exec::RunResult& run) {
  if (run.devices.empty()) return;
  constexpr double kMiB = 1024.0 * 1024.0;
  const auto mib = [](double bytes) { return fmt::format("{:.1f}", bytes / kMiB); };
  fmt::print(text, "\n{:<12} {:<5}", "device MiB", "");
  for (const device::Purpose purpose : device::kAllPurposes) fmt::print(text, " {:>13}", device::purpose_name(purpose));
  fmt::print(text, " {:>9} {:>9}\n", "total", "peak/need");
  bool predicted = false;
  for (std::size_t d = 0; d < run.devices.size(); ++d) {
    const exec::DeviceMemory& memory = run.devices[d];
    const std::string name = run.devices.size() > 1 ? fmt::format("process {}", d) : std::string("this device");
    fmt::print(text, "{:<12} {:<5}", name, "peak");
    for (const std::size_t bytes : memory.peak) fmt::print(text, " {:>13}", mib(static_cast<double>(bytes)));
    const double peak = memory.peak_bytes();
    if (!memory.predicted) {
      fmt::print(text, " {:>9} {:>9}\n", mib(peak), "-");
      continue;
    }
    predicted = true;
    const plan::MemoryUse& need = *memory.predicted;
    fmt::print(text, " {:>9} {:>9}\n", mib(peak), need.used() > 0 ? fmt::format("{:.2f}", peak / need.used()) : "-");
    fmt::print(text, "{:<12} {:<5}", "", "need");
    for (const double bytes : {need.weights, need.gradients, need.optimizer, need.activations, need.kv_cache}) {
      fmt::print(text, " {:>13}", mib(bytes));
    }
    fmt::print(text, " {:>13} {:>13} {:>13} {:>9} {:>9}\n", "-", "-", "-", mib(need.used()), "");
  }
  fmt::print(text, "(peak: the device memory allocated at its most over the run, warm-up included, by what was in use "
                   "then; need: the cost model's of the plan GPU{})\n",
             predicted ? " the process stands for, whose activations are its largest transient need"
                       : ", not given in one process, whose device runs every plan GPU's replicas");
}

// Each generation and training task's time by part, predicted and measured (the median over
// iterations of the slowest replica's); the data-parallel parts where the task has replicas.
void print_parts(std::FILE* text, const exec::RunResult& run, const plan::Prediction& predicted,
                 const workload::TaskGraph& graph) {
  bool header = false;
  for (std::size_t t = 0; t < graph.tasks.size(); ++t) {
    const std::vector<exec::TaskPart> parts = exec::task_parts(graph.tasks[t].kind, predicted.tasks[t].terms, run, t);
    if (parts.empty() || parts.front().measured.empty()) continue;
    std::size_t replicas = 0;
    for (const exec::IterationMeasurement& it : run.iterations) {
      if (it.tasks[t].ran) replicas = it.tasks[t].replica_seconds.size();
    }
    if (!header) {
      fmt::print(text, "\n{:<16} {:<20} {:>12} {:>12} {:>10}\n", "task", "part", "predicted s", "measured s",
                 "measured/predicted");
      header = true;
    }
    bool first = true;
    for (const exec::TaskPart& part : parts) {
      if (part.data_parallel && replicas <= 1) continue;
      const double median = exec::median(part.measured);
      fmt::print(text, "{:<16} {:<20} {:>12.4g} {:>12.4g} {:>10}\n", first ? graph.tasks[t].name : std::string(),
                 part.label, part.predicted, median,
                 part.predicted > 0 ? fmt::format("{:.2f}", median / part.predicted) : std::string("-"));
      first = false;
    }
  }
}

// The earlier runs' reports a fit pools (--fit-on), each checked to be of a run like this one:
// the same plan, workload and scaled models, batch, seed, warm-up, storage type and device, so
// that their iterations are this run's again (the same samples, on the same kind of device).
std::vector<io::ExecRecord> earlier_runs(const std::vector<std::string>& paths, const std::string& plan_hash,
                                         const std::string& workload_hash,
                                         const std::vector<workload::ModelArch>& models, double batch_scale,
                                         const exec::RunSettings& settings, const std::string& dtype, int warmup,
                                         const device::DeviceInfo& device) {
  std::vector<io::ExecRecord> out;
  for (const std::string& path : paths) {
    io::ExecRecord r = io::read_exec_report(path);
    const auto differs = [&](const std::string& what) {
      apps::usage_error(fmt::format("--fit-on {}: its run differs from this one in {}: a fit pools runs of the same "
                                    "plan, workload and settings",
                                    path, what));
    };
    if (r.plan_hash.empty() || !r.warmup) {
      apps::usage_error(fmt::format("--fit-on {}: the report names no plan hash or warm-up (an earlier hetrl-exec "
                                    "wrote it): pool reports of this version",
                                    path));
    }
    if (r.plan_hash != plan_hash) differs("its plan");
    if (r.workload_hash != workload_hash) differs("its workload");
    const auto same_model = [](const workload::ModelArch& a, const workload::ModelArch& b) {
      return a.name == b.name && a.layers == b.layers && a.hidden == b.hidden && a.heads == b.heads &&
             a.kv_heads == b.kv_heads && a.head_dim == b.head_dim && a.ffn_hidden == b.ffn_hidden && a.vocab == b.vocab;
    };
    if (r.models.size() != models.size() || !std::equal(models.begin(), models.end(), r.models.begin(), same_model)) {
      differs("its models' scale (--layers, --hidden, --vocab)");
    }
    if (r.batch_scale != batch_scale) differs(fmt::format("--batch-scale ({} against {})", r.batch_scale, batch_scale));
    if (r.seed != settings.seed) differs(fmt::format("--seed ({} against {})", r.seed, settings.seed));
    if (*r.warmup != warmup) differs(fmt::format("--warmup ({} against {})", *r.warmup, warmup));
    if (r.dtype != dtype) differs(fmt::format("--dtype ({} against {})", r.dtype, dtype));
    if (r.backend != device.backend || r.device != device.name) {
      differs(fmt::format("its device ({}, {} backend, against {}, {})", r.device, r.backend, device.name, device.backend));
    }
    out.push_back(std::move(r));
  }
  return out;
}

// An earlier run's measured iterations after the fit's, each its run's own iteration.
void pool(const io::ExecRecord& r, const workload::TaskGraph& graph, exec::CalibrationInputs& fit) {
  const std::size_t tasks = graph.tasks.size();
  for (int i = 0; i < r.iterations; ++i) {
    std::vector<double> seconds(tasks, -1.0), steps(tasks, -1.0), prefills(tasks, -1.0), all_reduce(tasks, 0.0),
        pass_all_reduce(tasks, 0.0);
    std::vector<long long> all_reduces(tasks, 0);
    for (const io::ExecRecord::Task& t : r.tasks) {
      const int task = graph.find(t.name);
      if (task < 0) continue;  // the same workload: never
      const auto at = static_cast<std::size_t>(i);
      const auto k = static_cast<std::size_t>(task);
      if (t.seconds[at] > 0) seconds[k] = t.seconds[at];
      if (!t.optimizer_steps.empty()) steps[k] = t.optimizer_steps[at];
      if (!t.prefills.empty()) prefills[k] = t.prefills[at];
      if (!t.decode_all_reduces.empty()) {
        all_reduce[k] = t.decode_all_reduce[at];
        all_reduces[k] = t.decode_all_reduces[at];
      }
      if (!t.pass_all_reduce.empty()) pass_all_reduce[k] = t.pass_all_reduce[at];
    }
    fit.measured.push_back(std::move(seconds));
    fit.optimizer_steps.push_back(std::move(steps));
    fit.prefills.push_back(std::move(prefills));
    fit.decode_all_reduce.push_back(std::move(all_reduce));
    fit.decode_all_reduces.push_back(std::move(all_reduces));
    fit.pass_all_reduce.push_back(std::move(pass_all_reduce));
    fit.iteration_of.push_back(i);
  }
}

// The iterations a fit pools: this run's and the earlier runs'.
std::size_t fit_iterations(int iterations, const std::vector<io::ExecRecord>& earlier) {
  std::size_t n = static_cast<std::size_t>(iterations);
  for (const io::ExecRecord& r : earlier) n += static_cast<std::size_t>(r.iterations);
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  device::choose_blas_kernels(argv);  // first: it may run this program again
  CLI::App app{"Run a plan's RL iterations with real kernels on this machine and compare each task with the cost "
               "model.",
               "hetrl-exec"};
  app.set_version_flag("--version", std::string(core::kVersion));
  app.footer(kExamples);
  std::string cluster_path, workload_path, plan_path, report_path, backend_name = "auto", dtype_name = "bf16";
  int device_index = 0, warmup = 1;
  exec::Scale scale;
  double batch_scale = 1.0;
  exec::RunSettings settings;
  app.add_option("--cluster", cluster_path, "Cluster file; default: the embedded one");
  app.add_option("--workload", workload_path, "Workload file; default: the embedded one");
  app.add_option("--plan", plan_path, "The plan to run (hetrl.plan/v1)")->required();
  app.add_option("--backend", backend_name, "auto, cpu or cuda")->capture_default_str();
  app.add_option("--device", device_index, "The device of the backend to run on")
      ->check(apps::whole_number(0, 1024))->capture_default_str();
  app.add_option("--layers", scale.layers, "Run every model with this many layers (default: its own)")
      ->check(apps::whole_number(1, 1024));
  app.add_option("--hidden", scale.hidden, "Run every model this wide (heads, kv heads and MLP in proportion)")
      ->check(apps::whole_number(1, 1 << 20));
  app.add_option("--vocab", scale.vocab, "Run every model with this vocabulary")->check(apps::whole_number(256, 1 << 24));
  app.add_option("--batch-scale", batch_scale, "Run this fraction of the workload's prompts an iteration")
      ->check(apps::finite_range(0, 1))->capture_default_str();
  app.add_option("--iterations", settings.iterations, "Iterations measured")
      ->check(apps::whole_number(1, 1000))->capture_default_str();
  app.add_option("--warmup", warmup, "Iterations run first and not measured")
      ->check(apps::whole_number(0, 1000))->capture_default_str();
  app.add_option("--seed", settings.seed, "Seed of weights, prompts and response lengths")
      ->check(apps::unsigned_integer())->capture_default_str();
  app.add_option("--temperature", settings.temperature, "Sampling temperature (0: greedy)")
      ->check(apps::finite_range(0, 100))->capture_default_str();
  app.add_option("--learning-rate", settings.learning_rate, "AdamW's learning rate of every training step")
      ->check(apps::finite_range(0, 1))->capture_default_str();
  app.add_option("--dtype", dtype_name, "Storage type of weights and activations: bf16, fp16 or fp32")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}))->capture_default_str();
  app.add_option("--report", report_path, "Write the report (hetrl.execreport/v1) here ('-': standard output)");
  std::string trace_path, fit_path;
  double stall_timeout = 1800;
  app.add_option("--stall-timeout", stall_timeout,
                 "Under mpirun: end the run when no task has begun for this many seconds (a process died or hangs)")
      ->check(apps::finite_range(1, 1e6))->capture_default_str();
  app.add_option("--fit-profile", fit_path,
                 "Fit the run's GPU type's pass and optimizer efficiencies and decode step overhead on the measured "
                 "tasks (and the seconds of a decode step's TP all-reduce where mpirun's processes timed them), "
                 "and write them with its figures as a profile (hetrl.profile/v2) for hetrl-cluster --from-profile");
  std::vector<std::string> fit_on;
  app.add_option("--fit-on", fit_on,
                 "With --fit-profile: also fit on the measured iterations of these earlier runs' reports "
                 "(hetrl.execreport/v1) of the same plan, workload, scale, seed and warm-up on this device, so that "
                 "one slow spell of a shared machine does not set the fit")
      ->needs(app.get_option("--fit-profile"));
  app.add_option("--trace", trace_path,
                 "Write the measured timeline as a Chrome trace-event file, as hetrl-sim's (opens in Perfetto; '-': "
                 "standard output)");

  return apps::run_tool(app, argc, argv, [&] {
    if (batch_scale <= 0) apps::usage_error("--batch-scale must be above 0");
    if (settings.learning_rate <= 0) apps::usage_error("--learning-rate must be above 0");
    std::vector<std::string> read{cluster_path, workload_path, plan_path};
    read.insert(read.end(), fit_on.begin(), fit_on.end());
    io::check_outputs(std::vector<std::string>{report_path, trace_path, fit_path}, read);
    const io::Catalogs& catalogs = io::builtin_catalogs();
    const io::Inputs in = io::load_inputs(cluster_path, workload_path, catalogs);
    plan::Plan p = io::read_plan(plan_path, in.cluster, in.graph, in.workload.models);

    // The workload as it runs: its models scaled (under their own names, so the plan and the
    // graph still name them) and its batch cut.
    workload::Workload w = in.workload.workload;
    workload::ModelCatalog models = in.workload.models;
    std::vector<workload::ModelArch> ran;
    for (const workload::Role role : workload::kRoles) {
      const workload::RoleModel& r = w.role(role);
      if (r.kind != workload::RoleModel::Kind::kModel) continue;
      for (workload::ModelArch& m : models.models) {
        if (m.name != r.model) continue;
        workload::ModelArch s = exec::scaled(m, scale);
        s.name = m.name;
        if (std::none_of(ran.begin(), ran.end(), [&](const workload::ModelArch& a) { return a.name == s.name; })) {
          ran.push_back(s);
        }
        m = s;
      }
    }
    w.prompts_per_iteration = std::max(1, static_cast<int>(std::lround(w.prompts_per_iteration * batch_scale)));
    const workload::TaskGraph graph = workload::build_task_graph(w, catalogs.algorithms, models);
    // Fewer layers: each replica's stages keep their share of them.
    for (plan::Group& g : p.groups) {
      for (plan::TaskPlacement& t : g.tasks) {
        const int layers = models.get(graph.tasks[static_cast<std::size_t>(t.task)].model, "plan").layers;
        for (plan::Replica& r : t.replicas) rescale_layers(r, layers, graph.tasks[static_cast<std::size_t>(t.task)].name);
      }
    }
    try {
      p.validate(in.cluster, graph, models);
    } catch (const core::InputError& e) {
      throw core::JobError(fmt::format("the plan cannot run the scaled models: {}", e.what()));
    }
    if (const std::size_t types = exec::plan_gpu_types(p, in.cluster).size(); !fit_path.empty() && types > 1) {
      apps::usage_error(fmt::format("--fit-profile: the plan runs on {} GPU types; a profile describes one: run a "
                                    "plan on one type", types));
    }
    const cost::CostModel model(in.cluster, w, graph, models, exec::executor_cost_params());
    plan::Evaluator evaluator(model);
    const plan::Prediction predicted = evaluator.evaluate(p, /*explain=*/true);  // training's parts

    settings.dtype = dtype_name == "fp32" ? device::DType::kF32 : dtype_name == "fp16" ? device::DType::kF16
                                                                                     : device::DType::kBf16;
    // Under mpirun a process a plan GPU (its local rank's device); rank 0 reports.
    const device::Launch launch = device::launch_from_environment();
    std::unique_ptr<device::Backend> backend;
    std::unique_ptr<device::Communicator> comm;
    try {
      backend = device::make_backend(backend_name, app.count("--device") ? device_index
                                                   : backend_name == "cpu" ? 0 : launch.local_rank);
      comm = device::make_communicator(*backend, launch);
    } catch (const device::DeviceError& e) {
      throw core::JobError(e.what());
    }
    if (comm->size() > 1) settings.comm = comm.get();
    const bool writer = comm->rank() == 0;
    // What the run holds at the least, whatever its layouts: every role's weights once (each
    // process keeps a copy of each), and in one process the trained roles' fp32 gradients,
    // master weights and Adam moments (16 bytes a parameter). A plan over that is refused
    // before any model is made, rather than run out of memory half way.
    {
      double least = 0;
      for (const workload::Role role : workload::kRoles) {
        const workload::RoleModel& r = w.role(role);
        if (r.kind != workload::RoleModel::Kind::kModel) continue;
        const double params = cost::ModelShape(models.get(r.model, "workload"), workload::head_of(role)).total_params();
        least += params * static_cast<double>(device::dtype_bytes(settings.dtype));
        const bool trained = std::any_of(graph.tasks.begin(), graph.tasks.end(), [&](const workload::Task& t) {
          return t.kind == workload::TaskKind::kTrain && t.role && *t.role == role;
        });
        if (trained && comm->size() == 1) least += 16.0 * params;
      }
      const double memory = backend->info().memory;
      if (least > memory) {
        if (!writer) return apps::kExitFailure;
        throw core::JobError(fmt::format(
            "the run would hold at least {:.1f} GiB (every role's weights{}) and the device ({}) has {:.1f} GiB: scale "
            "the models down (--layers, --hidden, --vocab)",
            least / core::kGiB, comm->size() == 1 ? ", the trained roles' gradients and optimizer state" : "",
            backend->info().name, memory / core::kGiB));
      }
    }
    if (device_index != 0 && backend->info().backend == "cpu") {
      apps::usage_error(fmt::format("--device {}: the cpu backend is one device a process", device_index));
    }
    const std::string plan_hash = core::content_hash(io::read_text_file(plan_path));
    const std::vector<io::ExecRecord> earlier =
        earlier_runs(fit_on, plan_hash, in.workload_hash, ran, batch_scale, settings, dtype_name, warmup, backend->info());
    const bool terminal = writer && ::isatty(STDERR_FILENO) != 0;
    exec::RunSettings all = settings;
    all.iterations = settings.iterations + warmup;
    exec::RunResult run;
    std::unique_ptr<Watchdog> watchdog;
    if (comm->size() > 1) watchdog = std::make_unique<Watchdog>(stall_timeout, comm->rank());
    const bool stall = stalls(comm->rank());
    try {
      run = exec::run_plan(*backend, model, models, p, all, [&](int iteration, int task) {
        const std::string& name = graph.tasks[static_cast<std::size_t>(task)].name;
        if (watchdog) watchdog->progress(fmt::format("at task {} of iteration {}", name, iteration + 1));
        while (stall) std::this_thread::sleep_for(std::chrono::seconds(1));
        if (!terminal) return;
        std::fprintf(stderr, "\r\033[K%s %d of %d: %s", iteration < warmup ? "warm-up" : "iteration",
                     iteration < warmup ? iteration + 1 : iteration - warmup + 1,
                     iteration < warmup ? warmup : settings.iterations, graph.tasks[static_cast<std::size_t>(task)].name.c_str());
      });
    } catch (const core::JobError&) {
      // What the plan asks of the run (the process count, a layout not run yet) every process
      // finds alike: rank 0 says it, the others end with its exit code.
      if (!writer) return apps::kExitFailure;
      throw;
    } catch (const device::DeviceError& e) {
      if (terminal) std::fprintf(stderr, "\n");
      if (comm->size() > 1) {
        // The other processes wait for this one in a collective: end them all.
        std::fprintf(stderr, "hetrl-exec: error: rank %d: the device failed: %s\n", comm->rank(), e.what());
        comm->abort(apps::kExitFailure);
      }
      throw core::JobError(fmt::format("the device failed: {}", e.what()));
    }
    watchdog.reset();
    if (terminal) std::fprintf(stderr, "\r\033[K");
    run.iterations.erase(run.iterations.begin(), run.iterations.begin() + warmup);
    if (!writer) return apps::kExitOk;
    // The simulator over the same iterations: its seed draws the response lengths the run drew
    // (iteration by iteration), so its seconds are for the same samples. None where the plan
    // does not fit the cluster's GPUs (the simulator runs only plans that fit).
    std::vector<std::vector<double>> simulated;
    try {
      sim::SimParams params;
      params.iterations = warmup + settings.iterations;
      params.seed = settings.seed;
      const sim::PlanRun s = sim::run_plan(model, p, params, plan_path);
      simulated.assign(static_cast<std::size_t>(settings.iterations), std::vector<double>(graph.tasks.size(), -1.0));
      for (const sim::TaskRun& r : s.recorder.tasks) {
        if (r.iteration >= warmup) {
          // The weight sync with the weights' transfer into it, as the run has it (the simulator
          // moves them beforehand, as the cost model does).
          simulated[static_cast<std::size_t>(r.iteration - warmup)][static_cast<std::size_t>(r.task)] =
              r.end - r.start + predicted.tasks[static_cast<std::size_t>(r.task)].weights_in;
        }
      }
    } catch (const core::JobError&) {
      simulated.clear();
    }

    // The fit: the run's GPU type's figures, adjusted so that the simulator gives what was
    // measured (exec/calibrate.h), as a profile of that type.
    std::optional<exec::Calibration> calibration;
    if (!fit_path.empty()) {
      exec::CalibrationInputs fit{&in.cluster, &w, &graph, &models, &p, {}, warmup, settings.seed, {}, {}, {}, {}, {}, {}};
      for (std::size_t i = 0; i < run.iterations.size(); ++i) {
        std::vector<double> seconds, steps, prefills, all_reduce, pass_all_reduce;
        std::vector<long long> all_reduces;
        for (std::size_t task = 0; task < run.iterations[i].tasks.size(); ++task) {
          const exec::TaskMeasurement& t = run.iterations[i].tasks[task];
          seconds.push_back(t.ran ? t.seconds : -1.0);
          // 0 without parts: not fitted on.
          steps.push_back(t.ran ? exec::slowest_parts(t).optimizer_step : -1.0);
          const exec::GenerationParts generation = t.ran ? exec::slowest_generation_parts(t) : exec::GenerationParts{};
          prefills.push_back(t.ran ? generation.prefill : -1.0);
          all_reduce.push_back(generation.decode_all_reduce);
          all_reduces.push_back(generation.decode_all_reduces);
          const workload::TaskKind kind = graph.tasks[task].kind;
          const bool passes = kind == workload::TaskKind::kTrain || kind == workload::TaskKind::kForward;
          pass_all_reduce.push_back(t.ran && passes ? exec::slowest_tp_collectives(t).seconds : 0.0);
        }
        fit.measured.push_back(std::move(seconds));
        fit.optimizer_steps.push_back(std::move(steps));
        fit.prefills.push_back(std::move(prefills));
        fit.decode_all_reduce.push_back(std::move(all_reduce));
        fit.decode_all_reduces.push_back(std::move(all_reduces));
        fit.pass_all_reduce.push_back(std::move(pass_all_reduce));
        fit.iteration_of.push_back(static_cast<int>(i));
      }
      for (const io::ExecRecord& r : earlier) pool(r, graph, fit);
      calibration = exec::calibrate(fit);
    }

    // The report, the trace and the profile are written together, or none.
    io::OutputFiles files;
    if (calibration) {
      const hw::GpuSpec& spec = in.cluster.gpu_types[static_cast<std::size_t>(calibration->gpu_type)];
      hw::GpuProfile profile = hw::datasheet_profile(spec);
      profile.provenance.tool = "hetrl-exec";
      profile.provenance.version = core::kVersion;
      profile.provenance.inputs = {{"cluster", in.cluster_hash}, {"workload", in.workload_hash}};
      profile.device_name = backend->info().name;
      const device::DeviceInfo& info = backend->info();
      profile.device = hw::DeviceDescription{info.backend, info.name, info.count, spec.memory, info.compute_units,
                                             info.driver, info.runtime};
      profile.pass_efficiency = calibration->pass_efficiency;
      profile.optimizer_efficiency = calibration->optimizer_efficiency;
      profile.decode_step_overhead = calibration->decode_step_overhead;
      profile.copy_efficiency = calibration->copy_efficiency;
      profile.prefill_efficiency = calibration->prefill_efficiency;
      profile.decode_allreduce = calibration->decode_allreduce;
      profile.tp_wait = calibration->tp_wait;
      hw::GpuProfile::Calibration c{plan_path, static_cast<int>(fit_iterations(settings.iterations, earlier)),
                                    1 + static_cast<int>(earlier.size()), {}};
      for (const exec::CalibrationRow& row : calibration->rows) c.tasks.push_back({row.task, row.measured, row.before, row.after});
      profile.calibration = std::move(c);
      files.add(fit_path, io::profile_to_json(profile));
    }
    if (!report_path.empty()) {
      io::ExecReportInputs inputs{plan_path, plan_hash, in.cluster_hash, in.workload_hash, backend->info().backend,
                                  backend->info().name, settings, warmup, batch_scale, ran};
      files.add(report_path, io::exec_report_json(inputs, run, predicted, simulated, graph));
    }
    if (!trace_path.empty()) {
      files.add(trace_path, io::chrome_trace_json(measured_timeline(run, p, graph), sim::SimSummary{}, graph,
                                                  static_cast<int>(p.groups.size())));
    }
    files.commit();
    std::FILE* text =
        report_path == io::kStdout || trace_path == io::kStdout || fit_path == io::kStdout ? stderr : stdout;
    fmt::print(text, "ran {} on {} ({} backend, {}{}): {} iteration{} after {} warm-up, {} samples an iteration\n",
               plan_path, backend->info().name, backend->info().backend, dtype_name,
               comm->size() > 1 ? fmt::format(", {} processes", comm->size()) : std::string(), settings.iterations,
               settings.iterations == 1 ? "" : "s", warmup, w.samples_per_iteration());
    for (const workload::ModelArch& m : ran) {
      fmt::print(text, "  {}: {} layers, hidden {}, {} heads ({} kv), MLP {}, vocab {}\n", m.name, m.layers, m.hidden,
                 m.heads, m.kv_heads, m.ffn_hidden, m.vocab);
    }
    fmt::print(text, "\n{:<16} {:>8} {:>12} {:>12} {:>12} {:>10}\n", "task", "replicas", "predicted s", "simulated s",
               "measured s", "measured/predicted");
    for (std::size_t t = 0; t < graph.tasks.size(); ++t) {
      std::vector<double> seconds;
      std::size_t replicas = 0;
      for (const exec::IterationMeasurement& it : run.iterations) {
        if (!it.tasks[t].ran) continue;
        seconds.push_back(it.tasks[t].seconds);
        replicas = it.tasks[t].replica_seconds.size();
      }
      if (seconds.empty()) continue;
      std::vector<double> sim_seconds;
      for (const std::vector<double>& it : simulated) {
        if (it[t] >= 0) sim_seconds.push_back(it[t]);
      }
      const double measured = exec::median(seconds), expected = predicted.tasks[t].alone();
      fmt::print(text, "{:<16} {:>8} {:>12.4g} {:>12} {:>12.4g} {:>10}\n", graph.tasks[t].name,
                 graph.tasks[t].kind == workload::TaskKind::kCpu ? std::string("host")
                 : replicas > 0                                   ? fmt::format("{}", replicas)
                                                                  : std::string("-"),
                 expected, sim_seconds.empty() ? std::string("-") : fmt::format("{:.4g}", exec::median(sim_seconds)), measured,
                 expected > 0 ? fmt::format("{:.2f}", measured / expected) : std::string("-"));
    }
    std::vector<double> periods;
    double in_turn = 0;
    for (const exec::IterationMeasurement& it : run.iterations) periods.push_back(it.period);
    for (std::size_t t = 0; t < graph.tasks.size(); ++t) {
      std::vector<double> seconds;
      for (const exec::IterationMeasurement& it : run.iterations) {
        if (it.tasks[t].ran) seconds.push_back(it.tasks[t].seconds);
      }
      if (!seconds.empty()) in_turn += exec::median(seconds);
    }
    if (!periods.empty()) {
      fmt::print(text, "{:<16} {:>8} {:>12.4g} {:>12} {:>12.4g} {:>10}\n", "iteration", "as run", predicted.iteration_seconds,
                 "-", exec::median(periods),
                 predicted.iteration_seconds > 0 ? fmt::format("{:.2f}", exec::median(periods) / predicted.iteration_seconds)
                                                 : std::string("-"));
      fmt::print(text, "(an iteration as run: the median from one iteration's end to the next's, {}; its tasks in "
                       "turn {:.4g} s; predicted: the plan's iteration)\n",
                 comm->size() > 1 ? "each group's processes working on their own tasks" : "every task in turn on this device",
                 in_turn);
    }
    fmt::print(text, "\nmeasured: the median over iterations of each task's slowest replica ({}); simulated: "
                     "hetrl-sim's over the same iterations and response lengths{}\n",
               comm->size() > 1 ? "each on its processes' devices" : "replicas run one after another on this device, each timed alone",
               simulated.empty() ? " (not run: the plan does not fit the cluster's GPUs)" : "");
    print_parts(text, run, predicted, graph);
    print_memory(text, run);
    if (calibration) {
      fmt::print(text, "\nfitted on the measured tasks{} (simulated with the run's response lengths): pass efficiency "
                       "{:.3f}, optimizer efficiency {:.3f}{}, decode step overhead {:.3g} ms\n",
                 earlier.empty() ? std::string()
                                 : fmt::format(" of {} runs ({} iterations)", 1 + earlier.size(),
                                               fit_iterations(settings.iterations, earlier)),
                 calibration->pass_efficiency, calibration->optimizer_efficiency,
                 calibration->optimizer_held ? " (the cluster's, held)"
                 : calibration->optimizer_steps > 0
                     ? fmt::format(" (on the optimizer steps of {} training task{})", calibration->optimizer_steps,
                                   calibration->optimizer_steps == 1 ? "" : "s")
                     : std::string(),
                 calibration->decode_step_overhead / core::kMillisecond);
      if (calibration->prefills > 0) {
        fmt::print(text, "prefill efficiency {:.3f} (on the prefills of {} generation task{})\n",
                   *calibration->prefill_efficiency, calibration->prefills, calibration->prefills == 1 ? "" : "s");
      }
      if (calibration->decode_allreduce) {
        fmt::print(text, "decode TP all-reduce {:.3g} ms (measured: {} of them)\n",
                   *calibration->decode_allreduce / core::kMillisecond, calibration->decode_all_reduces);
      }
      if (calibration->tp_passes > 0) {
        fmt::print(text, "TP wait {:.3f} of the passes' compute (on the TP all-reduces of {} scoring or training task{})\n",
                   *calibration->tp_wait, calibration->tp_passes, calibration->tp_passes == 1 ? "" : "s");
      }
      if (!calibration->copy_held) {
        fmt::print(text, "weight copy efficiency {:.3f} (on the weight sync's copies on the devices)\n",
                   *calibration->copy_efficiency);
      }
      fmt::print(text, "{:<16} {:>12} {:>12} {:>12}\n", "task", "measured s", "before s", "after s");
      for (const exec::CalibrationRow& row : calibration->rows) {
        fmt::print(text, "{:<16} {:>12.4g} {:>12.4g} {:>12.4g}\n", row.task, row.measured, row.before, row.after);
      }
    }
    for (const std::string& path : {report_path, trace_path, fit_path}) {
      if (!path.empty() && path != io::kStdout) fmt::print(text, "wrote {}\n", path);
    }
    return apps::kExitOk;
  });
}
