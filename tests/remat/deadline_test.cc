// Time limits are wall time (Note [Time limits are wall time] in
// include/memwall/base/deadline.h, Note [Hard deadline] in
// src/remat/cbc_process.cc): Checkmate and memwall's planner return within
// their limit plus the documented margin where CBC alone overran it
// 8-fold; a child process killed at the deadline is reaped, and one that
// dies early is one clear error.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../../src/remat/child_process.h"
#include "memwall/base/deadline.h"
#include "memwall/base/error.h"
#include "memwall/plan/builders.h"
#include "memwall/remat/remat.h"
#include "memwall/remat/rotor.h"
#include "memwall/sim/simulator.h"
#include "remat_graphs.h"
#include "remat_test_util.h"
#include "test_util.h"

namespace memwall {
namespace {

// docs/planner.md, "Time limits": what a planner may take beyond its limit.
// The promise is the Release build's. Under a sanitizer the work after the
// deadline (the plan built and simulated from CBC's answer) runs 3-5x
// slower (Note [Search time in tests]): one ASan+UBSan run of
// CheckmateStoppedEarlyKeepsItsWarmStart, beside another test on the
// 2-core machine, returned 0.61 s after a 0.05 s limit. Sanitizer builds
// check the deadline's mechanism with twice the margin.
constexpr double kMargin = kAsan || kTsan ? 1.0 : 0.5;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A training chain of `layers` layers whose every second layer also reads
// the output two back (a skip), with uneven sizes and costs: 2 x layers + 2
// ops. At 49 layers (100 ops, the most Checkmate solves op by op) and 40%
// of the keep-all peak, CBC 2.10 ran 7.4-7.9 s of wall time under a 1 s
// limit before the hard deadline (`memwall plan --strategy remat:checkmate`
// on this graph written out).
Graph skip_chain(int layers) {
  testing::GraphMaker m(fmt::format("skip-chain{}", layers));
  const BufferId x = m.buffer("x", 1 << 20, BufferKind::kInput);
  std::vector<BufferId> w, y{x};
  std::vector<uint64_t> sizes;
  for (int i = 0; i < layers; ++i)
    w.push_back(m.buffer(fmt::format("w{}", i), 1 << 16, BufferKind::kParam));
  const auto skips = [](int i) { return i >= 2 && i % 2 == 0; };
  for (int i = 0; i < layers; ++i) {
    sizes.push_back(static_cast<uint64_t>((i * 7) % 4 + 1) << 22);
    const BufferId out = m.buffer(fmt::format("y{}", i), sizes.back());
    std::vector<BufferId> in{y.back(), w[i]};
    if (skips(i)) in.push_back(y[y.size() - 2]);
    const double flops[] = {1e9, 2e9, 3e9, 5e9};
    m.op(fmt::format("f{}", i), Phase::kForward, in, {out}, flops[(i * 5) % 4]);
    y.push_back(out);
  }
  const BufferId loss = m.buffer("loss", 4);
  m.op("loss", Phase::kForward, {y.back()}, {loss}, 1e8);
  BufferId grad = m.buffer("loss.grad", sizes.back(), BufferKind::kTemp);
  m.op("loss.bwd", Phase::kBackward, {y.back(), loss}, {grad}, 1e8);
  for (int i = layers - 1; i >= 0; --i) {
    const BufferId next =
        m.buffer(fmt::format("y{}.grad_in", i), i > 0 ? sizes[i - 1] : 1 << 20, BufferKind::kTemp);
    const BufferId wg = m.buffer(fmt::format("w{}.grad", i), 1 << 16, BufferKind::kGrad);
    std::vector<BufferId> in{grad, y[i], w[i]};  // y[i]: f_i's input
    if (skips(i)) in.push_back(y[i - 1]);
    m.op(fmt::format("f{}.bwd", i), Phase::kBackward, in, {next, wg}, 2e9 * (1 + i % 3));
    grad = next;
  }
  return m.take();
}

uint64_t share_of_peak(const Graph& graph, double share) {
  const SimResult sim = simulate(graph, default_plan(graph, gpu().name, kMaxBytes), gpu());
  return static_cast<uint64_t>(share * static_cast<double>(device_peak(sim)));
}

// True when this process has no child left, running or a zombie.
bool no_children() { return ::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD; }

TEST(Deadline, CheckmateReturnsWithinItsLimitWhereCbcOverran) {
  const Graph graph = skip_chain(49);
  ASSERT_EQ(graph.ops.size(), 100U);
  const uint64_t budget = share_of_peak(graph, 0.4);
  const auto start = std::chrono::steady_clock::now();
  try {
    const RematResult r = plan_checkmate(graph, gpu(), budget, {.time_limit = 1});
    EXPECT_LE(r.simulated_peak, budget) << r.note;
  } catch (const Error& e) {
    // No warm start fits here: stopped at the limit, CBC had nothing.
    EXPECT_NE(std::string(e.what()).find("within the 1 s time limit"), std::string::npos)
        << e.what();
  }
  EXPECT_LE(seconds_since(start), 1 + kMargin);
  EXPECT_TRUE(no_children());
}

// With a warm start, a solve stopped before CBC answers still has a
// schedule: the warm start, which CBC's incumbent is never worse than.
TEST(Deadline, CheckmateStoppedEarlyKeepsItsWarmStart) {
  const Graph graph = skip_chain(49);
  const uint64_t budget = share_of_peak(graph, 0.7);
  const RematResult warm = plan_memwall(graph, gpu(), budget, {.time_limit = 1});
  for (const double limit : {0.05, 0.3}) {
    SCOPED_TRACE(fmt::format("limit {} s", limit));
    const auto start = std::chrono::steady_clock::now();
    const RematResult r =
        plan_checkmate(graph, gpu(), budget, {.time_limit = limit, .warm_start = &warm.plan});
    EXPECT_LE(seconds_since(start), limit + kMargin);
    EXPECT_LE(r.simulated_peak, budget);
    EXPECT_LE(r.simulated_time, warm.simulated_time * (1 + 1e-9)) << r.note;
    EXPECT_GT(r.gap, 0) << r.note;
    EXPECT_TRUE(no_children());
  }
}

TEST(Deadline, MemwallReturnsWithinItsLimitOnAGraphCheckmateSolves) {
  const Graph graph = skip_chain(49);
  const uint64_t budget = share_of_peak(graph, 0.4);
  const auto start = std::chrono::steady_clock::now();
  const RematResult r = plan_memwall(graph, gpu(), budget, {.time_limit = 1});
  EXPECT_LE(seconds_since(start), 1 + kMargin);
  EXPECT_LE(r.simulated_peak, budget);
}

TEST(Deadline, RotorStopsAtTheDeadline) {
  const Graph graph = testing::hetero_chain({100, 200, 300, 400, 500, 600});
  const rotor::Chain chain = rotor::linearize(graph, gpu(), 6);
  try {
    rotor::solve_chain(chain, 1000, 500, Deadline::in(0));
    FAIL() << "expected the time limit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("time limit ran out"), std::string::npos) << e.what();
  }
}

TEST(Deadline, AChildKilledAtTheDeadlineIsReaped) {
  const auto start = std::chrono::steady_clock::now();
  const remat_detail::ChildRun run = remat_detail::run_in_child(
      [](int fd) {
        remat_detail::write_all(fd, "so far", 6);
        ::sleep(30);
      },
      Deadline::in(0.2), "sleeper");
  EXPECT_FALSE(run.finished);
  EXPECT_EQ(run.bytes, "so far");  // what it wrote before it was killed
  EXPECT_LE(seconds_since(start), 0.2 + kMargin);
  EXPECT_TRUE(no_children());
}

TEST(Deadline, AnAnswerLargerThanThePipeArrivesWhole) {
  std::string big(3 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + i % 26);
  const remat_detail::ChildRun run = remat_detail::run_in_child(
      [&big](int fd) { remat_detail::write_all(fd, big.data(), big.size()); }, Deadline::in(30),
      "writer");
  EXPECT_TRUE(run.finished);
  EXPECT_EQ(run.bytes, big);
  EXPECT_TRUE(no_children());
}

TEST(Deadline, AChildThatDiesEarlyIsOneClearError) {
  const auto expect_error = [](const std::function<void(int)>& work, const std::string& words) {
    try {
      remat_detail::run_in_child(work, Deadline::in(30), "test child");
      FAIL() << "expected an error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_NE(what.find("test child: its process " + words), std::string::npos) << what;
    }
    EXPECT_TRUE(no_children());
  };
  // SIGKILL: no sanitizer turns it into an exit status.
  expect_error([](int) { ::kill(::getpid(), SIGKILL); }, "died of signal 9");
  expect_error([](int) { throw Error("out of sorts"); }, "failed (exit status 3)");
}

}  // namespace
}  // namespace memwall
