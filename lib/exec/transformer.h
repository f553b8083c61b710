#pragma once
// A decoder-only transformer of a catalogue architecture on one device of the device layer,
// with random weights from a seed: what hetrl-exec runs for each task of a plan.
//
// Reading map: the Llama/Qwen block (docs/architecture.md, "exec"): token embedding; per layer
// RMSNorm, Q/K/V projections (with biases where the architecture has them, and per-head
// RMSNorm of q and k where it has qk_norm), RoPE, grouped-query causal attention over a KV
// cache, the output projection added to the residual, RMSNorm, the SwiGLU MLP added to the
// residual; a final RMSNorm and a head: the language-model head over the vocabulary (tied to
// the embedding where the architecture ties them), or one scalar per token (a critic's value
// or a reward model's score).
//
// Entry points: score (a batch of whole sequences, each token's output; what the scoring tasks
// run); prefill / decode over a Cache (what generation runs, one prompt's prefill into its
// cache slot, then decode steps over whichever sequences are still generating); forward /
// backward / step (training, gradients summed over micro-batches); load (the reshard from
// another layout). The model may be one tensor-parallel split of several (TensorParallel),
// its shards here or over processes. Activations live in a workspace (and, for a training
// forward, in per-layer buffers) that grow to the largest step and are reused, so
// steady-state steps allocate nothing, until release_workspace gives them back.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "device/backend.h"
#include "workload/model.h"

namespace hetrl::exec {

// How much smaller to run a catalogue model (0 keeps the model's own value): fewer layers, a
// narrower hidden size (heads, kv heads and the MLP narrowed with it, head_dim kept), a
// smaller vocabulary.
struct Scale {
  int layers = 0;
  int hidden = 0;
  int vocab = 0;
};

// The architecture scaled; throws core::InputError when the scale cannot apply (a hidden size
// that is not a multiple of head_dim, or larger than the model's).
workload::ModelArch scaled(const workload::ModelArch& arch, const Scale& scale);

// kLanguage: logits over the vocabulary (actor, reference); kScalar: one value per token
// (critic, reward model).
using workload::Head;

// Tensor parallelism inside the model, as Megatron splits it: each of `size` shards holds
// heads / size of the attention heads (and of the kv heads) and about ffn / size of the MLP's
// width; the partial outputs of the attention's and the MLP's last projections (and in the
// backward pass the partial input gradients of the first ones) are summed over the shards.
// Norms, the embedding and the head are whole on every shard. A process holds the shards
// `local` names (empty: all of them, one after another on its device) and `all_reduce` sums a
// buffer over the processes of the group (empty: every shard is in this process). `timed`:
// the transport's all-reduces return when done (MPI's, on the host), so the host seconds in the
// activations' ones are the process's time in them, its wait for the group's slowest with it.
struct TensorParallel {
  int size = 1;
  std::vector<int> local;
  std::function<void(device::DType, void* data, std::size_t count)> all_reduce;
  bool timed = false;
};

// Host seconds and count of a model's activation all-reduces (TensorParallel::timed).
struct CollectiveTime {
  double seconds = 0;
  long long calls = 0;
};

// Pipeline parallelism, as Megatron splits a model into stages: this model is the stage of
// layers [first_layer, first_layer + layers); the first stage holds the embedding, the last the
// final norm and the head (and, with tied embeddings and the language head, a copy of the
// embedding, whose gradient the two stages sum). Layers keep their index in the whole model
// (parameter names, the reshard's pieces). Stages in other processes are reached through the
// hooks, each called by the stage with what it hands on or takes; a stage alone (first and
// last) calls none. A stage that is not the first takes its input rows of the residual stream
// (rows x hidden in the model's dtype) from receive_activations; one that is not the last
// hands its output rows to send_activations, and in the backward pass takes their gradient
// from receive_gradients and hands its input rows' gradient to send_gradients. share_tokens
// takes the last stage's sampled tokens to every stage (filled on the others);
// sum_tied_embedding sums the first and last stages' embedding gradients into both (fp32);
// sum_over_stages sums host values over the stages (the gradient norm's squares).
struct PipelineParallel {
  int first_layer = 0;
  int layers = 0;  // 0: every layer from first_layer on
  std::function<void(void* data, std::size_t bytes)> receive_activations;
  std::function<void(const void* data, std::size_t bytes)> send_activations;
  std::function<void(void* data, std::size_t bytes)> receive_gradients;
  std::function<void(const void* data, std::size_t bytes)> send_gradients;
  std::function<void(int* tokens, std::size_t count)> share_tokens;
  std::function<void(float* gradient, std::size_t count)> sum_tied_embedding;
  std::function<void(double* values, int count)> sum_over_stages;
};

struct TransformerOptions {
  device::DType dtype = device::DType::kBf16;
  TensorParallel tp;
  PipelineParallel pp;
  std::uint64_t seed = 1;
  float rope_theta = 1e6f;  // Qwen's base; the cost does not depend on it
  float norm_eps = 1e-6f;
};

class Transformer {
 public:
  // Allocates and initialises the weights on the backend (uniform, standard deviation 0.02 for
  // matrices, norms 1, biases 0): throws device::DeviceError when they do not fit.
  Transformer(device::Backend& backend, const workload::ModelArch& arch, Head head, const TransformerOptions& options);
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const workload::ModelArch& arch() const { return arch_; }
  Head head() const { return head_; }
  // The layers this model holds: [first, first + count) of the architecture's.
  struct Layers {
    int first = 0, count = 0;
  };
  Layers layers() const { return {first_layer_, static_cast<int>(layers_.size())}; }
  bool first_stage() const { return first_layer_ == 0; }
  bool last_stage() const { return first_layer_ + static_cast<int>(layers_.size()) == arch_.layers; }
  device::DType dtype() const { return options_.dtype; }
  // The activations' tensor-parallel all-reduces so far, where they are timed (null: not).
  const CollectiveTime* collective_time() const { return options_.tp.timed ? &collective_time_ : nullptr; }
  std::size_t parameter_bytes() const;
  // Gives back the workspace and the finished training passes' buffers (to the backend, whose
  // allocator keeps large blocks for reuse): what a task leaves behind when it ends, as a
  // framework's temporaries go with their step, so that a GPU's models do not each hold theirs
  // through the other tasks' turns. A training forward's pass awaiting its backward stays.
  void release_workspace();

