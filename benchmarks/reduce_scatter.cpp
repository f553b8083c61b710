// The reduce-scatter of a data-parallel gradient between the processes of one machine: Open
// MPI's own (MPI_Reduce_scatter_block, MPI_Reduce_scatter) against the MPI transport's ring
// (device::Communicator::reduce_scatter, apart and in place), fp32 summed, at several sizes of
// the whole message. ZeRO-1 and 2 reduce-scatter a model's whole gradient at each step.
// Each timing is the slowest process's, from a barrier; the first call of each is untimed.
// Every process runs with the heap settings the transport makes (mpi_comm.cpp).
// Prints CSV:
//   ranks,bytes,method,median_s,min_s,max_s,bus_gb_per_s
// Usage: mpirun -n N reduce_scatter [--sizes-mib 1,16,64,297] [--repeats R]

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/text.h"
#include "device/backend.h"
#include "device/comm.h"

using namespace hetrl;

namespace {

int number(const std::string& text, const char* what) {
  return static_cast<int>(core::parse_integer(text, what, 1, 1 << 14));
}

void check(int status, const char* what) {
  if (status != MPI_SUCCESS) throw std::runtime_error(fmt::format("{} failed with MPI error {}", what, status));
}

// The slowest process's seconds of `run`, each from a barrier, over `repeats` calls after one
// untimed: median, least, most.
std::vector<double> timed(const std::function<void()>& run, int repeats) {
  run();
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    run();
    double elapsed = MPI_Wtime() - start, slowest = 0;
    MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    seconds.push_back(slowest);
  }
  std::sort(seconds.begin(), seconds.end());
  return {seconds[seconds.size() / 2], seconds.front(), seconds.back()};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<int> sizes{1, 16, 64, 297};
    int repeats = 5;
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (i + 1 >= argc) throw core::InputError(fmt::format("{} needs a value", flag));
      const std::string value = argv[++i];
      if (flag == "--sizes-mib") {
        sizes.clear();
        std::stringstream list(value);
        for (std::string item; std::getline(list, item, ',');) sizes.push_back(number(item, "--sizes-mib"));
      } else if (flag == "--repeats") {
        repeats = number(value, "--repeats");
      } else {
        throw core::InputError(fmt::format("unknown option {}", flag));
      }
    }
    // The transport first: it starts MPI and sets the heap up before any large allocation.
    const auto backend = device::make_cpu_backend();
    const auto comm = device::make_mpi_communicator();
    const int n = comm->size();
    if (comm->rank() == 0) fmt::print("ranks,bytes,method,median_s,min_s,max_s,bus_gb_per_s\n");
    for (const int mib : sizes) {
      const std::size_t count = (static_cast<std::size_t>(mib) << 20) / sizeof(float) / static_cast<std::size_t>(n);
      const std::size_t whole = count * static_cast<std::size_t>(n);
      const device::Buffer send = device::zeros(*backend, whole * sizeof(float));
      const device::Buffer recv = device::zeros(*backend, count * sizeof(float));
      std::vector<int> counts(static_cast<std::size_t>(n), static_cast<int>(count));
      auto* in = send.as<float>();
      auto* out = recv.as<float>();
      const std::vector<std::pair<std::string, std::function<void()>>> methods{
          {"MPI_Reduce_scatter_block",
           [&] {
             check(MPI_Reduce_scatter_block(in, out, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                   "MPI_Reduce_scatter_block");
           }},
          {"MPI_Reduce_scatter",
           [&] {
             check(MPI_Reduce_scatter(in, out, counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Reduce_scatter");
           }},
          {"ring", [&] { comm->reduce_scatter(device::DType::kF32, in, out, count); }},
          {"ring in place",
           [&] { comm->reduce_scatter(device::DType::kF32, in, in + count * static_cast<std::size_t>(comm->rank()), count); }},
      };
      for (const auto& [name, run] : methods) {
        const std::vector<double> s = timed(run, repeats);
        const double bytes = static_cast<double>(whole * sizeof(float));
        if (comm->rank() == 0) {
          fmt::print("{},{},{},{:.5f},{:.5f},{:.5f},{:.3f}\n", n, whole * sizeof(float), name, s[0], s[1], s[2],
                     bytes / s[0] * (n - 1) / n / 1e9);
        }
      }
    }
    return 0;
  } catch (const core::InputError& e) {
    fmt::print(stderr, "reduce_scatter: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "reduce_scatter: {}\n", e.what());
    return 1;
  }
}
