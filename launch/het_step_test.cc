#include "launch/het_step.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

// What squeue printed on the devcluster for a plain job.
const char kPlain[] = "40|N/A|N/A|4|N/A|N/A|N/A|N/A|N/A|0|UNLIMITED|/tmp/a|b|\n";

TEST(HetStepTest, APlainJobHasNoWorkerComponent) {
  auto c = parse_job_components(kPlain);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(why_no_worker_component(*c, 40), "not a heterogeneous job");
  EXPECT_FALSE(worker_component(*c, 40));
}

TEST(HetStepTest, WorkersGoToTheFirstCpuOnlyComponentOfTheLeader) {
  std::vector<JobComponent> c = *parse_job_components(
      "30|30|0|1|1|N/A|gres:gpu:1|N/A|N/A|0|UNLIMITED|/|\n"
         "31|30|1|2|1|gres:gpu:1|N/A|N/A|N/A|0|UNLIMITED|/|\n"
         "33|30|3|8|1|N/A|N/A|N/A|N/A|0|UNLIMITED|/|\n"
         "32|30|2|4|2|N/A|N/A|N/A|N/A|0|UNLIMITED|/|\n");
  auto w = worker_component(c, 30);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->offset, 2) << "not 1 (asks GPUs), and 2 before 3";
  EXPECT_EQ(why_no_worker_component(c, 31), "component 1 of job 30: only the leader's (component 0) starts the workers");
  EXPECT_FALSE(worker_component(c, 31));
  EXPECT_EQ(why_no_worker_component(c, 99), "squeue does not list job 99");
  c.resize(2);
  EXPECT_EQ(why_no_worker_component(c, 30), "every other component of the heterogeneous job asks for GPUs");
  EXPECT_FALSE(worker_component(c, 30));
}

TEST(HetStepTest, PlansOneWorkerPerTaskInTheComponentSharingItsCpus) {
  CompanionJob plan;
  plan.trainer = "ucx://10.9.0.2:20030";
  plan.work_dir = "/home/u/run";
  plan.sbatch_env = {"PATH=/usr/bin", "GOLDMINER_TRAINER=ucx://10.9.0.2:20030", "GOLDMINER_AUTH=munge", "GOLDMINER_AUTH_JOB=20030"};
  AdminConfig admin;
  admin.dw_command = "/opt/gm/bin/goldminer-dw";
  JobComponent cpu;
  cpu.job_id = 31;
  cpu.het_job_id = 30;
  cpu.offset = 1;
  cpu.ntasks = 3;
  cpu.cpus_per_task = 2;
  HetStep s = plan_het_step(plan, admin, 30, cpu);
  EXPECT_EQ(s.name, "goldminer-dw.30");
  EXPECT_EQ(s.component, "30+1");
  EXPECT_EQ(s.srun_args, (std::vector<std::string>{"--jobid=30", "--het-group=1", "--ntasks=3", "--cpus-per-task=2",
                                                   "--overlap", "--mpi=none", "--job-name=goldminer-dw.30",
                                                   "--chdir=/home/u/run", "/opt/gm/bin/goldminer-dw", "--threads",
                                                   "2", "--connect-timeout", "86400", "-v"}));
  EXPECT_EQ(s.srun_env, plan.sbatch_env) << "the same environment as a companion job's: no SLURM_*, no --goldminer";
  EXPECT_EQ(s.output_path, "/home/u/run/goldminer-dw-30+1.out");
  EXPECT_EQ(s.trainer_env, (std::vector<std::pair<std::string, std::string>>{{"GOLDMINER_DW", "3"},
                                                                             {"GOLDMINER_DW_STEP", "30+1"}}));
  plan.work_dir = "/";
  EXPECT_EQ(plan_het_step(plan, admin, 30, cpu).output_path, "/goldminer-dw-30+1.out");
}

}  // namespace
}  // namespace goldminer