  // Every parameter tensor this process holds, by name ("embedding", "layer.3.wq",
  // "final_norm", "head"; the matrices [out][in]; a tensor-parallel shard's slice with its
  // shard after a slash, "layer.3.wq/1"; a pipeline stage's layers by their index in the whole
  // model), in the model's dtype: what a weight sync sends and a test reads.
  struct Tensor {
    std::string name;
    device::Buffer* buffer = nullptr;
    std::size_t count = 0;  // elements
  };
  std::vector<Tensor> parameters();

  // Takes another model's weights: the same architecture and head, the other holding every
  // shard of its tensor-parallel split, which may differ from this one's, and every layer this
  // one holds (a trainer's layout into an inference engine's: the reshard); this one fills the
  // shards and layers it holds. Its own optimiser state is dropped (a model that loads weights
  // is not the one being trained).
  void load(const Transformer& from);

  // The reshard one pair of shards at a time, as a weight sync over processes moves it: what
  // shard `to_shard` of one layout takes from shard `from_shard` of another (with `whole`, also
  // the tensors every shard holds whole: the embedding, the norms, the head), of the layers
  // both stages hold (the embedding from the first stage, the final norm, the head and a tied
  // embedding's copy from the last), piece by piece in a fixed order. load_shard copies it from a model in this process. send_shard hands each
  // piece of this model's shard, for a TP `to_tp` layout, to `send` (a stretch of a tensor
  // straight from it, a block of a matrix's columns gathered first); receive_shard takes the
  // same pieces, in the same order, from `receive` into this model's shard (a stretch straight
  // into the tensor). Both sides hold their shard here.
  using SendPiece = std::function<void(const void* data, std::size_t bytes)>;
  using ReceivePiece = std::function<void(void* data, std::size_t bytes)>;
  void load_shard(const Transformer& from, int from_shard, int to_shard, bool whole);
  void send_shard(int from_shard, int to_tp, int to_shard, bool whole, Layers to_layers, const SendPiece& send);
  void receive_shard(int from_tp, int from_shard, Layers from_layers, int to_shard, bool whole,
                     const ReceivePiece& receive);

