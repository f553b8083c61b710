// One decode step of a catalogue model as hetrl-exec runs it (Transformer::decode and the
// sampling of its tokens), timed at several batch sizes on one device: what a generation
// task's steps cost on this machine, beside what the cost model prices them at. A tensor-
// parallel shard runs one process's part of the step (its all-reduces left out), so the
// numbers say what the weights a process holds cost, apart from the collectives. With
// --cluster and --workload, each batch's step priced by the cost model as hetrl-exec prices
// it (the scaled model on the cluster's first node, a stage of TP T holding every layer), its
// TP all-reduces left out as they are here.
// Prints CSV:
//   backend,device,model,layers,hidden,vocab,tp,batch,context,steps,median_ms,min_ms,max_ms,price_ms
// (price_ms empty without a cluster).
// Usage: decode_steps MODEL [--backend cpu|cuda|auto] [--layers L] [--hidden H] [--vocab V]
//                           [--tp T] [--batches 1,2,4,8] [--context C] [--steps S]
//                           [--cluster FILE --workload FILE]

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/text.h"
#include "cost/cost_model.h"
#include "device/backend.h"
#include "exec/run.h"
#include "exec/transformer.h"
#include "io/catalog_io.h"
#include "io/inputs.h"
#include "workload/rl_graph.h"

using namespace hetrl;

namespace {

int number(const std::string& text, const char* what) {
  return static_cast<int>(core::parse_integer(text, what, 1, 1 << 20));
}

// The cost model's price of the scaled model's decode steps on one stage of `tp` GPUs of the
// cluster's first node: the workload's generation task of that model, its models scaled as
// hetrl-exec scales them.
class StepPrice {
 public:
  StepPrice(const std::string& cluster_path, const std::string& workload_path, const workload::ModelArch& arch,
            const std::string& model_name, int tp)
      : in_(io::load_inputs(cluster_path, workload_path, io::builtin_catalogs())) {
    workload::ModelCatalog& models = in_.workload.models;
    for (workload::ModelArch& m : models.models) {
      if (m.name != model_name) continue;
      m = arch;
      m.name = model_name;
    }
    graph_ = workload::build_task_graph(in_.workload.workload, io::builtin_catalogs().algorithms, models);
    for (std::size_t t = 0; t < graph_.tasks.size(); ++t) {
      const workload::Task& task = graph_.tasks[t];
      if (task.kind == workload::TaskKind::kGenerate && task.model == model_name) task_ = static_cast<int>(t);
    }
    if (task_ < 0) throw core::InputError(fmt::format("{}: no generation task runs {}", workload_path, model_name));
    model_.emplace(in_.cluster, in_.workload.workload, graph_, models, exec::executor_cost_params());
    const std::vector<cost::Stage> stage{{0, tp, arch.layers}};
    model_->decode_stages(task_, stage, stages_);
  }
  // Seconds of a step of `batch` sequences of `context` tokens each, but its TP all-reduces.
  double seconds(int batch, int context) const {
    const cost::CostModel::StepCost step = model_->decode_step(stages_, batch, static_cast<double>(batch) * context);
    return step.total() - step.tp;
  }

 private:
  io::Inputs in_;
  workload::TaskGraph graph_;
  int task_ = -1;
  std::optional<cost::CostModel> model_;
  cost::CostModel::DecodeStages stages_;
};

}  // namespace

int main(int argc, char** argv) {
  hetrl::device::choose_blas_kernels(argv);  // first: it may run this program again
  if (argc < 2) {
    fmt::print(stderr,
               "usage: decode_steps MODEL [--backend cpu|cuda|auto] [--layers L] [--hidden H] [--vocab V] [--tp T] "
               "[--batches 1,2,4,8] [--context C] [--steps S] [--cluster FILE --workload FILE]\n");
    return 2;
  }
  try {
    std::string backend_name = "auto";
    exec::Scale scale;
    int tp = 1, context = 32, steps = 12;
    std::vector<int> batches{1, 2, 4, 8};
    std::string cluster_path, workload_path;
    for (int i = 2; i < argc; ++i) {
      const std::string flag = argv[i];
      if (i + 1 >= argc) throw core::InputError(fmt::format("{} needs a value", flag));
      const std::string value = argv[++i];
      if (flag == "--backend") {
        backend_name = value;
      } else if (flag == "--layers") {
        scale.layers = number(value, "--layers");
      } else if (flag == "--hidden") {
        scale.hidden = number(value, "--hidden");
      } else if (flag == "--vocab") {
        scale.vocab = number(value, "--vocab");
      } else if (flag == "--tp") {
        tp = number(value, "--tp");
      } else if (flag == "--context") {
        context = number(value, "--context");
      } else if (flag == "--steps") {
        steps = number(value, "--steps");
      } else if (flag == "--cluster") {
        cluster_path = value;
      } else if (flag == "--workload") {
        workload_path = value;
      } else if (flag == "--batches") {
        batches.clear();
        std::stringstream list(value);
        for (std::string item; std::getline(list, item, ',');) batches.push_back(number(item, "--batches"));
      } else {
        throw core::InputError(fmt::format("unknown option {}", flag));
      }
    }
    if (cluster_path.empty() != workload_path.empty()) throw core::InputError("--cluster and --workload go together");
    const workload::ModelArch arch = exec::scaled(io::builtin_catalogs().models.get(argv[1], "the model"), scale);
    std::optional<StepPrice> price;
    if (!cluster_path.empty()) price.emplace(cluster_path, workload_path, arch, argv[1], tp);
    const auto backend = device::make_backend(backend_name);
    exec::TransformerOptions options;
    // The first of `tp` shards: its all-reduces sum nothing (the other shards are not here).
    options.tp.size = tp;
    options.tp.local = {0};
    options.tp.all_reduce = [](device::DType, void*, std::size_t) {};
    exec::Transformer model(*backend, arch, exec::Head::kLanguage, options);
    const int most = *std::max_element(batches.begin(), batches.end());
    exec::Transformer::Cache cache = model.make_cache(most, context + 1);
    fmt::print("backend,device,model,layers,hidden,vocab,tp,batch,context,steps,median_ms,min_ms,max_ms,price_ms\n");
    for (const int batch : batches) {
      std::vector<int> slots, tokens, positions;
      for (int s = 0; s < batch; ++s) {
        slots.push_back(s);
        tokens.push_back(1 + s % (arch.vocab - 1));
        positions.push_back(context);
      }
      std::vector<double> seconds;
      for (int step = 0; step <= steps; ++step) {  // the first one warms up
        const auto start = std::chrono::steady_clock::now();
        const device::Buffer& logits = model.decode(cache, slots, tokens, positions);
        model.sample(logits, batch, 1.0f, 1, slots, positions);
        backend->synchronize();
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (step > 0) seconds.push_back(elapsed);
      }
      std::sort(seconds.begin(), seconds.end());
      const std::string priced = price ? fmt::format("{:.6f}", price->seconds(batch, context + 1) * 1e3) : "";
      fmt::print("{},\"{}\",\"{}\",{},{},{},{},{},{},{},{:.4f},{:.4f},{:.4f},{}\n", backend->info().backend,
                 backend->info().name, arch.name, arch.layers, arch.hidden, arch.vocab, tp, batch, context, steps,
                 seconds[seconds.size() / 2] * 1e3, seconds.front() * 1e3, seconds.back() * 1e3, priced);
    }
    return 0;
  } catch (const core::InputError& e) {
    fmt::print(stderr, "decode_steps: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "decode_steps: {}\n", e.what());
    return 1;
  }
}
