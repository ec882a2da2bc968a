#include "memwall/runtime/cpu_adam_contest.h"

#include <algorithm>
#include <utility>

namespace memwall::runtime {
namespace {

// One case's figures over the rounds: updates per second per round, per
// contender ("memwall", "torch_foreach", ...), and why a contender has none.
struct CaseRounds {
  std::map<std::string, std::vector<double>> per_s;
  std::map<std::string, std::string> why;
};

void add_contenders(CaseRounds& rounds, const ContenderSeconds& round, int64_t n) {
  for (const auto& [contender, seconds] : round.seconds) {
    rounds.per_s[contender].push_back(static_cast<double>(n) / seconds);
  }
  for (const auto& [contender, why] : round.why) rounds.why[contender] = why;
}

CpuAdamCase case_of(int64_t n, unsigned threads, bool copy, int rounds_run, double copy_bw,
                    double triad_bw, const CaseRounds& rounds) {
  CpuAdamCase c{.params = n,
                .threads = threads,
                .bf16_copy = copy,
                .rounds = rounds_run,
                .bytes_per_update = adam_bytes_per_update(copy),
                .memcpy_bytes_per_s = copy_bw,
                .triad_bytes_per_s = triad_bw};
  c.bandwidth_limit_per_s = std::max(copy_bw, triad_bw) / static_cast<double>(c.bytes_per_update);
  const std::vector<double>& ours = rounds.per_s.at("memwall");
  std::vector<std::string> names = {"memwall"};
  names.insert(names.end(), kAdamContenders.begin(), kAdamContenders.end());
  for (const std::string& name : names) {
    const auto it = rounds.per_s.find(name);
    if (it == rounds.per_s.end() || it->second.size() != ours.size()) {
      const auto why = rounds.why.find(name);
      c.why[name] = why != rounds.why.end() ? why->second : "failed in some rounds";
      continue;
    }
    std::vector<double> ratios;
    for (size_t i = 0; i < ours.size(); ++i) ratios.push_back(ours[i] / it->second[i]);
    c.figures[name] = {
        .per_s = it->second, .median_per_s = median(it->second), .memwall_over = median(ratios)};
  }
  return c;
}

}  // namespace

ContenderSeconds NoContenders::time_step(int64_t, int, bool) {
  ContenderSeconds none;
  for (const std::string& name : kAdamContenders) none.why[name] = why_;
  return none;
}

CpuAdamContestResults run_cpu_adam_contest(const CpuAdamContest& contest,
                                           const StartContenders& start) {
  CpuAdamContestResults out;
  for (unsigned threads : contest.thread_counts) {
    const std::unique_ptr<AdamContenders> contenders = start(threads);
    out.deepspeed = contenders->deepspeed();
    // The better of two ways to move bytes: the bound an update could reach.
    // 1 GiB buffers by default, well past any last-level cache (a server's
    // can hold a 10M-parameter step's 280 MB in part).
    const double copy_bw = memcpy_bandwidth(contest.bandwidth_bytes, threads, contest.repeats);
    const double triad_bw = triad_bandwidth(contest.bandwidth_bytes, threads, contest.repeats);
    for (int64_t n : contest.sizes) {
      for (const bool copy : contest.copies) {
        CaseRounds rounds;
        for (int r = 0; r < contest.rounds; ++r) {
          rounds.per_s["memwall"].push_back(static_cast<double>(n) /
                                            cpu_adam_seconds(n, threads, copy, contest.repeats));
          add_contenders(rounds, contenders->time_step(n, contest.repeats, copy), n);
        }
        out.cases.push_back(case_of(n, threads, copy, contest.rounds, copy_bw, triad_bw, rounds));
      }
    }
  }
  for (int64_t n : contest.sizes) out.overlaps.emplace_back(n, overlap_seconds(n, contest.repeats));
  return out;
}

}  // namespace memwall::runtime