  // The KV cache of `slots` sequences of at most `capacity` positions each.
  class Cache {
   public:
    int slots() const { return slots_; }
    int capacity() const { return capacity_; }

   private:
    friend class Transformer;
    int slots_ = 0, capacity_ = 0;
    std::vector<device::Buffer> k, v;  // per layer and local shard: [slot][position][kv_head][head_dim]
  };
  Cache make_cache(int slots, int capacity);

  // The outputs of `batch` whole sequences of `length` tokens each (tokens [sequence][position],
  // positions from 0): for the language head the log-probability of each next token
  // ([sequence][length - 1]), for the scalar head each token's value ([sequence][length]).
  // Each sequence runs up to its own end (ends[s] tokens, padding after them that is never
  // computed: the sequences are packed, as engines run variable-length batches; empty: `length`
  // each), and its outputs past the end are 0. The language head runs only over the positions
  // scored: from `first` (a response's first token's predecessor) to the end; the others are 0.
  std::vector<float> score(const std::vector<int>& tokens, int batch, int length, int first = 0,
                           const std::vector<int>& ends = {});

  // Runs a prompt into cache slot `slot` from position 0 and returns its last position's
  // logits (device buffer of vocab values in the model's dtype, valid until the next call).
  const device::Buffer& prefill(Cache& cache, int slot, const std::vector<int>& prompt);
  // Runs prompts of `length` tokens each (tokens [prompt][position]) together, prompt i into
  // cache slot slots[i] (each slot once), as an engine batches the prompts it schedules in one
  // step; returns each prompt's last position's logits, [prompt][vocab].
  const device::Buffer& prefill(Cache& cache, const std::vector<int>& slots, const std::vector<int>& tokens,
                                int length);

  // One decode step: token tokens[i] of the sequence in cache slot slots[i] at positions[i]
  // (its cache holds the positions before); returns the logits, [row][vocab] as prefill's.
  // A stage that is not the last hands its rows on and returns no logits (an empty buffer).
  const device::Buffer& decode(Cache& cache, const std::vector<int>& slots, const std::vector<int>& tokens,
                               const std::vector<int>& positions);

  // The next tokens from logits [rows][vocab] (kernels.h sample_row), one per (sequence id,
  // position): temperature 0 takes the largest logit. The last stage samples them and every
  // stage returns them (PipelineParallel::share_tokens).
  std::vector<int> sample(const device::Buffer& logits, int rows, float temperature, std::uint64_t seed,
                          const std::vector<int>& sequences, const std::vector<int>& positions);

