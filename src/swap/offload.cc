// ZeRO-Offload and ZeRO-Infinity (offload.h).
//
// Note [Offloaded optimizer step]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// On the device an optimizer step reads the gradient and updates its states
// and the parameter in place. ZeRO-Offload (Ren et al. 2021, sec. 4) runs
// the step on the CPU over the fp32 master copy and sends back only the new
// 16-bit parameter. So the step becomes
//   p.step   (CPU)     in: grad   updates: states   out: p.update (p's size)
//   p.apply  (device)  in: p.update                  updates: p
// and the CPU reads 2 bytes of gradient and writes 2 bytes of parameter per
// parameter over PCIe, as the paper's data-flow graph has it. When the
// parameters themselves live off the device (ZeRO-Infinity), the CPU step
// updates the parameter where it lives, as DeepSpeed's CPU Adam writes the
// 16-bit copy in the same pass, and there is no apply. With fp32
// parameters and no master copy, p.step keeps one (p.master): the CPU must
// hold the values it steps. The CPU step's time is its largest state over
// the profile's CPU Adam throughput (the simulator's host rule). A step of
// several ops (a traced torch.optim step) is fused into one first (Note
// [Traced optimizer steps] in optimizer_steps.cc), so the CPU runs, and is
// timed for, one step per parameter; its temporaries become its workspace.
//
// Note [Steps after backward]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// ZeRO-Offload as its paper evaluates it and DeepSpeed runs it (Ren et al.
// 2021, sec. 4.1; without the delayed parameter update of sec. 5.2) sends
// each gradient to the host as backward produces it, but steps the
// optimizer on the CPU only when backward is over: the training loop calls
// optimizer.step() after loss.backward(). DeepSpeed's own log of GPT-2 10B
// on one V100 shows it: forward 6.1 s, backward 12.6 s, optimizer 7.6 s,
// one after the other, 25.8 s per iteration (docs/_tutorials/
// zero-offload.md). OffloadOptions::steps_after_backward emits the CPU
// steps once the last gradient is out, that one's step first: the host
// runs its steps in plan order, so none starts before backward ends.
// memwall's own plans keep the overlap below (the default).
//
// Note [Offload steps]
// ~~~~~~~~~~~~~~~~~~~~
// apply_offload edits a plan in one pass:
// - placement: states start on the optimizer's tier, parameters on theirs;
// - after the step that last writes a gradient (its producer, the last
//   accumulation, or ZeRO's reduce-scatter) and, for an offloaded parameter,
//   after its last device user, swap the gradient out to the host and run
//   p.step there at once: it overlaps the rest of backward (memwall's
//   schedule; DeepSpeed's waits for backward to end, Note [Steps after
//   backward]), and free the gradient after it (the plan's own free of it
//   is dropped).
//   States on NVMe are read into host memory first and written back after
//   (the simulator issues those moves from the CPU's own position, so the
//   read of step k+1 overlaps step k);
// - p.apply keeps its place (after backward, so no backward op sees a new
//   parameter) and p.update is brought in one apply ahead. An offloaded
//   parameter has no apply: its CPU step writes it at home (read from and
//   written back to NVMe with the states when it lives there);
// - an offloaded parameter is swapped in `prefetch_steps` compute steps
//   before the first step of each run of its users (compute or recompute
//   steps reading it, runs split where they are more than regather_gap
//   compute steps apart) and freed after the run's last user. Its home copy
//   stays where it is, so freeing the device copy costs nothing.
//
// Note [Offloaded shards]
// ~~~~~~~~~~~~~~~~~~~~~~~
// ZeRO-Offload partitions the fp32 master and the optimizer states across
// the ranks (Ren et al. 2021, sec. 4.1; DeepSpeed's stage 2 offload): each
// rank's CPU steps its 1/N shard and sends back the shard's new values,
// which the all-gather after the apply spreads. On a rank graph of stage 1
// or 2 the master copy and the update are therefore ceil(n / N) elements;
// the apply writes the rank's slice of the whole parameter (the executor's
// Note [Shards at run time]). Whole ones made each rank hold, and the
// planner count, the full fp32 master per rank: N times the host memory.
//
// Note [Device chunks]
// ~~~~~~~~~~~~~~~~~~~~
// A split (optimizer_of) may keep some parameters whole on the device:
// parameter, gradient, optimizer states and step, as without offload. The
// device steps a layer in milliseconds where the CPU takes a tenth of a
// second, so each chunk the device holds shortens a CPU-bound iteration
// (issue 23; the CPU term of Note [Lower bound] in planner/bounds.cc is
// the limit), at the price of device memory that activations then lack.
// The step moves from after backward to where a CPU step would go: after
// the last write of its gradient and the last device user of its
// parameter (it updates the parameter in place, so no backward op may come
// after it); the gradient is freed right after it. So the gradient weighs
// nothing in the planning view (as an offloaded one), and the parameter
// and its states weigh their bytes throughout.
//
// Note [Paged optimizer]
// ~~~~~~~~~~~~~~~~~~~~~~
// bitsandbytes' paged optimizers (Dettmers et al. 2023, sec. 3, "Paged
// Optimizers"; what QLoRA trains with) keep the optimizer states in CUDA
// unified memory, which the driver evicts to the host under memory
// pressure and pages back when the GPU's step touches them (bitsandbytes
// prefetches a parameter's states just before its update). In memwall's
// terms the states live on the host and the device runs each step where
// the plan has it, after backward: before a parameter's step its states
// are swapped in, after it they are swapped out again (the step made the
// host copy stale). Nothing is rewritten; the planning view weighs the
// states nothing (they are on the device only around their own step, when
// the activations are gone) and the gradients their bytes (they wait for
// the step, as without offload). Unlike ZeRO-Offload's CPU step, the
// transfers do not overlap backward: the states cross PCIe twice, after
// it.
#include "memwall/swap/offload.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "memwall/base/error.h"
#include "memwall/graph/calls.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/describe.h"
#include "memwall/swap/optimizer_steps.h"

