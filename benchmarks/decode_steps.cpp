// One decode step of a catalogue model as hetrl-exec runs it (Transformer::decode and the
// sampling of its tokens), timed at several batch sizes on one device: what a generation
// task's steps cost on this machine, beside what the cost model prices them at. A tensor-
// parallel shard runs one process's part of the step (its all-reduces left out), so the
// numbers say what the weights a process holds cost, apart from the collectives.
// Prints CSV:
//   backend,device,model,layers,hidden,vocab,tp,batch,context,steps,median_ms,min_ms,max_ms
// Usage: decode_steps MODEL [--backend cpu|cuda|auto] [--layers L] [--hidden H] [--vocab V]
//                           [--tp T] [--batches 1,2,4,8] [--context C] [--steps S]

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/text.h"
#include "device/backend.h"
#include "exec/transformer.h"
#include "io/catalog_io.h"

using namespace hetrl;

namespace {

int number(const std::string& text, const char* what) {
  return static_cast<int>(core::parse_integer(text, what, 1, 1 << 20));
}

}  // namespace

int main(int argc, char** argv) {
  hetrl::device::choose_blas_kernels(argv);  // first: it may run this program again
  if (argc < 2) {
    fmt::print(stderr,
               "usage: decode_steps MODEL [--backend cpu|cuda|auto] [--layers L] [--hidden H] [--vocab V] [--tp T] "
               "[--batches 1,2,4,8] [--context C] [--steps S]\n");
    return 2;
  }
  try {
    std::string backend_name = "auto";
    exec::Scale scale;
    int tp = 1, context = 32, steps = 12;
    std::vector<int> batches{1, 2, 4, 8};
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
      } else if (flag == "--batches") {
        batches.clear();
        std::stringstream list(value);
        for (std::string item; std::getline(list, item, ',');) batches.push_back(number(item, "--batches"));
      } else {
        throw core::InputError(fmt::format("unknown option {}", flag));
      }
    }
    const workload::ModelArch arch = exec::scaled(io::builtin_catalogs().models.get(argv[1], "the model"), scale);
    const auto backend = device::make_backend(backend_name);
    exec::TransformerOptions options;
    // The first of `tp` shards: its all-reduces sum nothing (the other shards are not here).
    options.tp.size = tp;
    options.tp.local = {0};
    options.tp.all_reduce = [](device::DType, void*, std::size_t) {};
    exec::Transformer model(*backend, arch, exec::Head::kLanguage, options);
    const int most = *std::max_element(batches.begin(), batches.end());
    exec::Transformer::Cache cache = model.make_cache(most, context + 1);
    fmt::print("backend,device,model,layers,hidden,vocab,tp,batch,context,steps,median_ms,min_ms,max_ms\n");
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
      fmt::print("{},\"{}\",\"{}\",{},{},{},{},{},{},{},{:.4f},{:.4f},{:.4f}\n", backend->info().backend, backend->info().name,
                 arch.name, arch.layers, arch.hidden, arch.vocab, tp, batch, context, steps,
                 seconds[seconds.size() / 2] * 1e3, seconds.front() * 1e3, seconds.back() * 1e3);
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
