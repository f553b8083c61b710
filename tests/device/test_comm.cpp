// Collectives and point to point between the processes of one run, each checked against what
// every process computes of all the others' inputs. ctest runs these alone (a process by
// itself) and under mpirun with 2 and 3 processes (cpu backend, MPI); the gpu tests run them on
// the cuda backend (NCCL). Inputs are small integers, so every sum is exact in bf16 and fp16
// whatever order the library adds in.

#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "device/backend.h"
#include "device/comm.h"
#include "device_test_backend.h"

namespace hetrl::device {
namespace {

constexpr DType kTypes[] = {DType::kF32, DType::kBf16, DType::kF16};

// Process `rank`'s element i.
double input(int rank, std::size_t i) { return (rank + 1.0) * static_cast<double>(i % 7) - 5.0; }

std::vector<double> inputs(int rank, std::size_t count, std::size_t first = 0) {
  std::vector<double> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = input(rank, first + i);
  return v;
}

// The sum over every process of element i.
double total(int size, std::size_t i) {
  double s = 0;
  for (int r = 0; r < size; ++r) s += input(r, i);
  return s;
}

struct Run {
  std::unique_ptr<Backend> backend = test_backend();
  std::unique_ptr<Communicator> comm = test_communicator(*backend);
};

TEST_CASE("comm: all-reduce sums every process's buffer, in place, apart and in buckets (the last one short)") {
  Run run;
  Backend& b = *run.backend;
  Communicator& comm = *run.comm;
  const std::size_t count = 1001;  // not a multiple of the process count
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const Buffer send = put(b, t, inputs(comm.rank(), count));
    const Buffer recv(b, count * dtype_bytes(t));
    comm.all_reduce(t, send.data(), recv.data(), count);
    comm.all_reduce(t, send.data(), send.data(), count);
    b.synchronize();
    const std::vector<double> apart = get(b, t, recv, count), in_place = get(b, t, send, count);
    for (std::size_t i = 0; i < count; ++i) {
      CAPTURE(i);
      CHECK(apart[i] == total(comm.size(), i));
      CHECK(in_place[i] == total(comm.size(), i));
    }
    for (const std::size_t bucket : {std::size_t{1}, std::size_t{64}, count, 4 * count}) {
      CAPTURE(bucket);
      const Buffer data = put(b, t, inputs(comm.rank(), count));
      all_reduce_in_buckets(comm, t, data.data(), count, bucket);
      b.synchronize();
      const std::vector<double> sums = get(b, t, data, count);
      for (std::size_t i = 0; i < count; ++i) {
        CAPTURE(i);
        CHECK(sums[i] == total(comm.size(), i));
      }
    }
  }
  CHECK_THROWS_AS(all_reduce_in_buckets(comm, DType::kF32, nullptr, 0, 0), DeviceError);
}

TEST_CASE("comm: all-gather puts each process's block at its rank, apart and in place") {
  Run run;
  Backend& b = *run.backend;
  Communicator& comm = *run.comm;
  const std::size_t count = 333;
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const Buffer send = put(b, t, inputs(comm.rank(), count));
    const Buffer recv(b, count * comm.size() * dtype_bytes(t));
    comm.all_gather(t, send.data(), recv.data(), count);
    b.synchronize();
    const std::vector<double> gathered = get(b, t, recv, count * comm.size());
    for (int r = 0; r < comm.size(); ++r) {
      for (std::size_t i = 0; i < count; ++i) CHECK(gathered[r * count + i] == input(r, i));
    }
    // In place: this process's block already at its rank in the whole, the others' around it.
    std::vector<double> mine(count * comm.size(), 0.0);
    for (std::size_t i = 0; i < count; ++i) mine[comm.rank() * count + i] = input(comm.rank(), i);
    const Buffer whole = put(b, t, mine);
    comm.all_gather(t, whole.as<std::byte>() + comm.rank() * count * dtype_bytes(t), whole.data(), count);
    b.synchronize();
    CHECK(get(b, t, whole, count * comm.size()) == gathered);
  }
}

TEST_CASE("comm: reduce-scatter gives each process its block of the sum, apart and in place") {
  Run run;
  Backend& b = *run.backend;
  Communicator& comm = *run.comm;
  const std::size_t count = 250;
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const Buffer send = put(b, t, inputs(comm.rank(), count * comm.size()));
    const Buffer recv(b, count * dtype_bytes(t));
    comm.reduce_scatter(t, send.data(), recv.data(), count);
    b.synchronize();
    const std::vector<double> block = get(b, t, recv, count);
    for (std::size_t i = 0; i < count; ++i) CHECK(block[i] == total(comm.size(), comm.rank() * count + i));
    // Apart, the input is as it was.
    CHECK(get(b, t, send, count * comm.size()) == inputs(comm.rank(), count * comm.size()));
    // In place: the sum lands in this process's own block of the input.
    const std::size_t own = count * static_cast<std::size_t>(comm.rank());
    comm.reduce_scatter(t, send.data(), send.as<std::byte>() + own * dtype_bytes(t), count);
    b.synchronize();
    const std::vector<double> whole = get(b, t, send, count * comm.size());
    for (std::size_t i = 0; i < count; ++i) CHECK(whole[own + i] == total(comm.size(), own + i));
  }
}