namespace memwall {
namespace {

BufferId add_buffer(Graph& g, const Buffer& like, const std::string& suffix, BufferKind kind,
                    DType dtype) {
  Buffer b = like;
  b.id = static_cast<BufferId>(g.buffers.size());
  b.name = like.name + suffix;
  b.kind = kind;
  b.dtype = dtype;
  b.bytes = checked_mul(element_count(like), dtype_size(dtype), "offload: buffer bytes");
  g.buffers.push_back(std::move(b));
  return g.buffers.back().id;
}

void check_options(const OffloadOptions& o) {
  if (!o.optimizer_of.empty() && o.optimizer == Tier::kDevice) {
    fail("a split of the optimizer states needs the optimizer off the device");
  }
  if (o.params != Tier::kDevice && o.optimizer == Tier::kDevice) {
    fail(
        "offloading parameters needs the optimizer offloaded too (ZeRO-Infinity steps them "
        "on the CPU)");
  }
  if (o.paged &&
      (o.optimizer != Tier::kHost || o.params != Tier::kDevice || !o.optimizer_of.empty())) {
    fail("a paged optimizer keeps every state on the host and the parameters on the device");
  }
  if (o.nvme_read_ahead < 1) {
    fail("the NVMe read-ahead must be at least 1 CPU step (got {})", o.nvme_read_ahead);
  }
  if (o.prefetch_steps < 0 || o.regather_gap < 1) {
    fail("offload prefetch distance must be >= 0 and the regather gap >= 1 (got {} and {})",
         o.prefetch_steps, o.regather_gap);
  }
}

}  // namespace

namespace {

// Note [CPU step calls]: the call of a parameter's CPU step (docs/exec.md)
// is its step's own ops (a fused sequence, or the one op) run on the host
// with the parameter's references meaning its fp32 master copy when it has
// one, which then gives the new values to `update` (the device's copy
// comes from it through apply) or, for a parameter kept off the device, to
// the parameter itself: {"op": "memwall::cpu_step", "steps", "locals",
// "param", "master", "update"}. Empty for a step without calls. A 16-bit
// parameter gets no master here: a traced mixed-precision step keeps its
// own fp32 master among its states and ends by copying it into the
// parameter, so its references to the parameter mean `update` on the host
// (the executor's cpu_step); a step that reads the 16-bit parameter (pure
// 16-bit training) cannot run there and is refused (Note [Call bindings]
// in src/graph/call_bindings.cc).
std::string cpu_step_call(const std::string& call, BufferId param, BufferId master,
                          BufferId update) {
  if (call.empty()) return {};
  nlohmann::json step = nlohmann::json::parse(call);
  nlohmann::json out = {{"op", "memwall::cpu_step"}};
  if (step.value("op", std::string()) == "memwall::sequence") {
    out["steps"] = std::move(step["steps"]);
    out["locals"] = step["locals"];
  } else {
    out["steps"] = nlohmann::json::array({std::move(step)});
    out["locals"] = 0;
  }
  const auto ref = [](BufferId b) {
    return b == kNoBuffer ? nlohmann::json() : nlohmann::json{{"t", b}};
  };
  out["param"] = ref(param);
  out["master"] = ref(master);
  out["update"] = ref(update);
  return out.dump();
}

}  // namespace

OffloadGraph offload_graph(const Graph& graph, const OffloadOptions& options) {
  check_options(options);
  OffloadGraph og;
  og.graph = fuse_optimizer_steps(graph);  // one CPU op per parameter's step
  record_rewrite(graph, og.graph);         // Note [Rewritten graphs]
  const std::vector<ModelState> states = model_states(og.graph);
  if (!options.optimizer_of.empty() && options.optimizer_of.size() != states.size()) {
    fail("the optimizer split names {} states, the graph has {}", options.optimizer_of.size(),
         states.size());
  }
  Graph& g = og.graph;
  // Note [Offloaded shards]: under ZeRO stages 1-2 the rank steps its 1/N
  // shard on the CPU, so its master copy and the update it sends back are
  // shards (stage 3's parameter is one already).
  const nlohmann::json zero = graph.meta.value("zero", nlohmann::json());
  const int ranks = zero.is_object() ? zero.value("ranks", 1) : 1;
  const int stage = zero.is_object() ? zero.value("stage", 0) : 0;
  const auto cut = [&](BufferId b) {
    if (ranks <= 1 || (stage != 1 && stage != 2)) return;
    Buffer& buf = g.buffers[b];
    const uint64_t elements = element_count(buf);
    const uint64_t shard =
        elements / static_cast<uint64_t>(ranks) + (elements % static_cast<uint64_t>(ranks) != 0);
    buf.bytes = shard * dtype_size(buf.dtype);
    buf.shape = Dims{static_cast<int64_t>(shard)};
  };
  std::vector<std::vector<Op>> after(graph.ops.size());
  std::vector<OffloadedState> found;
  found.reserve(states.size());
  for (const ModelState& s : states) {
    OffloadedState o{.param = s.param, .grad = s.grad, .states = s.states, .step = s.step};
    if (options.paged || options.optimizer_tier(found.size()) == Tier::kDevice) {
      o.on_device = true;  // Note [Device chunks]: its own step, kept
      o.paged = options.paged;
      found.push_back(std::move(o));
      continue;
    }
    const Buffer param = g.buffers[s.param];
    if (param.dtype == DType::kF32) {
      o.states.push_back(add_buffer(g, param, ".master", BufferKind::kOptimState, DType::kF32));
      cut(o.states.back());
    }
    Op& step = g.ops[s.step];
    step.updates = BufferIds(o.states.begin(), o.states.end());
    const BufferId master = param.dtype == DType::kF32 ? o.states.back() : kNoBuffer;
    if (options.params != Tier::kDevice) {
      // The parameter lives with the CPU: the step writes it directly.
      step.updates.push_back(s.param);
      step.call = cpu_step_call(step.call, s.param, master, kNoBuffer);
      found.push_back(std::move(o));
      continue;
    }
    o.update = add_buffer(g, param, ".update", BufferKind::kTemp, param.dtype);
    cut(o.update);
    step.out = {o.update};
    step.call = cpu_step_call(step.call, s.param, master, o.update);
    if (master == kNoBuffer && !step.call.empty() &&
        !call_only_overwrites(call_object(step.call), param)) {
      fail(
          "the optimizer step of {} reads the 16-bit parameter itself (no fp32 master copy), "
          "which the host does not hold: its step stays on the device",
          param.name);
    }
    Op apply;
    apply.name = param.name + ".apply";
    apply.type = "copy";
    apply.phase = Phase::kOptimizer;
    apply.in = {o.update};
    apply.updates = {s.param};
    apply.bytes = 2.0 * static_cast<double>(g.buffers[o.update].bytes);
    if (!step.call.empty()) {
      apply.call =
          nlohmann::json{
              {"op", "memwall::apply"}, {"from", {{"t", o.update}}}, {"to", {{"t", s.param}}}}
              .dump();
    }
    after[s.step].push_back(std::move(apply));
    found.push_back(std::move(o));
  }
  // Renumber with each apply right after its step.
  std::vector<Op> ops;
  ops.reserve(g.ops.size() + found.size());
  std::vector<OpId> new_id(g.ops.size());
  std::vector<OpId> apply_of(g.ops.size(), kNoOp);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    new_id[i] = static_cast<OpId>(ops.size());
    ops.push_back(std::move(g.ops[i]));
    ops.back().id = new_id[i];
    for (Op& a : after[i]) {
      apply_of[i] = static_cast<OpId>(ops.size());
      a.id = apply_of[i];
      ops.push_back(std::move(a));
    }
  }
  g.ops = std::move(ops);
  if (options.paged) {
    g.name += " (paged optimizer)";
  } else {
    g.name += options.params == Tier::kDevice ? " (CPU optimizer)"
                                              : " (CPU optimizer, parameters off the device)";
  }
  for (OffloadedState& o : found) {
    if (o.update >= 0) o.apply = apply_of[o.step];
    o.step = new_id[o.step];
  }
  og.states = std::move(found);
  // Note [Frozen parameters]
  // LoRA's base weights (and a traced parameter that gets no gradient)
  // have no step: nothing to run on the CPU and nothing to write back. With
  // parameters off the device they are streamed in per run of their users
  // like the offloaded ones (forward, and backward where an input gradient
  // reads them), as ZeRO-3 gathers a frozen weight; their home copy never
  // changes.
  std::vector<char> stepped(g.buffers.size(), 0);
  for (const OffloadedState& o : og.states) stepped[o.param] = 1;
  for (const Op& op : g.ops) {
    for (const BufferId b : op.updates) stepped[b] = 1;
  }
  for (const Buffer& b : g.buffers) {
    if (b.kind == BufferKind::kParam && !stepped[b.id]) og.frozen.push_back(b.id);
  }
  return og;
}

