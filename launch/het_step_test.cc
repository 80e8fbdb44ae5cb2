#include "launch/het_step.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

// What squeue printed on the devcluster for `#SBATCH -p gpu --gres=gpu:1`
// + `#SBATCH hetjob` + `#SBATCH -p cpu -n3 -c2`, and for a plain job.
const char kHetjob[] =
    "31|30|1|3|2|N/A|N/A|N/A|N/A|1|9:58|/home/u/run|\n"
    "30|30|0|1|1|N/A|gres:gpu:1|N/A|N/A|1|1-02:03:04|/home/u/run|\n";
const char kPlain[] = "40|N/A|N/A|4|N/A|N/A|N/A|N/A|N/A|0|UNLIMITED|/tmp/a|b|\n";

TEST(HetStepTest, ReadsEachComponentOfAHeterogeneousJob) {
  auto c = parse_job_components(0, kHetjob);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->size(), 2u);
  const JobComponent& cpu = (*c)[0];
  EXPECT_EQ(cpu.job_id, 31u);
  EXPECT_EQ(cpu.het_job_id, 30u);
  EXPECT_EQ(cpu.offset, 1);
  EXPECT_EQ(cpu.ntasks, 3);
  EXPECT_EQ(cpu.cpus_per_task, 2);
  EXPECT_FALSE(cpu.asks_gpus);
  EXPECT_TRUE(cpu.batch);
  EXPECT_EQ(cpu.work_dir, "/home/u/run");
  EXPECT_TRUE((*c)[1].asks_gpus);
  EXPECT_EQ((*c)[1].offset, 0);
  EXPECT_EQ(cpu.time_left, "9:58");
  EXPECT_EQ((*c)[1].time_left, "1-02:03:04");
}

TEST(HetStepTest, APlainJobHasOneComponentAndNoOffset) {
  auto c = parse_job_components(0, kPlain);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->size(), 1u);
  EXPECT_EQ((*c)[0].het_job_id, 0u);
  EXPECT_EQ((*c)[0].offset, -1);
  EXPECT_EQ((*c)[0].cpus_per_task, 1);
  EXPECT_FALSE((*c)[0].batch);
  EXPECT_EQ((*c)[0].work_dir, "/tmp/a|b") << "the directory is the rest of the line";
  EXPECT_EQ((*c)[0].time_left, "") << "UNLIMITED: no time left to give";
  EXPECT_EQ(why_no_worker_component(*c, 40), "not a heterogeneous job");
  EXPECT_FALSE(worker_component(*c, 40));
}

TEST(HetStepTest, EveryGpuRequestFormCounts) {
  for (const char* line : {"5|5|0|1|1|gres:gpu:2|N/A|N/A|N/A|0|UNLIMITED|/|", "5|5|0|1|1|N/A|N/A|gres/gpu:1|N/A|0|UNLIMITED|/|",
                           "5|5|0|1|1|N/A|N/A|N/A|gres:gpu:a100:1|0|UNLIMITED|/|"}) {
    auto c = parse_job_components(0, line);
    ASSERT_TRUE(c.ok()) << line;
    EXPECT_TRUE((*c)[0].asks_gpus) << line;
  }
}

TEST(HetStepTest, ErrorsQuoteTheLineOrSqueue) {
  auto c = parse_job_components(0, "30|30|0|1|\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "squeue: cannot read a job component from '30|30|0|1|'");
  c = parse_job_components(0, "x|30|0|1|1|N/A|N/A|N/A|N/A|0|UNLIMITED|/|\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "squeue: cannot read a job component from 'x|30|0|1|1|N/A|N/A|N/A|N/A|0|UNLIMITED|/|'");
  c = parse_job_components(0, "5|N/A|N/A|1|1|N/A|N/A|N/A|N/A|0|soon|/|\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("(time left 'soon')"), std::string::npos) << c.status().message();
  c = parse_job_components(1, "squeue: error: Invalid job id specified\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "squeue: exit 1: squeue: error: Invalid job id specified");
}

TEST(HetStepTest, WorkersGoToTheFirstCpuOnlyComponentOfTheLeader) {
  std::vector<JobComponent> c = *parse_job_components(
      0, "30|30|0|1|1|N/A|gres:gpu:1|N/A|N/A|0|UNLIMITED|/|\n"
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