  // Training, one micro-batch at a time: forward keeps what the backward pass needs and
  // returns the outputs score would; backward takes d loss / d output for each of them (same
  // layout) and adds the parameters' gradients into fp32 accumulators, so several
  // micro-batches make one mini-batch; step applies AdamW to every parameter (fp32 master
  // weights and moments, kept from the first step on) and clears the gradients. Several
  // forwards may wait for their backward passes, which take them first in, first out (a
  // pipeline stage runs every micro-batch's forward, then every backward). A stage that is not
  // the last returns no outputs and its backward takes no output gradients (empty).
  std::vector<float> forward(const std::vector<int>& tokens, int batch, int length, int first = 0,
                             const std::vector<int>& ends = {});
  void backward(const std::vector<float>& doutput);
  void step(const device::AdamW& options);
  // ZeRO's sharded optimiser (stages 1 and 2, as Megatron's distributed optimiser runs them):
  // the parameters flattened in parameters() order, cut into even stretches, one a
  // data-parallel process, which keeps the fp32 master weights and moments of its stretch
  // only. step() is begin_step (the sums the shards of a tensor-parallel split share, and the
  // step's count), update over every stretch, end_step (the gradients cleared); a process of a
  // sharded optimiser updates its own stretch, after its gradients' sum came to it (a
  // reduce-scatter of flat_gradients), and takes the others' updated weights (an all-gather of
  // flat_weights).
  struct Stretch {
    std::size_t first = 0, last = 0;  // elements of the flattened parameters
  };
  std::size_t parameter_count();
  // Part `part` of `parts`: ceil(count / parts) elements from part * that (the last shorter).
  Stretch partition(int part, int parts);
  void begin_step();
  void update(const device::AdamW& options, Stretch stretch);
  void end_step();
  // Every parameter's gradient kept in one flat fp32 buffer of `elements` (at least
  // parameter_count(); zeros past the last parameter), in parameters() order, as Megatron's
  // gradient buffer: the backward passes accumulate into it and a sharded optimiser's
  // reduce-scatter sums it in place, without copying the gradients out and back. Gradients
  // accumulated so far are kept; a parameter no backward reached has zeros.
  float* flat_gradients(std::size_t elements);
  // The weights the same way (the model's dtype; Megatron's parameter buffer): a sharded
  // optimiser's step updates its stretch there and the all-gather fills the rest in place.
  void* flat_weights(std::size_t elements);
  // The accumulated gradient of a parameter (fp32, as parameters() names it); empty before any
  // backward pass.
  std::vector<float> gradient(const std::string& name);
  // Hands every parameter's accumulated gradient (fp32; zeros where no backward pass reached
  // it), in parameters() order, to `sum`: the data-parallel all-reduce before a step.
  void reduce_gradients(const std::function<void(float* data, std::size_t count)>& sum);
  // The L2 norm of every accumulated gradient together (what trainers log as grad_norm);
  // reads them back to the host. Over a stretch, its squares (whole tensors', the shards' own)
  // summed by `over_replicas` over the data-parallel processes holding the other stretches.
  double gradient_norm();
  double gradient_norm(Stretch stretch, const std::function<void(double* squares, int count)>& over_replicas);

  // ZeRO-3 (fully sharded data parallel, as PyTorch's FSDP runs it) over a data-parallel group
  // of processes that hold this model's layout. The parameters fall into units: the embedding,
  // each layer, the tail (final norm and head); each unit's tensors, flattened in parameters()
  // order, are cut into even stretches, one a process, which keeps its stretch of the weights,
  // of the summed gradients (fp32) and of the Adam state, and nothing else between passes. A
  // pass gathers a unit's weights whole (all-gather) just before it uses them and frees them
  // after; the backward pass reduce-scatters a unit's gradients (crossing in `reduce`) once they
  // are complete, each process adding the sum of its stretch to its own. Every process of the
  // group runs the same passes in the same order; one with fewer micro-batches than the others
  // runs idle ones (idle_forward, idle_backward), which take part in the collectives with no
  // rows. A step is begin_step, update_shards, end_step; gradient_norm sums over the group.
  // Whole operations (load, the reshard, the per-stretch optimiser, generation) need the weights
  // whole: gather_weights gathers every unit and leaves the mode (the shards and the Adam state
  // stay for the next shard_weights).
  struct WeightSharding {
    int rank = 0, size = 1;
    device::DType reduce = device::DType::kF32;
    // The group's collectives (device/comm.h): count elements a process.
    std::function<void(device::DType, const void* send, void* recv, std::size_t count)> all_gather;
    std::function<void(device::DType, const void* send, void* recv, std::size_t count)> reduce_scatter;
    std::function<void(double* values, int count)> sum;  // host values summed over the group
    // The collectives return when done (MPI's, on the host): the host seconds in the gathers
    // and reduce-scatters are the process's time in them (sharding_time).
    bool timed = false;
  };
  void shard_weights(const WeightSharding& sharding);
  void gather_weights();
  bool weights_sharded() const { return sharded_; }
  // ZeRO-3's gathers and gradient reduce-scatters so far (with their copies and casts), where
  // they are timed (WeightSharding::timed).
  const CollectiveTime& sharding_time() const { return sharding_time_; }
  void idle_forward();
  void idle_backward();
  void update_shards(const device::AdamW& options);