Graph planning_view(const OffloadGraph& og, const OffloadOptions& options) {
  check_options(options);
  Graph view = og.graph;
  for (const OffloadedState& o : og.states) {
    if (o.paged) {
      // Paged in for the step after backward, when activations are gone;
      // the gradient waits for that step as without offload.
      for (const BufferId s : o.states) view.buffers[s].bytes = 0;
      continue;
    }
    if (o.on_device) {
      view.buffers[o.grad].bytes = 0;  // stepped as soon as it is complete
      continue;
    }
    if (options.optimizer != Tier::kDevice) {
      view.ops[o.step].workspace = 0;  // it runs on the CPU
      for (const BufferId s : o.states) view.buffers[s].bytes = 0;
      view.buffers[o.grad].bytes = 0;
      if (o.update >= 0) view.buffers[o.update].bytes = 0;
    }
    if (options.params != Tier::kDevice) view.buffers[o.param].bytes = 0;
  }
  if (options.params != Tier::kDevice) {
    for (const BufferId p : og.frozen) view.buffers[p].bytes = 0;
  }
  return view;
}

namespace {

class OffloadPass {
 public:
  OffloadPass(const OffloadGraph& og, const Plan& plan, const OffloadOptions& options)
      : og_(og), g_(og.graph), plan_(plan), opt_(options) {}

