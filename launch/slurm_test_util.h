// What the tests of launch/slurm_cli and ctld/slurm_pool share: a sample
// of scontrol's node lines, and a stand-in for Slurm's commands that
// records each call.
#ifndef GOLDMINER_LAUNCH_SLURM_TEST_UTIL_H_
#define GOLDMINER_LAUNCH_SLURM_TEST_UTIL_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "launch/slurm_cli.h"

namespace goldminer::testing {

// A SlurmCommand that appends each call to `calls` as one line ("name arg
// ...") and answers it with `answer(name)`. `calls` outlives the command.
inline SlurmCommand recording_command(std::vector<std::string>* calls,
                                      std::function<Expected<CommandResult>(const std::string& name)> answer) {
  return [calls, answer = std::move(answer)](const std::string& name,
                                             const std::vector<std::string>& args) -> Expected<CommandResult> {
    std::string call = name;
    for (const std::string& a : args) call += " " + a;
    calls->push_back(call);
    return answer(name);
  };
}

// As `scontrol --details --oneliner show node` prints them (22.05), trimmed:
// a mixed GPU node, a drained one, a CPU node with no GRES, one not
// responding (IDLE*) and an idle one.
inline constexpr const char* kSampleNodeLines =
    "NodeName=gpu1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=4 CPUEfctv=16 CPUTot=16 CPULoad=0.10 "
    "Gres=gpu:a100:2(S:0),gpu:a100:2(S:1) GresDrain=N/A GresUsed=gpu:a100:2(IDX:0-1),gpu:a100:0(IDX:N/A) "
    "OS=Linux 6.1.0-26-amd64 #1 SMP Debian RealMemory=16000 Partitions=gpu,all,dw State=MIXED "
    "CfgTRES=cpu=16,mem=16000M,billing=16 AllocTRES=cpu=4\n"
    "NodeName=gpu2 CPUAlloc=0 CPUTot=16 Gres=gpu:4 GresUsed=gpu:0 Partitions=gpu,all,dw State=IDLE+DRAIN\n"
    "NodeName=cpu1 CPUAlloc=2 CPUTot=8 Gres=(null) GresUsed= Partitions=cpu,all,dw State=MIXED\n"
    "NodeName=cpu2 CPUAlloc=0 CPUTot=8 Partitions=cpu State=IDLE*\n"
    "NodeName=cpu3 CPUAlloc=0 CPUTot=8 Partitions=cpu State=IDLE\n";

}  // namespace goldminer::testing

#endif  // GOLDMINER_LAUNCH_SLURM_TEST_UTIL_H_