 private:
  // What a tensor-parallel shard holds of every layer: its heads and kv heads, its columns of
  // the MLP.
  struct ShardShape {
    int index = 0;
    int first_head = 0, heads = 0, first_kv = 0, kv_heads = 0, first_ffn = 0, ffn = 0;
  };
  struct ShardWeights {
    device::Buffer wq, wk, wv, bq, bk, bv, wo, w_gate, w_up, w_down;
  };
  struct Layer {
    device::Buffer attn_norm, q_norm, k_norm, mlp_norm;
    std::vector<ShardWeights> shards;  // the local shards, as shards_ orders them
  };
  // A layer's activations kept for its backward pass (training forward only). Layers are
  // held from first_layer_ on: layers_[i] is layer first_layer_ + i of the whole model.
  struct SavedShard {
    device::Buffer q_raw, k_raw, q, k, v, o, lse, gate, up;
  };
  struct Saved {
    device::Buffer x_in, h, x_mid, h2;
    std::vector<SavedShard> shards;
  };
  // Where a step's keys and values go: into `cache` at rows `rows_at` (prefill and decode, `batch`
  // sequences of `queries` tokens each), or, for whole sequences (score, forward), kept in the
  // workspace as the step's own, the sequences packed without padding: sequence s is rows
  // starts[s] to starts[s + 1]. tokens and positions are per row.
  struct Step {
    int batch = 0, queries = 0;
    Cache* cache = nullptr;
    std::vector<int> tokens, positions, lengths, slots, rows_at, starts;
    // A packed step's sequence s: its first row, its tokens.
    int start(int s) const { return starts[static_cast<std::size_t>(s)]; }
    int length_of(int s) const { return start(s + 1) - start(s); }
  };
  // The positions the language head scores: each sequence's [first, end) of the final states'
  // rows, gathered one sequence after another.
  struct Scored {
    struct Run {
      // Positions [first, first + count) of the sequence, packed row `row` on; gathered from row `at`.
      int sequence = 0, first = 0, count = 0, at = 0, row = 0;
    };
    std::vector<Run> runs;
    int rows = 0;
    int length = 0;
  };
  // What a training forward leaves for backward: its step, the padded length its caller uses,
  // each layer's activations, the residual stream after the last layer and its norm, the
  // positions scored.
  struct Pass {
    Step step;
    int length = 0;
    std::vector<Saved> saved;
    device::Buffer x_out, final_states;
    Scored scored;
  };
  static ShardShape shard_shape(const workload::ModelArch& arch, int tp, int index);
  // The weight tensors, by kind, for the reshard.
  enum class Weight { kEmbedding, kFinalNorm, kHead, kAttnNorm, kQNorm, kKNorm, kMlpNorm, kWq, kWk, kWv, kBq, kBk, kBv, kWo, kGate, kUp, kDown };
  // One stretch of a tensor the reshard moves: `rows` runs of `run` elements, `from` and `to`
  // elements into the tensors of the two shards, their rows `from_pitch` and `to_pitch` apart.
  struct Piece {
    Weight weight;
    int layer;  // -1 for the embedding, the final norm and the head
    std::size_t from, from_pitch, to, to_pitch, run, rows;
  };
  // The pieces a stage of `from_layers` holds of shard `from` and one of `to_layers` takes
  // into shard `to`.
  std::vector<Piece> pieces(const ShardShape& from, Layers from_layers, const ShardShape& to, Layers to_layers,
                            bool whole) const;
  std::size_t local_shard(int index) const;  // where shards_ holds shard `index`
  const Layer& layer(int index) const;       // by its index in the whole model
  // The parameter names' prefix of layers_[local]: "layer.N." with N its index in the whole model.
  std::string layer_prefix(std::size_t local) const;
  // The language head is the embedding (tied): a pipeline's last stage holds a copy of it.
  bool tied_head() const { return arch_.tied_embeddings && head_ == Head::kLanguage; }
  const device::Buffer& weight(Weight w, int layer, int shard) const;
  device::Buffer& weight(Weight w, int layer, int shard);
  void check_reshard(const Transformer& from) const;
  static Scored scored_positions(const Step& step, int length, int first);
  // A parameter's optimiser state: fp32 gradient, and from the first step master weights and
  // moments of each stretch of it this model updates (all of it, unless sharded).
  struct Moments {
    std::size_t first = 0;  // elements into the tensor
    device::Buffer master, m, v;
  };
  struct Optimizer {
    device::Buffer grad;
    std::vector<Moments> moments;
  };
  // Calls f(tensor, first element in it, count, elements into the stretch) for each tensor's
  // piece of the stretch, in order.
  void for_each_piece(Stretch stretch, const std::function<void(const Tensor&, std::size_t, std::size_t, std::size_t)>& f);
  // The final hidden states of the step's rows, after the last norm (the last stage; another
  // hands its output rows on and returns them). A training forward keeps its activations in
  // `keep`.
  const device::Buffer& run_layers(const Step& step, Pass* keep = nullptr);
  // A step of `batch` whole sequences of `length` tokens from position 0, each up to its end
  // (score, forward), packed; throws core::InputError naming `what` for tokens that do not
  // make them.
  Step whole_sequences(const std::vector<int>& tokens, int batch, int length, const std::vector<int>& ends,
                       const char* what) const;
  device::PackedAttention packed_shape(int batch, int rows, const ShardShape& shard) const;
  // The language head's logits of `rows` rows of the final states from row `first`.
  void head_logits(const device::Buffer& states, int first, int rows, device::Buffer& logits);
  const device::Buffer& language_head() const { return arch_.tied_embeddings ? embedding_ : lm_head_; }
  // Rows of logits computed at a time (kLogitChunk values at most).
  int logit_chunk() const;
  // The head over a whole-sequence step's final states: log-probabilities of next tokens or
  // scalars, as score lays them out.
  std::vector<float> head_outputs(const device::Buffer& final_states, const Step& step, int length,
                                  const Scored& scored);
  // The language head's rows gathered from the final states into one block, and their next
  // tokens.
  const device::Buffer& scored_rows(const device::Buffer& final_states, const Scored& scored);
  static std::vector<int> scored_targets(const std::vector<int>& packed, const Scored& scored);
  void linear_backward(const device::Buffer& x, const device::Buffer& w, const device::Buffer& dy, device::Buffer* dx,
                       bool accumulate_dx, const std::string& weight, int rows, int in, int out);
  device::Buffer& grad(const std::string& name);
  void add_grad(const std::string& name, const device::Buffer& fp32, std::size_t count);
  device::Buffer& scratch(const std::string& name, std::size_t bytes);
  device::Buffer& upload_ints(const std::string& name, const std::vector<int>& values);
  device::Buffer& upload_floats(const std::string& name, const std::vector<float>& values);
  device::Buffer make_weight(std::size_t count, float bound);
  device::Buffer make_block(const device::Block& block, float bound, std::uint64_t seed);
  std::uint64_t next_seed();  // each weight tensor's own seed, in a fixed order
  device::Buffer make_constant(std::size_t count, float value);
  void linear(const device::Buffer& x, const device::Buffer& w, device::Buffer& y, int rows, int in, int out,
              bool accumulate = false);
  // Sums a partial result over the shards in other processes (a no-op when all are here).
  void reduce(device::Buffer& x, std::size_t count);
  // The name of a sharded tensor of this model: with its shard where there are several.
  std::string shard_name(const std::string& name, const ShardShape& shard) const;