  Plan run() {
    index_param_runs();
    index_states();
    Plan out = plan_;
    out.steps.clear();
    out.steps.reserve(plan_.steps.size() + 8 * og_.states.size());
    for (size_t k = 0; k < og_.states.size(); ++k) {
      const OffloadedState& o = og_.states[k];
      if (o.paged) {
        for (const BufferId s : o.states) out.placement[s] = Tier::kHost;
        continue;
      }
      if (o.on_device) continue;
      for (const BufferId s : o.states) out.placement[s] = opt_.optimizer_tier(k);
      if (opt_.params != Tier::kDevice) out.placement[o.param] = opt_.params;
    }
    if (opt_.params != Tier::kDevice) {
      for (const BufferId p : og_.frozen) out.placement[p] = opt_.params;
    }
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      for (const BufferId p : swap_in_before_[i]) out.steps.push_back(Step::swap_in(p));
      const Step& s = plan_.steps[i];
      const bool runs_op = s.kind == StepKind::kCompute || s.kind == StepKind::kRecompute;
      if (runs_op && paged_of_step_[s.op] >= 0) {
        paged_step(out, static_cast<size_t>(paged_of_step_[s.op]), s);
        for (const BufferId p : free_after_[i]) out.steps.push_back(Step::free(p));
        continue;
      }
      if (runs_op && state_of_step_[s.op] >= 0) continue;  // emitted after its gradient
      if (runs_op && state_of_apply_[s.op] >= 0) {
        // Every apply at the first one's place, in CPU-step order (Note
        // [Offload steps]), or once the last CPU step is out if one still
        // waits for its gradient there.
        applies_due_ = true;
        apply_when_due(out);
        continue;
      }
      if (s.kind == StepKind::kFree && (is_grad_[s.buf] || is_update_[s.buf])) {
        continue;  // freed after its CPU step or its apply
      }
      out.steps.push_back(s);
      for (const BufferId p : free_after_[i]) out.steps.push_back(Step::free(p));
      for (const int k : cpu_after_[i]) {
        const OffloadedState& o = og_.states[k];
        if (!opt_.steps_after_backward || o.on_device) {
          cpu_step(out, o);
          continue;
        }
        // Note [Steps after backward]: the gradient leaves now, its step waits.
        const Tier park = parked_on_nvme(static_cast<size_t>(k)) ? Tier::kNvme : Tier::kHost;
        out.steps.push_back(Step::swap_out(o.grad, park));
        if (++gradients_out_ == cpu_order_.size()) {
          for (const size_t j : cpu_order_) cpu_step(out, og_.states[j], /*gradient_out=*/true);
        }
      }
      apply_when_due(out);
    }
    for (const OffloadedState& o : og_.states) {
      if (!step_emitted_[&o - og_.states.data()]) {
        fail("offload: the plan never computes {}", detail::op_label(g_, o.step));
      }
    }
    return out;
  }

