// `memwall run-rank` (hidden): a child rank of a data-parallel run, started
// by exec::RankProcesses (memwall/exec/ranks.h, docs/exec.md "Ranks").
#include <memory>

#include "commands.h"
#include "memwall/exec/ranks.h"

namespace memwall::cli {

void add_run_rank(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("run-rank", "");  // hidden: `memwall run` starts it
  cmd->group("");
  auto args = std::make_shared<exec::ChildRank>();
  cmd->add_option("--graph", args->graph)->required();
  cmd->add_option("--plan", args->plan)->required();
  cmd->add_option("--values", args->values)->required();
  cmd->add_option("--rank", args->rank)->required();
  cmd->add_option("--store", args->store)->required();
  cmd->add_option("--result", args->result)->required();
  cmd->add_option("--steps", args->steps);
  cmd->add_option("--policy", args->policy);
  cmd->add_option("--nvme-dir", args->nvme_dirs);
  cmd->add_option("--nvme-faults", args->nvme_faults);
  cmd->add_flag("--check-eager", args->check_eager);
  cmd->callback([&action, args] { action = [args] { return exec::run_child_rank(*args); }; });
}

}  // namespace memwall::cli