  // ZeRO-3's units (shard_weights): each tensor at `at` elements into its unit's flattened
  // parameters; this process's stretch [chunk * rank, + chunk) of the unit's weights, of its
  // gradients' sum and of the Adam state (master weights, moments; made at the first update).
  struct UnitTensor {
    std::string name;
    device::Buffer* buffer = nullptr;
    std::size_t count = 0, at = 0;
  };
  struct Unit {
    std::vector<UnitTensor> tensors;
    std::size_t count = 0, chunk = 0;
    bool gathered = true;
    device::Buffer own, own_grad, master, m, v;
    // While a pass uses them: the gathered weights, and the gradients of the pass (the unit's
    // tensors views of them).
    device::Buffer whole, grads;
  };
  // The elements of a unit's stretch here that are parameters (the last stretch may be short).
  std::size_t own_count(const Unit& unit) const;
  // Every stretch of a unit, the last padded to the others' length: what a gather fills.
  std::size_t whole_count(const Unit& unit) const { return unit.chunk * static_cast<std::size_t>(sharding_.size); }
  // The unit holding the parameter `name`, and its place there; nulls where none does.
  std::pair<Unit*, const UnitTensor*> unit_of(const std::string& name);
  // The unit's gradients of the pass, made as zeros at the first that comes.
  float* unit_gradients(Unit& unit);
  int layer_unit(std::size_t local) const { return layer_units_ + static_cast<int>(local); }
  // No-ops unless the weights are sharded; a unit of -1 is none.
  void gather_unit(int unit);
  void release_unit(int unit);
  void scatter_gradients(int unit);
  // The sums a layer's gradients need over the tensor-parallel shards (the qk norms', a copied
  // kv head's): begin_step's, or under ZeRO-3 each layer's before its gradients leave.
  void share_layer_gradients(std::size_t local);
  void check_whole(const char* what) const;
  std::size_t parameter_elements(const std::string& name);
  // The norm's squares (whole tensors', tensor-parallel shards') summed over the shards and stages.
  double norm_of(double* squares);

