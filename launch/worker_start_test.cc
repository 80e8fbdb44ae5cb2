#include "launch/worker_start.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

// squeue's answers, as job_components reads them (launch/slurm_cli.h):
// a batch hetjob 30 with a GPU leader and a CPU-only component 31 of 3
// tasks x 2 CPUs, the same job submitted by salloc, and a plain batch job 40.
const char kBatchHetjob[] =
    "31|30|1|3|2|N/A|N/A|N/A|N/A|1|9:58|/home/u/run|\n"
    "30|30|0|1|1|N/A|gres:gpu:1|N/A|N/A|1|1-02:03:04|/home/u/run|\n";
const char kSallocHetjob[] =
    "31|30|1|3|2|N/A|N/A|N/A|N/A|0|9:58|/home/u/run|\n"
    "30|30|0|1|1|N/A|gres:gpu:1|N/A|N/A|0|1-02:03:04|/home/u/run|\n";
const char kPlainBatchJob[] = "40|N/A|N/A|1|N/A|N/A|gres:gpu:1|N/A|N/A|1|5:00|/srv/run|\n";

// A request from the SPANK plugin of job `job`, whose components squeue
// lists as `squeue_output` (exit code `squeue_exit`); `asked` counts the
// squeue calls.
WorkerStartRequest job_request(StartSite site, uint32_t job, const char* squeue_output, int* asked,
                               int squeue_exit = 0) {
  WorkerStartRequest r;
  r.site = site;
  r.job_id = job;
  r.options.dw = 2;
  r.options.dw_max = 6;
  r.options.cpus_per_dw = 4;
  r.components = [=]() {
    ++*asked;
    // squeue as launch/slurm_cli.h's job_components asks it.
    SlurmCommand squeue = [=](const std::string&, const std::vector<std::string>&) -> Expected<CommandResult> {
      CommandResult answer;
      answer.exit_code = squeue_exit;
      answer.output = squeue_output;
      return answer;
    };
    return job_components(squeue, job);
  };
  return r;
}

TEST(WorkerStartTest, NoWorkersWantedAsksNoSqueueAndOnlyTheBatchStepSaysWhy) {
  int asked = 0;
  WorkerStartRequest r = job_request(StartSite::kBatchStep, 40, kPlainBatchJob, &asked);
  r.options.dw = 0;
  WorkerStartPlan p = plan_worker_start(r);
  EXPECT_EQ(p.start, WorkerStart::kNone);
  EXPECT_EQ(p.why, "no data workers started: dw=0: no data workers at start");
  r.options.dw = 2;
  r.options.transport = Transport::kMpi;
  p = plan_worker_start(r);
  EXPECT_EQ(p.start, WorkerStart::kNone);
  EXPECT_EQ(p.why.rfind("no data workers started: transport=mpi: ", 0), 0u) << p.why;
  r.site = StartSite::kJobStep;
  p = plan_worker_start(r);
  EXPECT_EQ(p.start, WorkerStart::kNone);
  EXPECT_EQ(p.why, "") << "every step of the job would say it again";
  EXPECT_EQ(asked, 0);
}

TEST(WorkerStartTest, APlainBatchJobGetsACompanionJobOfItsSettings) {
  int asked = 0;
  WorkerStartPlan p = plan_worker_start(job_request(StartSite::kBatchStep, 40, kPlainBatchJob, &asked));
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(p.start, WorkerStart::kCompanionJob);
  EXPECT_EQ(p.workers, 2);
  EXPECT_EQ(p.threads, 4);
  EXPECT_EQ(p.work_dir, "/srv/run");
  EXPECT_EQ(p.time_left, "5:00");
  EXPECT_TRUE(p.elastic);
  EXPECT_EQ(p.why, "workers as a companion job: not a heterogeneous job");
}

TEST(WorkerStartTest, AStaticJobDoesNotGrow) {
  int asked = 0;
  WorkerStartRequest r = job_request(StartSite::kBatchStep, 40, kPlainBatchJob, &asked);
  r.options.mode = ScalingMode::kStatic;
  WorkerStartPlan p = plan_worker_start(r);
  EXPECT_EQ(p.start, WorkerStart::kCompanionJob);
  EXPECT_FALSE(p.elastic);
}

TEST(WorkerStartTest, AHetjobsWorkersAreAStepOfItsCpuOnlyComponent) {
  for (StartSite site : {StartSite::kBatchStep, StartSite::kJobStep}) {
    int asked = 0;
    const char* squeue = site == StartSite::kBatchStep ? kBatchHetjob : kSallocHetjob;
    WorkerStartPlan p = plan_worker_start(job_request(site, 30, squeue, &asked));
    EXPECT_EQ(p.start, WorkerStart::kHetStep);
    EXPECT_EQ(p.component.job_id, 31u);
    EXPECT_EQ(p.component.offset, 1);
    EXPECT_EQ(p.workers, 3) << "one per task of the component, whatever dw says";
    EXPECT_EQ(p.threads, 2) << "its CPUs per task";
    EXPECT_EQ(p.work_dir, "/home/u/run");
    EXPECT_EQ(p.time_left, "1-02:03:04") << "the trainer's component's";
    EXPECT_TRUE(p.elastic) << "growth beyond the component: companion jobs";
    EXPECT_EQ(p.why, "");
  }
}