TEST_CASE("comm: broadcast from the last rank reaches every process") {
  Run run;
  Backend& b = *run.backend;
  Communicator& comm = *run.comm;
  const std::size_t count = 77;
  const int root = comm.size() - 1;
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const Buffer data = put(b, t, inputs(comm.rank(), count));
    comm.broadcast(t, data.data(), count, root);
    b.synchronize();
    CHECK(get(b, t, data, count) == inputs(root, count));
  }
}

TEST_CASE("comm: send and receive around a ring") {
  Run run;
  Backend& b = *run.backend;
  Communicator& comm = *run.comm;
  const int n = comm.size(), me = comm.rank();
  if (n == 1) {
    CHECK_THROWS_AS(comm.send(DType::kF32, nullptr, 0, 1), DeviceError);
    return;
  }
  const std::size_t count = 4096;
  const Buffer mine = put(b, DType::kBf16, inputs(me, count)), theirs(b, count * dtype_bytes(DType::kBf16));
  const int next = (me + 1) % n, previous = (me + n - 1) % n;
  // Even ranks send first and odd ranks receive first, so blocking sends cannot all wait.
  if (me % 2 == 0) comm.send(DType::kBf16, mine.data(), count, next);
  comm.recv(DType::kBf16, theirs.data(), count, previous);
  if (me % 2 == 1) comm.send(DType::kBf16, mine.data(), count, next);
  b.synchronize();
  CHECK(get(b, DType::kBf16, theirs, count) == inputs(previous, count));
}

// Process `from`'s message `which` to `to`, `bytes` long.
HostBytes message(int from, int to, int which, std::size_t bytes) {
  HostBytes m(bytes);
  for (std::size_t i = 0; i < bytes; ++i) m[i] = static_cast<std::byte>((from * 31 + to * 7 + which * 3 + i) & 0xff);
  return m;
}

TEST_CASE("comm: posted messages arrive without a meeting, each tag's in the order posted") {
  Run run;
  Communicator& comm = *run.comm;
  const int n = comm.size(), me = comm.rank();
  if (n == 1) {
    CHECK_THROWS_AS(comm.post({}, 1, 0), DeviceError);
    CHECK_THROWS_AS(comm.take(nullptr, 0, 1, 0), DeviceError);
    comm.finish_posted();
    return;
  }
  // Every process posts to every other before it takes anything (a blocking send of the large
  // one would wait for its receive): two of tag 5, the large one (past any eager limit, in huge
  // pages) then an empty one, and then one of tag 3.
  constexpr std::size_t kLarge = 3 * kHugePage + 100;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    comm.post(message(me, peer, 0, kLarge), peer, 5);
    comm.post({}, peer, 5);
    comm.post(message(me, peer, 2, 100), peer, 3);
  }
  // Tag 3's first: a message does not wait behind earlier ones of another tag.
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    HostBytes small(100), large(kLarge);
    comm.take(small.data(), small.size(), peer, 3);
    comm.take(large.data(), large.size(), peer, 5);
    comm.take(nullptr, 0, peer, 5);
    CHECK(small == message(peer, me, 2, 100));
    CHECK(large == message(peer, me, 0, kLarge));
  }
  comm.finish_posted();
  CHECK_THROWS_AS(comm.post({}, (me + 1) % n, Communicator::kPostTags), DeviceError);
  comm.barrier();
}

TEST_CASE("comm: host-side agreement on the largest value and broadcast bytes") {
  Run run;
  Communicator& comm = *run.comm;
  CHECK(comm.max(static_cast<double>(comm.rank())) == comm.size() - 1);
  std::string word = comm.rank() == 0 ? "hetrl" : "?????";
  comm.broadcast_host(word.data(), word.size(), 0);
  comm.barrier();
  CHECK(word == "hetrl");
}

TEST_CASE("comm: split into the even and the odd processes, ranked in reverse, each summing its own") {
  Run run;
  Backend& b = *run.backend;
  Communicator& comm = *run.comm;
  const int rank = comm.rank(), size = comm.size();
  std::unique_ptr<Communicator> part = comm.split(rank % 2, -rank);
  // The part's members, in the order of their keys (highest world rank first).
  std::vector<int> members;
  for (int r = size - 1; r >= 0; --r) {
    if (r % 2 == rank % 2) members.push_back(r);
  }
  REQUIRE(part->size() == static_cast<int>(members.size()));
  CHECK(members[static_cast<std::size_t>(part->rank())] == rank);
  const std::size_t count = 37;
  for (DType t : kTypes) {
    CAPTURE(dtype_name(t));
    const Buffer data = put(b, t, inputs(rank, count));
    part->all_reduce(t, data.data(), data.data(), count);
    b.synchronize();
    const std::vector<double> sum = get(b, t, data, count);
    for (std::size_t i = 0; i < count; ++i) {
      double expected = 0;
      for (const int r : members) expected += input(r, i);
      CAPTURE(i);
      CHECK(sum[i] == expected);
    }
  }
  CHECK_THROWS_AS(comm.split(-1, 0), DeviceError);
}

}  // namespace
}  // namespace hetrl::device