 private:
  void index_states() {
    state_of_step_.assign(g_.ops.size(), -1);
    paged_of_step_.assign(g_.ops.size(), -1);
    state_of_apply_.assign(g_.ops.size(), -1);
    cpu_after_.assign(plan_.steps.size(), {});
    std::vector<size_t> computed_at(g_.ops.size(), SIZE_MAX);  // plan index of each compute
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      if (plan_.steps[i].kind == StepKind::kCompute) computed_at[plan_.steps[i].op] = i;
    }
    step_emitted_.assign(og_.states.size(), 0);
    std::vector<OpId> last_write(g_.buffers.size(), kNoOp);
    for (const Op& op : g_.ops) {
      if (op.phase == Phase::kOptimizer) continue;
      for (const BufferId b : op.out) last_write[b] = op.id;
      for (const BufferId b : op.updates) last_write[b] = op.id;
    }
    is_grad_.assign(g_.buffers.size(), 0);
    is_update_.assign(g_.buffers.size(), 0);
    for (size_t k = 0; k < og_.states.size(); ++k) {
      const OffloadedState& o = og_.states[k];
      if (o.paged) {  // stays where the plan has it
        paged_of_step_[o.step] = static_cast<int>(k);
        continue;
      }
      is_grad_[o.grad] = 1;
      if (o.update >= 0) is_update_[o.update] = 1;
      state_of_step_[o.step] = static_cast<int>(k);
      if (o.apply != kNoOp) state_of_apply_[o.apply] = static_cast<int>(k);
      const OpId writer = last_write[o.grad];
      if (writer == kNoOp || computed_at[writer] == SIZE_MAX) {
        fail("offload: the plan never computes the op that writes {}",
             detail::buffer_label(g_, o.grad));
      }
      // After the gradient is complete and, for a parameter the step updates
      // in place (at home, or a device chunk's), after its last device user
      // (which must not see new values).
      size_t at = computed_at[writer];
      if (!last_user_.empty() && last_user_[o.param] != SIZE_MAX) {
        at = std::max(at, last_user_[o.param]);
      }
      cpu_after_[at].push_back(static_cast<int>(k));
    }
    // The CPU steps in the order they will be emitted, for reading ahead.
    for (const std::vector<int>& ks : cpu_after_) {
      for (const int k : ks) {
        if (!og_.states[k].on_device) cpu_order_.push_back(static_cast<size_t>(k));
      }
    }
    // Note [Steps after backward]: the step of the gradient that arrives
    // last goes first, so the CPU's queue starts once backward is over.
    if (opt_.steps_after_backward && !cpu_order_.empty()) {
      std::rotate(cpu_order_.rbegin(), cpu_order_.rbegin() + 1, cpu_order_.rend());
    }
    cpu_position_.assign(og_.states.size(), 0);
    for (size_t j = 0; j < cpu_order_.size(); ++j) cpu_position_[cpu_order_[j]] = j;
    // The applies in the order their CPU steps run, so that each update
    // can go up as soon as its step is done.
    for (const size_t k : cpu_order_) {
      if (og_.states[k].apply != kNoOp) applies_.push_back(static_cast<int>(k));
    }
    steps_left_ = applies_.size();
  }

  // Swap-ins and frees of offloaded parameters around runs of their users;
  // the last device user of each parameter a step updates in place.
  void index_param_runs() {
    swap_in_before_.assign(plan_.steps.size(), {});
    free_after_.assign(plan_.steps.size(), {});
    // A paged state's step stays where the plan has it: its parameter's
    // users do not place it.
    const bool device_chunks =
        std::any_of(og_.states.begin(), og_.states.end(),
                    [](const OffloadedState& o) { return o.on_device && !o.paged; });
    if (opt_.params == Tier::kDevice && !device_chunks) return;
    last_user_.assign(g_.buffers.size(), SIZE_MAX);
    std::vector<int> is_param(g_.buffers.size(), 0);
    for (const OffloadedState& o : og_.states) {
      if (o.on_device || opt_.params != Tier::kDevice) is_param[o.param] = 1;
    }
    if (opt_.params != Tier::kDevice) {
      for (const BufferId p : og_.frozen) is_param[p] = 1;
    }
    std::vector<std::vector<size_t>> users(g_.buffers.size());
    std::vector<size_t> compute_steps;  // plan indices of compute/recompute steps
    std::vector<size_t> ordinal(plan_.steps.size(), 0);
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      const Step& s = plan_.steps[i];
      if (s.kind != StepKind::kCompute && s.kind != StepKind::kRecompute) continue;
      ordinal[i] = compute_steps.size();
      compute_steps.push_back(i);
      if (s.on == Tier::kHost || g_.ops[s.op].phase == Phase::kOptimizer) continue;
      for (const BufferId b : g_.ops[s.op].in) {
        if (is_param[b] && (users[b].empty() || users[b].back() != i)) users[b].push_back(i);
      }
    }
    std::vector<BufferId> streamed;  // parameters swapped in per run of users
    for (const OffloadedState& o : og_.states) {
      if (o.on_device) {  // stays: only its last user matters
        if (!users[o.param].empty()) last_user_[o.param] = users[o.param].back();
      } else if (opt_.params != Tier::kDevice) {
        streamed.push_back(o.param);
      }
    }
    if (opt_.params != Tier::kDevice) {
      streamed.insert(streamed.end(), og_.frozen.begin(), og_.frozen.end());
    }
    for (const BufferId param : streamed) {
      const std::vector<size_t>& u = users[param];
      size_t floor = 0;  // a swap-in may not precede the previous run's free
      for (size_t a = 0; a < u.size();) {
        size_t b = a + 1;
        while (b < u.size() && ordinal[u[b]] - ordinal[u[b - 1]] <= size_t(opt_.regather_gap)) ++b;
        const size_t first = ordinal[u[a]];
        size_t at = first >= size_t(opt_.prefetch_steps) ? first - opt_.prefetch_steps : 0;
        at = std::max(at, floor);
        swap_in_before_[compute_steps[at]].push_back(param);
        free_after_[u[b - 1]].push_back(param);
        last_user_[param] = u[b - 1];
        floor = ordinal[u[b - 1]] + 1;
        a = b;
      }
    }
  }

  // What state k's CPU step updates that lives on NVMe.
  std::vector<BufferId> on_nvme(size_t k) const {
    std::vector<BufferId> from_nvme;
    if (og_.states[k].on_device) return from_nvme;
    if (opt_.optimizer_tier(k) == Tier::kNvme) from_nvme = og_.states[k].states;
    if (opt_.params == Tier::kNvme) from_nvme.push_back(og_.states[k].param);
    return from_nvme;
  }

  // Reads into host memory what the CPU steps from state k's up to
  // nvme_read_ahead - 1 after it need from NVMe, unless read already.
  void read_ahead(Plan& out, size_t k) {
    const size_t at = cpu_position_[k];
    const size_t until =
        std::min(cpu_order_.size(), at + static_cast<size_t>(opt_.nvme_read_ahead));
    for (; next_read_ < until; ++next_read_) {
      const size_t j = cpu_order_[next_read_];
      for (const BufferId b : on_nvme(j)) out.steps.push_back(Step::swap_in(b, Tier::kHost));
      if (parked_on_nvme(j)) out.steps.push_back(Step::swap_in(og_.states[j].grad, Tier::kHost));
    }
  }

  // OffloadOptions::gradients_to_nvme: state k's gradient waits for its
  // step on NVMe, with its states.
  bool parked_on_nvme(size_t k) const {
    return opt_.gradients_to_nvme && opt_.steps_after_backward && !og_.states[k].on_device &&
           opt_.optimizer_tier(k) == Tier::kNvme;
  }

  // Note [Paged optimizer]: state k's states come in from the host for its
  // device step `s` and go back after it (the step updated them, which
  // made the host copy stale).
  void paged_step(Plan& out, size_t k, const Step& s) {
    const OffloadedState& o = og_.states[k];
    for (const BufferId b : o.states) out.steps.push_back(Step::swap_in(b));
    out.steps.push_back(s);
    for (const BufferId b : o.states) out.steps.push_back(Step::swap_out(b, Tier::kHost));
    step_emitted_[k] = 1;
  }

  // The gradient leaves for the host; the CPU steps it at once. A device
  // chunk's step runs on the device instead (Note [Device chunks]).
  void cpu_step(Plan& out, const OffloadedState& o, bool gradient_out = false) {
    if (o.on_device) {
      out.steps.push_back(Step::compute(o.step));
      out.steps.push_back(Step::free(o.grad));
      step_emitted_[&o - og_.states.data()] = 1;
      return;
    }
    if (!gradient_out) out.steps.push_back(Step::swap_out(o.grad, Tier::kHost));
    if (o.apply != kNoOp) --steps_left_;
    // What the CPU step updates that lives on NVMe is read in here or
    // earlier (read_ahead) and written back after.
    const size_t k = static_cast<size_t>(&o - og_.states.data());
    read_ahead(out, k);
    const std::vector<BufferId> from_nvme = on_nvme(k);
    out.steps.push_back(Step::compute(o.step, Tier::kHost));
    out.steps.push_back(Step::free(o.grad));  // after the step has read it
    for (const BufferId b : from_nvme) out.steps.push_back(Step::swap_out(b, Tier::kNvme));
    step_emitted_[&o - og_.states.data()] = 1;
  }

  // Once the plan has reached its first apply and every CPU step with an
  // apply is out: every apply, each update brought in one apply ahead and
  // freed after it (applies_ is then spent).
  void apply_when_due(Plan& out) {
    if (!applies_due_ || steps_left_ > 0) return;
    for (size_t i = 0; i < applies_.size(); ++i) {
      if (i == 0) out.steps.push_back(Step::swap_in(og_.states[applies_[0]].update));
      if (i + 1 < applies_.size()) {
        out.steps.push_back(Step::swap_in(og_.states[applies_[i + 1]].update));
      }
      const OffloadedState& o = og_.states[applies_[i]];
      out.steps.push_back(Step::compute(o.apply));
      out.steps.push_back(Step::free(o.update));
    }
    applies_.clear();
  }

  const OffloadGraph& og_;
  const Graph& g_;
  const Plan& plan_;
  const OffloadOptions& opt_;
  std::vector<int> state_of_step_, paged_of_step_, state_of_apply_;
  std::vector<std::vector<int>> cpu_after_;  // per plan index: CPU steps to run after it
  std::vector<size_t> last_user_;            // offloaded parameters: plan index of the last user
  std::vector<char> step_emitted_;
  std::vector<char> is_grad_;         // read by a CPU step: freed right after it
  std::vector<char> is_update_;       // brought in for its apply: freed right after it
  std::vector<int> applies_;          // states with an apply, in CPU-step order
  bool applies_due_ = false;          // the plan has reached its first apply
  size_t steps_left_ = 0;             // CPU steps with an apply not yet emitted
  std::vector<size_t> cpu_order_;     // states in CPU-step order
  std::vector<size_t> cpu_position_;  // per state: its place in cpu_order_
  size_t next_read_ = 0;              // cpu_order_ read from NVMe up to here
  size_t gradients_out_ = 0;          // steps_after_backward: gradients sent to the host
  std::vector<std::vector<BufferId>> swap_in_before_, free_after_;
};

}  // namespace

