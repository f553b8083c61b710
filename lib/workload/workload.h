#pragma once
// An RL post-training job: the algorithm, the model behind each role, the batch of one
// iteration, the prompt and response lengths, the mini-batches and epochs of training, and
// the mode (sync, or async with a staleness bound).

#include <array>
#include <string>

#include "workload/algorithm.h"
#include "workload/lengths.h"
#include "workload/model.h"

namespace hetrl::workload {

struct RoleModel {
  enum class Kind { kNone, kModel, kRule };
  Kind kind = Kind::kNone;
  std::string model;  // kModel: a name in the model catalogue
};

enum class Mode { kSync, kAsync };

// The half-precision format weights, activations and tensor-core math use (fp32 accumulation
// and optimizer state either way). kAuto: BF16 where a GPU has it, FP16 where it has not (V100,
// T4: a plan mixing them runs its tasks in FP16 there, at the FP16 peak).
enum class Precision { kAuto, kBf16, kFp16 };
const char* precision_name(Precision precision);

// How the trainer runs the element-wise work of scoring and training passes (norms, rotary
// embedding, the MLP activation, casts): fused kernels (Megatron, torch.compile, Liger) or one
// PyTorch operator at a time on Hugging Face models (eager mode: verl's and OpenRLHF's FSDP
// workers by default), each operator reading and writing memory. Generation engines fuse.
enum class TrainerKernels { kFused, kEager };

// The precision the trainers' gradients cross the data-parallel group in: fp32 (verl's FSDP
// mixed precision by default, Megatron for bf16 models: gradients accumulated and reduced in
// fp32) or bf16 (FSDP with reduce_dtype bf16, as some recipes set to halve the traffic).
enum class GradientReduce { kFp32, kBf16 };

struct Workload {
  std::string algorithm;
  std::array<RoleModel, 4> roles;  // indexed by Role
  int prompts_per_iteration = 0;
  int samples_per_prompt = 1;
  int prompt_length_tokens = 0;
  ResponseLengths response;
  int mini_batches = 1;
  int epochs = 1;
  Mode mode = Mode::kSync;
  int max_staleness = 0;  // async only: generation may run this many iterations ahead
  Precision precision = Precision::kAuto;
  // Tokens per micro-batch of scoring and training passes (packed sequences, as verl's dynamic
  // batch size packs them); 0: the cost model's default.
  int micro_batch_tokens = 0;
  TrainerKernels trainer_kernels = TrainerKernels::kFused;
  GradientReduce gradient_reduce = GradientReduce::kFp32;

  const RoleModel& role(Role r) const { return roles[static_cast<int>(r)]; }
  RoleModel& role(Role r) { return roles[static_cast<int>(r)]; }
  int samples_per_iteration() const { return prompts_per_iteration * samples_per_prompt; }
  // How many iterations generation may run ahead of the weights it uses: 0 when synchronous.
  int staleness() const { return mode == Mode::kAsync ? max_staleness : 0; }

  // Checks the workload against the algorithm's roles and the model catalogue. Throws
  // core::InputError whose text starts with the JSON path of the field at fault, e.g.
  // "/models/critic: ...".
  void validate(const AlgorithmCatalog& algorithms, const ModelCatalog& models) const;
};

}  // namespace hetrl::workload