  device::Backend& b_;
  workload::ModelArch arch_;
  Head head_;
  TransformerOptions options_;
  CollectiveTime collective_time_;
  std::uint64_t next_seed_;
  std::size_t parameter_bytes_ = 0;
  device::Buffer embedding_, final_norm_, lm_head_;  // lm_head_: vocab x hidden, or 1 x hidden (scalar head)
  std::vector<ShardShape> shards_;  // the local shards
  int first_layer_ = 0;
  std::vector<Layer> layers_;
  std::map<std::string, device::Buffer> workspace_;
  std::deque<Pass> passes_;  // training forwards awaiting their backward, oldest first
  std::vector<Pass> spare_;  // passes done, their buffers to reuse
  std::map<std::string, Optimizer> optimizer_;
  // Where the gradients, or the weights, are views of one buffer (flat_gradients, flat_weights).
  device::Buffer flat_gradients_, flat_weights_;
  int steps_ = 0;  // optimiser steps taken (AdamW's bias correction)
  // ZeRO-3: the units (the embedding's, the layers' from layer_units_ on, the tail's; -1 where
  // this model holds none), whether the weights are sharded now, and the buffers of a
  // reduce-scatter in another type than fp32, sized to the largest unit.
  std::vector<Unit> units_;
  int embedding_unit_ = -1, layer_units_ = 0, tail_unit_ = -1;
  WeightSharding sharding_;
  bool sharded_ = false;
  CollectiveTime sharding_time_;
  device::Buffer sent_, received_, mine_;
};

}  // namespace hetrl::exec