uint64_t optimizer_state_bytes(const OffloadGraph& og, size_t state) {
  uint64_t bytes = 0;
  for (const BufferId b : og.states.at(state).states) {
    bytes = checked_add(bytes, og.graph.buffers[b].bytes, "optimizer state bytes");
  }
  return bytes;
}

uint64_t optimizer_state_bytes(const OffloadGraph& og) {
  uint64_t bytes = 0;
  for (size_t k = 0; k < og.states.size(); ++k) {
    bytes = checked_add(bytes, optimizer_state_bytes(og, k), "optimizer state bytes");
  }
  return bytes;
}

uint64_t optimizer_chunk_bytes(const OffloadGraph& og) {
  constexpr uint64_t kLeast = uint64_t{1} << 20;
  return std::clamp(optimizer_state_bytes(og) / 32, kLeast, kOptimizerChunkBytes);
}

std::vector<Tier> split_optimizer_states(const OffloadGraph& og, double host_share,
                                         uint64_t chunk_bytes, bool spread, double device_share) {
  if (!(host_share >= 0 && device_share >= 0 && host_share + device_share <= 1)) {
    fail(
        "the host's and the device's shares of the optimizer states must be at least 0 and add "
        "up to at most 1 (got {} and {})",
        host_share, device_share);
  }
  std::vector<Tier> tiers(og.states.size(), Tier::kNvme);
  // For the fill in order: the share of every state's bytes.
  const auto all = static_cast<double>(optimizer_state_bytes(og));
  // Chunks: runs of consecutive states of at least chunk_bytes. The device
  // takes the first ones in step order (their gradients come last in
  // backward, so their steps would be the CPU's tail), while each stays
  // within its share by half a chunk; the host then spreads over the rest.
  double total = 0, on_host = 0, on_device = 0;
  bool device_open = device_share > 0;
  const double rest = 1 - device_share;
  const double host_of_rest = rest > 0 ? std::min(1.0, host_share / rest) : 0;
  size_t first = 0;
  uint64_t chunk = 0;
  for (size_t k = 0; k < og.states.size(); ++k) {
    chunk += optimizer_state_bytes(og, k);
    if (chunk < chunk_bytes && k + 1 < og.states.size()) continue;
    const double half = static_cast<double>(chunk) / 2;
    Tier tier = Tier::kNvme;
    device_open = device_open && on_device + half <= device_share * all;
    if (device_open) {
      on_device += static_cast<double>(chunk);
      tier = Tier::kDevice;
    } else {
      total += static_cast<double>(chunk);
      // Spread: Bresenham over bytes, host while the host's total stays
      // within its share of the running total. In order: host until the
      // share of everything is reached.
      const double limit = spread ? host_of_rest * total : host_share * all;
      if (on_host + half <= limit) {
        on_host += static_cast<double>(chunk);
        tier = Tier::kHost;
      }
    }
    std::fill(tiers.begin() + static_cast<std::ptrdiff_t>(first),
              tiers.begin() + static_cast<std::ptrdiff_t>(k + 1), tier);
    first = k + 1;
    chunk = 0;
  }
  return tiers;
}

Plan apply_offload(const OffloadGraph& og, const Plan& plan, const OffloadOptions& options) {
  check_options(options);
  if (!options.optimizer_of.empty() && options.optimizer_of.size() != og.states.size()) {
    fail("the optimizer split names {} states, the graph has {}", options.optimizer_of.size(),
         og.states.size());
  }
  for (size_t k = 0; k < options.optimizer_of.size(); ++k) {
    if ((options.optimizer_of[k] == Tier::kDevice) != og.states[k].on_device) {
      fail(
          "the optimizer split keeps {} on the {}, but the graph was rewritten to step it on the "
          "{} (rewrite it with the same split)",
          detail::buffer_label(og.graph, og.states[k].param),
          og.states[k].on_device ? "host or NVMe" : "device",
          og.states[k].on_device ? "device" : "CPU");
    }
  }
  if (!options.any()) return plan;
  return OffloadPass(og, plan, options).run();
}

}  // namespace memwall
