// The executor's data parallelism (executor_impl.h): ZeRO's rank graphs
// (src/swap/zero.cc) run by N processes, one per rank, whose collectives go
// through torch.distributed's gloo backend (c10d::ProcessGroupGloo).
//
// Note [Shards at run time]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// ZeRO cuts a parameter of n elements into N shards of s = ceil(n / N);
// rank r owns elements [r*s, r*s + len_r), len_r = clamp(n - r*s, 0, s).
// A shard buffer holds s elements (the graph's size), of which the first
// len_r are the rank's; the rest is padding that no step reads.
//   - The step's calls still name the whole tensor (the tracer's views).
//     From stage 1 on, every view of more than one element in an
//     optimizer-phase op becomes the rank's 1-D slice: offset 0 in a shard
//     buffer, r*s in a whole one (the parameter and, in stage 1, the
//     gradient), len_r elements either way; temporaries of the step come
//     out of those ops at that length. Views of one element (Adam's step
//     count, replicated by the rewrite) stay as they are. torch's
//     elementwise kernels give each element the same bits whatever slice
//     it is computed in (checked for Adam, AdamW and SGD with momentum at
//     odd offsets and sizes), so the shards together are eager's step.
//   - Gradients are averaged as torch DDP's default hook does: divided by
//     N, then summed (all-reduce or reduce-scatter). For N = 2 any order of
//     the sum gives the same bits; gloo's ring for more ranks sums in its
//     own order, which a reference in one process does not reproduce.
//   - Collectives work on (padded N*s-element) staging copies in host
//     memory, never on device memory, which gloo's threads would hold a
//     moment past the collective's end (a GPU's NCCL would use device
//     buffers of the same size, which the simulator does not count either).
//   - A sharded buffer starts from its slice of the whole value, and is
//     compared with its slice of eager's.
#include "executor_impl.h"