TEST(WorkerStartTest, OtherStepsStartWorkersOnlyInTheCpuComponentOfAJobWithoutBatchStep) {
  int asked = 0;
  WorkerStartPlan p = plan_worker_start(job_request(StartSite::kJobStep, 30, kBatchHetjob, &asked));
  EXPECT_EQ(p.start, WorkerStart::kNone) << "the batch step started them";
  EXPECT_EQ(p.why, "");
  p = plan_worker_start(job_request(StartSite::kJobStep, 40, kPlainBatchJob, &asked));
  EXPECT_EQ(p.start, WorkerStart::kNone);
  p = plan_worker_start(job_request(StartSite::kJobStep, 40, "40|N/A|N/A|1|N/A|N/A|N/A|N/A|N/A|0|5:00|/srv|\n", &asked));
  EXPECT_EQ(p.start, WorkerStart::kNone) << "a salloc job that is not heterogeneous";
  EXPECT_EQ(p.why, "");
  p = plan_worker_start(job_request(StartSite::kJobStep, 31, kSallocHetjob, &asked));
  EXPECT_EQ(p.start, WorkerStart::kNone) << "only the leader's steps";
}

TEST(WorkerStartTest, WhenSqueueFailsTheBatchStepSubmitsACompanionJobAndOtherStepsNothing) {
  int asked = 0;
  const char* down = "squeue: error: Unable to contact slurm controller\n";
  WorkerStartPlan p = plan_worker_start(job_request(StartSite::kBatchStep, 40, down, &asked, 1));
  EXPECT_EQ(p.start, WorkerStart::kCompanionJob);
  EXPECT_EQ(p.workers, 2);
  EXPECT_EQ(p.work_dir, "") << "unknown: the companion plan falls back to PWD";
  EXPECT_EQ(p.why.rfind("workers as a companion job: squeue: ", 0), 0u) << p.why;
  p = plan_worker_start(job_request(StartSite::kJobStep, 40, down, &asked, 1));
  EXPECT_EQ(p.start, WorkerStart::kNone);
  EXPECT_EQ(p.why.rfind("no data workers for this step: squeue: ", 0), 0u) << p.why;
}

TEST(WorkerStartTest, OnThisMachineWorkersAreThreadsOrProcessesOrNone) {
  WorkerStartRequest r;
  r.options.dw = 3;
  r.options.cpus_per_dw = 2;
  WorkerStartPlan p = plan_worker_start(r);
  EXPECT_EQ(p.start, WorkerStart::kLocalProcesses);
  EXPECT_EQ(p.workers, 3);
  EXPECT_EQ(p.threads, 2);
  EXPECT_FALSE(p.elastic);
  r.in_process = true;
  p = plan_worker_start(r);
  EXPECT_EQ(p.start, WorkerStart::kLocalThreads);
  EXPECT_EQ(p.workers, 3);
  r.in_process = false;
  r.options.transport = Transport::kMpi;
  p = plan_worker_start(r);
  EXPECT_EQ(p.start, WorkerStart::kNone);
  EXPECT_EQ(p.why.rfind("transport=mpi: ", 0), 0u) << p.why;
  r.options.transport = Transport::kUcx;
  r.options.dw = 0;
  p = plan_worker_start(r);
  EXPECT_EQ(p.start, WorkerStart::kNone);
  EXPECT_NE(p.why.find("--workers 0"), std::string::npos) << p.why;
  r.in_process = true;
  EXPECT_EQ(plan_worker_start(r).start, WorkerStart::kNone);
}

TEST(WorkerStartTest, ACommandsTransportNamesItsRequest) {
  WorkerStartPlan p = plan_worker_start(request_on_this_machine("ucx", 4, 3));
  EXPECT_EQ(p.start, WorkerStart::kLocalProcesses);
  EXPECT_EQ(p.workers, 4);
  EXPECT_EQ(p.threads, 3);
  EXPECT_EQ(plan_worker_start(request_on_this_machine("local", 4, 3)).start, WorkerStart::kLocalThreads);
  EXPECT_EQ(plan_worker_start(request_on_this_machine("mpi", 4, 3)).start, WorkerStart::kNone);
  EXPECT_EQ(plan_worker_start(request_on_this_machine("ucx", 0, 3)).start, WorkerStart::kNone);
}

}  // namespace
}  // namespace goldminer
