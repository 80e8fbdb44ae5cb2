// Test data the tests of launch/slurm_cli and ctld/slurm_pool share.
#ifndef GOLDMINER_LAUNCH_SLURM_TEST_UTIL_H_
#define GOLDMINER_LAUNCH_SLURM_TEST_UTIL_H_

namespace goldminer::testing {

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