#ifdef MEMWALL_EXEC_GLOO
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace memwall::exec::detail {

#ifdef MEMWALL_EXEC_GLOO
struct Group {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
};
#else
struct Group {};
#endif

Shard Executor::shard_of(uint64_t elements) const {
  Shard sh;
  const auto ranks = static_cast<uint64_t>(options_.ranks);
  const auto rank = static_cast<uint64_t>(options_.rank);
  sh.size = elements / ranks + (elements % ranks != 0);
  sh.begin = rank * sh.size;
  sh.length = elements > sh.begin ? std::min(sh.size, elements - sh.begin) : 0;
  return sh;
}

void Executor::set_up_ranks() {
  const nlohmann::json zero = graph_.meta.value("zero", nlohmann::json());
  const int ranks = zero.is_object() ? zero.value("ranks", 1) : 1;
  stage_ = zero.is_object() ? zero.value("stage", 0) : 0;
  if (ranks != options_.ranks) {
    bad_input("graph \"{}\" is one of {} data-parallel ranks; this run has {}", graph_.name, ranks,
              options_.ranks);
  }
  if (ranks < 1 || options_.rank < 0 || options_.rank >= ranks) {
    bad_input("rank {} of {} does not exist", options_.rank, ranks);
  }
}

// Note [Shards at run time]: the rank's slice of each view in an
// optimizer-phase op (from stage 1 on).
void Executor::shard_views(CompiledCall& call, const Op& op, std::pair<int64_t, int64_t> as) {
  if (call.kind == CompiledCall::Kind::kCpuStep && call.master >= 0) as = {call.param, call.master};
  const auto slice = [&](TensorRef& ref) {
    int64_t elements = 1;
    for (const int64_t d : ref.sizes) elements *= d;
    if (elements <= 1) return;
    int64_t expected = 1;
    for (size_t i = ref.sizes.size(); i-- > 0;) {
      if (ref.sizes[i] != 1 && ref.strides[i] != expected) {
        bad_input("op {} ({}): ZeRO cannot shard a strided view of buffer {}", op.id, op.name,
                  ref.buffer);
      }
      expected *= ref.sizes[i];
    }
    const Shard sh = shard_of(static_cast<uint64_t>(elements));
    if (!ref.local) {
      const uint64_t item = c10::elementSize(ref.dtype);
      const int64_t b = ref.buffer == as.first ? as.second : ref.buffer;
      const uint64_t held = graph_.buffers[b].bytes / item;
      const bool whole = held >= static_cast<uint64_t>(ref.offset + elements);
      if (whole) ref.offset += static_cast<int64_t>(sh.begin);
    }
    ref.sizes = {static_cast<int64_t>(sh.length)};
    ref.strides = {1};
  };
  for (CompiledArg& a : call.args) {
    for (std::optional<TensorRef>& t : a.tensors) {
      if (t) slice(*t);
    }
  }
  for (CompiledCall& part : call.steps) shard_views(part, op, as);
}

// Note [Offloaded shards] (swap/offload.cc): a stage 1-2 CPU step's master
// and update are shards of the whole parameter.
void Executor::put_values(const DeviceBytes& with, const void* from, uint64_t from_bytes,
                          const Buffer& to, void* data) {
  if (from_bytes >= to.bytes) {
    with.copy(data, from, to.bytes);
    return;
  }
  const uint64_t item = dtype_size(to.dtype);
  const Shard sh = shard_of(to.bytes / item);
  if (options_.ranks == 1 || sh.size * item != from_bytes) {
    run_failed("{}: {} bytes of new values for {} ({} bytes) are neither it nor a 1/{} shard",
               where(), from_bytes, to.name, to.bytes, options_.ranks);
  }
  with.copy(static_cast<char*>(data) + sh.begin * item, from, sh.length * item);
}

bool Executor::sharded(const Buffer& b, uint64_t whole_bytes) const {
  return options_.ranks > 1 && whole_bytes > b.bytes;
}

std::span<const std::byte> Executor::slice_of(const Buffer& b,
                                              std::span<const std::byte> whole) const {
  const uint64_t elements = element_count(b);
  if (elements == 0 || b.bytes % elements != 0) {
    bad_input("buffer {} ({}) is a shard of {} bytes that is not whole elements", b.id, b.name,
              b.bytes);
  }
  const uint64_t item = b.bytes / elements;
  const Shard sh = shard_of(whole.size() / item);
  if (sh.size != elements || whole.size() % item != 0) {
    bad_input("buffer {} ({}) of {} bytes is not a 1/{} shard of its {} bytes of values", b.id,
              b.name, b.bytes, options_.ranks, whole.size());
  }
  return whole.subspan(sh.begin * item, sh.length * item);
}

#ifdef MEMWALL_EXEC_GLOO

// Note [Meeting through a TCPStore]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// `memwall run --ranks` starts its ranks on one machine, which meet through
// a FileStore in a temporary directory and talk over the loopback
// interface. Processes started by torchrun (memwall.Trainer) meet as
// torch.distributed's env:// rendezvous does: a TCPStore at MASTER_ADDR:
// MASTER_PORT, hosted by torchrun's agent (TORCHELASTIC_USE_AGENT_STORE)
// or else by rank 0, the executor's keys under a prefix of their own so
// that the user's process group beside it keeps its own. Their gloo pairs
// use the interface GLOO_SOCKET_IFNAME names, as torch.distributed's gloo
// does, else the address this host's name resolves to.
void Executor::connect() {
  if (options_.ranks == 1) return;
  if (options_.store.empty()) bad_input("a run of {} ranks needs a store file", options_.ranks);
  try {
    c10::intrusive_ptr<c10d::Store> store;
    std::shared_ptr<::gloo::transport::Device> device;
    const std::string& where = options_.store;
    if (where.rfind("tcp://", 0) == 0) {
      const std::string address = where.substr(6, where.find('?') - 6);
      const size_t colon = address.rfind(':');
      if (colon == std::string::npos) bad_input("store {}: no port", where);
      c10d::TCPStoreOptions o;
      o.port = static_cast<uint16_t>(std::stoi(address.substr(colon + 1)));
      o.isServer = where.find("?server=1") != std::string::npos;
      o.numWorkers = static_cast<size_t>(options_.ranks);
      o.waitWorkers = false;
      o.multiTenant = true;
      o.timeout = std::chrono::seconds(options_.comm_timeout_s);
      store = c10::make_intrusive<c10d::TCPStore>(address.substr(0, colon), o);
      const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
      device = ifname != nullptr && *ifname
                   ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                   : c10d::ProcessGroupGloo::createDefaultDevice();
    } else {
      store = c10::make_intrusive<c10d::FileStore>(where, options_.ranks);
      device = c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
    }
    if (!options_.store_prefix.empty()) {
      store = c10::make_intrusive<c10d::PrefixStore>(options_.store_prefix, store);
    }
    auto o = c10d::ProcessGroupGloo::Options::create(std::chrono::seconds(options_.comm_timeout_s));
    o->devices.push_back(device);
    group_ = std::make_shared<Group>(
        c10::make_intrusive<c10d::ProcessGroupGloo>(store, options_.rank, options_.ranks, o));
  } catch (const std::exception& e) {
    run_failed("rank {} of {} cannot join the others: {}", options_.rank, options_.ranks, e.what());
  }
}

namespace {
at::Tensor host_floats(c10::Allocator* host, uint64_t bytes, c10::ScalarType dtype) {
  const auto item = static_cast<uint64_t>(c10::elementSize(dtype));
  c10::Storage s(c10::Storage::use_byte_size_t(), bytes, host, false);
  std::memset(s.mutable_data(), 0, bytes);
  return view_of(s, TensorRef{-1, false, {static_cast<int64_t>(bytes / item)}, {1}, 0, dtype});
}
}  // namespace

// One collective of a rank graph (Note [ZeRO as a graph] in zero.cc).
void Executor::collective(const Step& s, RunResult& result) {
  const Op& op = graph_.ops[s.op];
  const double start = now_s();
  const auto flat = [&](BufferId b, uint64_t elements, c10::ScalarType dtype) {
    need_on_device(b);
    return view_of(slots_[b].device,
                   TensorRef{-1, false, {static_cast<int64_t>(elements)}, {1}, 0, dtype});
  };
  // The whole tensor's dtype and element count: the shard's twin.
  const BufferId whole = !op.updates.empty() ? op.updates.front() : op.out.front();
  const BufferId part = !op.in.empty() ? op.in.front() : whole;
  const Buffer& w = graph_.buffers[op.type == "all_gather" ? whole : part];
  const uint64_t elements = element_count(w);
  if (elements == 0 || w.bytes % elements != 0) {
    run_failed("{}: {} moves buffer {} of {} bytes that is not whole elements", where(), op.name,
               w.id, w.bytes);
  }
  const c10::ScalarType dtype = c10::ScalarType::Float;
  if (w.bytes / elements != 4) {
    run_failed("{}: {}: the executor's collectives move fp32 tensors only", where(), op.name);
  }
  const Shard sh = shard_of(elements);
  const uint64_t item = 4, padded = sh.size * static_cast<uint64_t>(options_.ranks);
  // The output (stages 2-3) is device memory, made before gloo's
  // temporaries, which are not (host mode).
  if (!op.out.empty()) {
    const BufferId out = op.out.front();
    slots_[out].device =
        device_storage(graph_.buffers[out].bytes, "creating", out, begin_stay(out));
    slots_[out].arrived = runtime::CopyEvent();
  }
  c10::Allocator* host = host_allocator();
  host_mode(true);
  const auto done = [this](void*) { host_mode(false); };
  const std::unique_ptr<void, decltype(done)> restore(this, done);
  const Clock::time_point t = Clock::now();
  try {
    if (op.type == "all_reduce") {
      // Staged in host memory as the others are: gloo's worker thread drops
      // its reference to a collective's tensors a moment after wait()
      // returns, and a device tensor still referenced then is not freed
      // when the plan frees it; the next stay at its offset found it live
      // (1 run in 4 of two torchrun ranks, test_training_ranks.py).
      at::Tensor g = flat(whole, elements, dtype);
      at::Tensor staged = host_floats(host, elements * item, dtype);
      staged.copy_(g).div_(options_.ranks);
      std::vector<at::Tensor> tensors{staged};
      group_->pg->allreduce(tensors)->wait();
      g.copy_(staged);
    } else if (op.type == "reduce_scatter") {
      at::Tensor g = flat(part, elements, dtype);
      at::Tensor staged = host_floats(host, padded * item, dtype);
      staged.narrow(0, 0, static_cast<int64_t>(elements)).copy_(g).div_(options_.ranks);
      at::Tensor mine = host_floats(host, sh.size * item, dtype);
      group_->pg->_reduce_scatter_base(mine, staged)->wait();
      if (op.out.empty()) {  // stage 1: the rank's part of the whole gradient
        g.narrow(0, static_cast<int64_t>(sh.begin), static_cast<int64_t>(sh.length))
            .copy_(mine.narrow(0, 0, static_cast<int64_t>(sh.length)));
      } else {
        const BufferId out = op.out.front();
        device_bytes_.copy(slots_[out].device.mutable_data(), mine.data_ptr(),
                           graph_.buffers[out].bytes);
      }
    } else if (op.type == "all_gather") {
      at::Tensor mine = host_floats(host, sh.size * item, dtype);
      if (op.out.empty()) {  // stages 1-2: the updated parameter from every rank's step
        at::Tensor p = flat(whole, elements, dtype);
        mine.narrow(0, 0, static_cast<int64_t>(sh.length))
            .copy_(p.narrow(0, static_cast<int64_t>(sh.begin), static_cast<int64_t>(sh.length)));
      } else {  // stage 3: the whole parameter from its shards
        mine.copy_(flat(part, sh.size, dtype));
      }
      at::Tensor gathered = host_floats(host, padded * item, dtype);
      group_->pg->_allgather_base(gathered, mine)->wait();
      device_bytes_.copy(flat(whole, elements, dtype).data_ptr(), gathered.data_ptr(),
                         elements * item);
    } else {
      run_failed("{}: {} is a collective the executor does not know ({})", where(), op.name,
                 op.type);
    }
  } catch (const c10::OutOfMemoryError& e) {
    out_of_memory("{}: {}: {}", where(), op.name, e.what_without_backtrace());
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    run_failed("{}: {} failed: {}", where(), op.name, what.substr(0, what.find('\n')));
  }
  comm_s_ += seconds_since(t);
  span(result, kCompute, start, now_s());
}

#else

void Executor::connect() {
  if (options_.ranks == 1) return;
  bad_input(
      "this memwall was built without gloo's headers (Debian's libgloo-dev), so it cannot run "
      "{} data-parallel ranks",
      options_.ranks);
}

void Executor::collective(const Step& s, RunResult&) {
  run_failed("{}: {} needs gloo", where(), graph_.ops[s.op].name);
}

#endif

}  // namespace memwall::exec::detail
