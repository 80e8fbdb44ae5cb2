#include "launch/slurm_cli.h"

#include <gtest/gtest.h>

#include <utility>

#include "launch/slurm_test_util.h"

namespace goldminer {
namespace {

// What slurmctld being down makes every client command print.
const char kControllerDown[] = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n";
const char kInvalidJob[] = "slurm_load_jobs error: Invalid job id specified\n";

// A fake Slurm command: answers every call with one exit code and output
// (or fails to run it: `cannot_run`), and records the call as one line.
struct FakeSlurm {
  FakeSlurm(int exit_code, std::string output) : exit(exit_code), out(std::move(output)) {}
  int exit;
  std::string out;
  bool cannot_run = false;
  bool timed_out = false;
  std::vector<std::string> calls;
  SlurmCommand command() {
    return testing::recording_command(&calls, [this](const std::string& name) -> Expected<CommandResult> {
      if (cannot_run) return Status::error("no executable " + name + " in PATH (/usr/bin)");
      CommandResult r;
      r.exit_code = timed_out ? -1 : exit;
      r.timed_out = timed_out;
      r.timeout_s = 10;
      r.output = out;
      return r;
    });
  }
};

// --- sbatch ----------------------------------------------------------------

TEST(SlurmCliTest, ReadsTheJobIdSbatchPrinted) {
  EXPECT_EQ(*parse_submitted_job_id("123\n"), 123u);
  EXPECT_EQ(*parse_submitted_job_id("123;cluster\n"), 123u);
  EXPECT_EQ(*parse_submitted_job_id("sbatch: warning: something\n456\n"), 456u);
  for (const char* bad : {"", "\n", "sbatch: error: Invalid partition name specified", "0\n",
                          "99999999999\n", "12a\n"}) {
    auto r = parse_submitted_job_id(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().rfind("sbatch printed no job id: '", 0), 0u) << r.status().message();
  }
}

TEST(SlurmCliTest, SubmitPassesItsArgumentsAndReturnsTheJobId) {
  FakeSlurm ok(0, "77\n");
  auto id = submit(ok.command(), {"--parsable", "--job-name=x", "/bin/true"});
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ(*id, 77u);
  EXPECT_EQ(ok.calls, std::vector<std::string>{"sbatch --parsable --job-name=x /bin/true"});

  FakeSlurm refused(1, "sbatch: error: Invalid partition name specified\n");
  EXPECT_EQ(submit(refused.command(), {"--parsable"}).status().message(),
            "sbatch: exit 1: sbatch: error: Invalid partition name specified");
  FakeSlurm down(1, "sbatch: error: Batch job submission failed: Unable to contact slurm controller\n");
  EXPECT_EQ(submit(down.command(), {}).status().message(),
            "sbatch: exit 1: sbatch: error: Batch job submission failed: Unable to contact slurm controller");
  FakeSlurm garbage(0, "Submitted batch job\n");
  EXPECT_EQ(submit(garbage.command(), {}).status().message(), "sbatch: exit 0: Submitted batch job");
  FakeSlurm missing(0, "");
  missing.cannot_run = true;
  EXPECT_EQ(submit(missing.command(), {}).status().message(), "no executable sbatch in PATH (/usr/bin)");
}

// --- squeue: states ----------------------------------------------------------

TEST(SlurmCliTest, TellsRunningWaitingAndGoneJobsApart) {
  EXPECT_EQ(parse_job_state(0, "RUNNING\n"), JobState::kRunning);
  EXPECT_EQ(parse_job_state(0, "CONFIGURING\n"), JobState::kRunning);
  EXPECT_EQ(parse_job_state(0, "PENDING\n"), JobState::kWaiting);
  EXPECT_EQ(parse_job_state(0, "SUSPENDED\n"), JobState::kWaiting);
  EXPECT_EQ(parse_job_state(0, "COMPLETING\n"), JobState::kGone);
  EXPECT_EQ(parse_job_state(0, "CANCELLED\n"), JobState::kGone);
  EXPECT_EQ(parse_job_state(0, ""), JobState::kGone);
  EXPECT_EQ(parse_job_state(1, kInvalidJob), JobState::kGone);
}

// The one reading of squeue's "none of those jobs" failure, which every
// caller (a session's launcher, goldminer-ctld, goldminer-dw) tells from
// squeue failing for other reasons.
TEST(SlurmCliTest, TellsSqueueKnowingNoneOfTheJobsFromItFailing) {
  EXPECT_TRUE(squeue_knows_none(kInvalidJob));
  EXPECT_FALSE(squeue_knows_none(kControllerDown));
  EXPECT_FALSE(squeue_knows_none(""));
}

TEST(SlurmCliTest, OneJobsStateAndWhyItWaits) {
  FakeSlurm waiting(0, "PENDING Resources\n");
  auto s = job_status(waiting.command(), 12);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(waiting.calls, std::vector<std::string>{"squeue --noheader --jobs=12 --format=%T %r"});
  EXPECT_TRUE(s->listed);
  EXPECT_EQ(s->state, JobState::kWaiting);
  EXPECT_EQ(s->state_name, "PENDING");
  EXPECT_EQ(s->reason, "Resources");

  FakeSlurm running(0, "RUNNING None\n");
  s = job_status(running.command(), 12);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->state, JobState::kRunning);
  EXPECT_EQ(s->reason, "") << "None is no reason";

  for (FakeSlurm gone : {FakeSlurm(0, ""), FakeSlurm(1, kInvalidJob)}) {
    s = job_status(gone.command(), 12);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_FALSE(s->listed) << gone.out;
    EXPECT_EQ(s->state, JobState::kGone);
  }
  FakeSlurm down(1, kControllerDown);
  EXPECT_EQ(job_status(down.command(), 12).status().message(),
            "squeue: exit 1: slurm_load_jobs error: Unable to contact slurm controller (connect failure)");
  FakeSlurm garbage(0, "<html>proxy</html>\n");
  EXPECT_EQ(job_status(garbage.command(), 12).status().message(),
            "squeue: cannot read job 12's state from '<html>proxy</html>'");
  FakeSlurm slow(0, "");
  slow.timed_out = true;
  EXPECT_EQ(job_status(slow.command(), 12).status().message(), "squeue: timed out after 10 s");
  FakeSlurm missing(0, "");
  missing.cannot_run = true;
  EXPECT_EQ(job_status(missing.command(), 12).status().message(), "no executable squeue in PATH (/usr/bin)")
      << "the runner's error names the program";
}

TEST(SlurmCliTest, SeveralJobsStatesEveryJobAskedAnswered) {
  FakeSlurm some(0, "7 RUNNING\n9 PENDING\nsqueue: warning: a line that is not a job\n");
  auto s = job_states(some.command(), {7, 8, 9});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(some.calls, std::vector<std::string>{"squeue --noheader --format=%i %T --jobs=7,8,9"});
  EXPECT_EQ(*s, (std::map<uint32_t, JobState>{{7, JobState::kRunning}, {8, JobState::kGone}, {9, JobState::kWaiting}}))
      << "8 is not listed: gone";

  FakeSlurm none(1, kInvalidJob);
  s = job_states(none.command(), {7, 8});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(*s, (std::map<uint32_t, JobState>{{7, JobState::kGone}, {8, JobState::kGone}}));

  FakeSlurm down(1, kControllerDown);
  EXPECT_EQ(job_states(down.command(), {7}).status().message(),
            "squeue: exit 1: slurm_load_jobs error: Unable to contact slurm controller (connect failure)");
  FakeSlurm unused(0, "");
  EXPECT_TRUE(job_states(unused.command(), {})->empty());
  EXPECT_TRUE(unused.calls.empty()) << "no squeue for no jobs";
}

TEST(SlurmCliTest, ParsesIdStateLinesAndSkipsTheRest) {
  EXPECT_EQ(parse_job_states("1 RUNNING\n2 PENDING\n\ngarbage\n99999999999 RUNNING\n3\n"),
            (std::map<uint32_t, JobState>{{1, JobState::kRunning}, {2, JobState::kWaiting}}));
}

TEST(SlurmCliTest, ANamedUsersJobsStates) {
  FakeSlurm listed(0, "43 RUNNING\n44 PENDING\n");
  auto s = named_job_states(listed.command(), "goldminer-dw.42", 1000);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(listed.calls,
            std::vector<std::string>{"squeue --noheader --format=%i %T --name=goldminer-dw.42 --user=1000"});
  EXPECT_EQ(*s, (std::map<uint32_t, JobState>{{43, JobState::kRunning}, {44, JobState::kWaiting}}));
  FakeSlurm down(1, kControllerDown);
  EXPECT_EQ(named_job_states(down.command(), "goldminer-dw.42", 1000).status().message(),
            "squeue: exit 1: slurm_load_jobs error: Unable to contact slurm controller (connect failure)");
}

// What goldminer-dw --trainer-job makes of squeue's answers.
TEST(SlurmCliTest, TellsATrainerJobThatEndedFromOneThatMayStillRun) {
  EXPECT_EQ(trainer_job_ended(12, 0, "RUNNING\n"), "");
  EXPECT_EQ(trainer_job_ended(12, 0, "PENDING\n"), "") << "requeued: it comes back";
  EXPECT_EQ(trainer_job_ended(12, 0, "SUSPENDED\n"), "");
  EXPECT_EQ(trainer_job_ended(12, 0, "NODE_FAIL\n"), "job 12 is NODE_FAIL");
  EXPECT_EQ(trainer_job_ended(12, 0, "CANCELLED\n"), "job 12 is CANCELLED");
  EXPECT_EQ(trainer_job_ended(12, 0, "COMPLETING\n"), "job 12 is COMPLETING");
  EXPECT_EQ(trainer_job_ended(12, 0, ""), "job 12 is no longer listed by squeue");
  EXPECT_EQ(trainer_job_ended(12, 1, kInvalidJob), "job 12 is no longer known to Slurm");
  EXPECT_EQ(trainer_job_ended(12, 1, kControllerDown), "") << "a controller restarting ends no worker";
}

TEST(SlurmCliTest, AsksSqueueWhetherATrainerJobEnded) {
  FakeSlurm failed(0, "NODE_FAIL\n");
  EXPECT_EQ(trainer_job_ended(failed.command(), 12), "job 12 is NODE_FAIL");
  EXPECT_EQ(failed.calls, std::vector<std::string>{"squeue --noheader --states=all --jobs=12 --format=%T"});
  FakeSlurm forgotten(1, kInvalidJob);
  EXPECT_EQ(trainer_job_ended(forgotten.command(), 12), "job 12 is no longer known to Slurm");
  FakeSlurm down(1, kControllerDown);
  EXPECT_EQ(trainer_job_ended(down.command(), 12), "");
  FakeSlurm slow(0, "");
  slow.timed_out = true;
  EXPECT_EQ(trainer_job_ended(slow.command(), 12), "") << "no answer is not an ended job";
  FakeSlurm missing(0, "");
  missing.cannot_run = true;
  EXPECT_EQ(trainer_job_ended(missing.command(), 12), "");
}

// --- squeue: owners and the queue ------------------------------------------

TEST(SlurmCliTest, AJobsOwnerStateAndPartition) {
  FakeSlurm ok(0, "1000 RUNNING gpu\n");
  auto o = job_owner(ok.command(), 12);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(ok.calls, std::vector<std::string>{"squeue --noheader --jobs=12 --format=%U %T %P"});
  EXPECT_EQ(o->uid, 1000u);
  EXPECT_EQ(o->state, "RUNNING");
  EXPECT_EQ(o->partition, "gpu");

  for (FakeSlurm unknown : {FakeSlurm(1, kInvalidJob), FakeSlurm(0, "\n")})
    EXPECT_EQ(job_owner(unknown.command(), 12).status().message(), kNotKnownToSlurm) << unknown.out;
  FakeSlurm down(1, kControllerDown);
  EXPECT_EQ(job_owner(down.command(), 12).status().message(),
            "squeue: exit 1: slurm_load_jobs error: Unable to contact slurm controller (connect failure)");
  for (const char* garbage : {"root RUNNING gpu\n", "-1 RUNNING gpu\n", "1000\n", "1000 RUNNING\n",
                              "1000 RUNNING gpu extra\n"}) {
    FakeSlurm bad(0, garbage);
    auto r = job_owner(bad.command(), 12);
    ASSERT_FALSE(r.ok()) << garbage;
    EXPECT_EQ(r.status().message().rfind("squeue: cannot read job 12's owner from '", 0), 0u) << r.status().message();
  }
}

// squeue's rows (UID CPUS STATE NAME, the name last: it may hold spaces);
// a row without a uid, CPUs and a state is an error naming it.
TEST(SlurmCliTest, TheQueuesRows) {
  FakeSlurm queue(0, "0 4 RUNNING goldminer-dw.10\n1000 2 PENDING my job\n\n");
  auto q = pending_and_running_jobs(queue.command());
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(queue.calls,
            std::vector<std::string>{"squeue --noheader --states=PENDING,RUNNING --format=%U %C %T %j"});
  ASSERT_EQ(q->size(), 2u);
  EXPECT_EQ((*q)[0].uid, 0u);
  EXPECT_EQ((*q)[0].cpus, 4);
  EXPECT_EQ((*q)[0].state, "RUNNING");
  EXPECT_EQ((*q)[0].name, "goldminer-dw.10");
  EXPECT_EQ((*q)[1].name, "my job");

  EXPECT_EQ(parse_queued_jobs("root 4 RUNNING goldminer-dw.10\n").status().message(),
            "squeue: cannot read the line 'root 4 RUNNING goldminer-dw.10' (expected UID CPUS STATE NAME)");
  EXPECT_EQ(parse_queued_jobs("0 4\n").status().message(),
            "squeue: cannot read the line '0 4' (expected UID CPUS STATE NAME)");
  FakeSlurm down(1, kControllerDown);
  EXPECT_EQ(pending_and_running_jobs(down.command()).status().message(),
            "squeue: exit 1: slurm_load_jobs error: Unable to contact slurm controller (connect failure)");
}

// --- squeue: a job's components and its Comment -----------------------------

// What squeue printed on the devcluster for `#SBATCH -p gpu --gres=gpu:1`
// + `#SBATCH hetjob` + `#SBATCH -p cpu -n3 -c2`, and for a plain job.
const char kHetjob[] =
    "31|30|1|3|2|N/A|N/A|N/A|N/A|1|9:58|/home/u/run|\n"
    "30|30|0|1|1|N/A|gres:gpu:1|N/A|N/A|1|1-02:03:04|/home/u/run|\n";
const char kPlainJob[] = "40|N/A|N/A|4|N/A|N/A|N/A|N/A|N/A|0|UNLIMITED|/tmp/a|b|\n";

TEST(SlurmCliTest, JobComponentsAsksSqueueForEachComponentOfAHeterogeneousJob) {
  FakeSlurm squeue(0, kHetjob);
  auto c = job_components(squeue.command(), 30);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(squeue.calls, std::vector<std::string>{std::string("squeue --noheader --jobs=30 --Format=") +
                                                   kJobComponentsFormat});
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

TEST(SlurmCliTest, APlainJobHasOneComponentAndNoOffset) {
  auto c = parse_job_components(kPlainJob);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->size(), 1u);
  EXPECT_EQ((*c)[0].het_job_id, 0u);
  EXPECT_EQ((*c)[0].offset, -1);
  EXPECT_EQ((*c)[0].cpus_per_task, 1);
  EXPECT_FALSE((*c)[0].batch);
  EXPECT_EQ((*c)[0].work_dir, "/tmp/a|b") << "the directory is the rest of the line";
  EXPECT_EQ((*c)[0].time_left, "") << "UNLIMITED: no time left to give";
}

TEST(SlurmCliTest, EveryGpuRequestFormCounts) {
  for (const char* line : {"5|5|0|1|1|gres:gpu:2|N/A|N/A|N/A|0|UNLIMITED|/|", "5|5|0|1|1|N/A|N/A|gres/gpu:1|N/A|0|UNLIMITED|/|",
                           "5|5|0|1|1|N/A|N/A|N/A|gres:gpu:a100:1|0|UNLIMITED|/|"}) {
    auto c = parse_job_components(line);
    ASSERT_TRUE(c.ok()) << line;
    EXPECT_TRUE((*c)[0].asks_gpus) << line;
  }
}

TEST(SlurmCliTest, JobComponentsErrorsQuoteTheLineOrSqueue) {
  auto c = parse_job_components("30|30|0|1|\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "squeue: cannot read a job component from '30|30|0|1|'");
  c = parse_job_components("x|30|0|1|1|N/A|N/A|N/A|N/A|0|UNLIMITED|/|\n");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "squeue: cannot read a job component from 'x|30|0|1|1|N/A|N/A|N/A|N/A|0|UNLIMITED|/|'");
  c = parse_job_components("5|N/A|N/A|1|1|N/A|N/A|N/A|N/A|0|soon|/|\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("(time left 'soon')"), std::string::npos) << c.status().message();
  FakeSlurm garbage(0, "JOBID|HET_JOB_ID\n");
  EXPECT_EQ(job_components(garbage.command(), 30).status().message(),
            "squeue: cannot read a job component from 'JOBID|HET_JOB_ID'");
  FakeSlurm unknown(1, kInvalidJob);
  EXPECT_EQ(job_components(unknown.command(), 30).status().message(),
            "squeue: exit 1: slurm_load_jobs error: Invalid job id specified");
  FakeSlurm down(1, kControllerDown);
  EXPECT_EQ(job_components(down.command(), 30).status().message(),
            "squeue: exit 1: slurm_load_jobs error: Unable to contact slurm controller (connect failure)");
  FakeSlurm missing(0, "");
  missing.cannot_run = true;
  EXPECT_EQ(job_components(missing.command(), 30).status().message(), "no executable squeue in PATH (/usr/bin)");
  FakeSlurm slow(0, kHetjob);
  slow.timed_out = true;
  EXPECT_FALSE(job_components(slow.command(), 30).ok()) << "a squeue that overran its time gave no answer";
}

TEST(SlurmCliTest, JobCommentIsReadWithSqueueAndWrittenWithScontrol) {
  FakeSlurm squeue(0, "my sweep goldminer-trainer=ucx://10.0.0.1:41000\n");
  auto comment = job_comment(squeue.command(), 42);
  ASSERT_TRUE(comment.ok()) << comment.status().message();
  EXPECT_EQ(*comment, "my sweep goldminer-trainer=ucx://10.0.0.1:41000");
  EXPECT_EQ(squeue.calls, std::vector<std::string>{"squeue --noheader --states=all --jobs=42 --format=%k"});
  FakeSlurm scontrol(0, "");
  ASSERT_TRUE(set_job_comment(scontrol.command(), 42, "a b").ok());
  EXPECT_EQ(scontrol.calls, std::vector<std::string>{"scontrol update JobId=42 Comment=a b"});
}

TEST(SlurmCliTest, JobCommentErrorsNameTheCommandAndWhatItSaid) {
  FakeSlurm unknown(1, kInvalidJob);
  EXPECT_EQ(job_comment(unknown.command(), 42).status().message(),
            "squeue (reading job 42's Comment): exit 1: slurm_load_jobs error: Invalid job id specified");
  FakeSlurm down(1, kControllerDown);
  EXPECT_EQ(job_comment(down.command(), 42).status().message(),
            "squeue (reading job 42's Comment): exit 1: slurm_load_jobs error: Unable to contact slurm controller "
            "(connect failure)");
  FakeSlurm missing(0, "");
  missing.cannot_run = true;
  EXPECT_EQ(job_comment(missing.command(), 42).status().message(),
            "squeue (reading job 42's Comment): no executable squeue in PATH (/usr/bin)");
  FakeSlurm denied(1, "slurm_update error: Access/permission denied\n");
  EXPECT_EQ(set_job_comment(denied.command(), 42, "x").message(),
            "scontrol update JobId=42 Comment=...: exit 1: slurm_update error: Access/permission denied");
}

// --- scancel -------------------------------------------------------------

TEST(SlurmCliTest, CancelsJobsAllPendingOrBySigterm) {
  FakeSlurm scancel(0, "");
  EXPECT_TRUE(cancel_jobs(scancel.command(), {7, 8}, CancelScope::kAll).ok());
  EXPECT_TRUE(cancel_jobs(scancel.command(), {7}, CancelScope::kPending).ok());
  EXPECT_TRUE(cancel_jobs(scancel.command(), {8, 9}, CancelScope::kTerminate).ok());
  EXPECT_TRUE(cancel_jobs(scancel.command(), {}, CancelScope::kAll).ok());
  EXPECT_EQ(scancel.calls, (std::vector<std::string>{"scancel --quiet 7,8", "scancel --quiet --state=PENDING 7",
                                                     "scancel --quiet --signal=TERM 8,9"}))
      << "nothing for no jobs";
  FakeSlurm denied(1, "scancel: error: Kill job error on job id 7: Access/permission denied\n");
  EXPECT_EQ(cancel_jobs(denied.command(), {7}, CancelScope::kAll).message(),
            "scancel: exit 1: scancel: error: Kill job error on job id 7: Access/permission denied");
}

TEST(SlurmCliTest, CancelsAUsersJobsByName) {
  FakeSlurm scancel(0, "");
  EXPECT_TRUE(cancel_named(scancel.command(), "goldminer-dw.42", 1000).ok());
  EXPECT_EQ(scancel.calls, std::vector<std::string>{"scancel --quiet --name=goldminer-dw.42 --user=1000"});
  FakeSlurm down(1, "scancel: error: Unable to contact slurm controller (connect failure)\n");
  EXPECT_EQ(cancel_named(down.command(), "goldminer-dw.42", 1000).message(),
            "scancel: exit 1: scancel: error: Unable to contact slurm controller (connect failure)");
  FakeSlurm missing(0, "");
  missing.cannot_run = true;
  EXPECT_EQ(cancel_named(missing.command(), "x", 1).message(), "no executable scancel in PATH (/usr/bin)");
}

// --- scontrol ------------------------------------------------------------

TEST(SlurmCliTest, HostNamesExpandsANodeList) {
  FakeSlurm scontrol(0, "g1\ng2\nc1\n");
  auto hosts = host_names(scontrol.command(), "g[1-2],c1");
  ASSERT_TRUE(hosts.ok()) << hosts.status().message();
  EXPECT_EQ(*hosts, (std::vector<std::string>{"g1", "g2", "c1"}));
  EXPECT_EQ(scontrol.calls, std::vector<std::string>{"scontrol show hostnames g[1-2],c1"});
  FakeSlurm none(0, "\n");
  EXPECT_EQ(host_names(none.command(), "g1").status().message(), "scontrol show hostnames g1: no host names");
  FakeSlurm bad(1, "scontrol: error: Invalid hostlist: g[1-\n");
  EXPECT_EQ(host_names(bad.command(), "g[1-").status().message(),
            "scontrol show hostnames g[1-: exit 1: scontrol: error: Invalid hostlist: g[1-");
}


TEST(SlurmCliTest, NodeLinesBecomeNodeRecords) {
  FakeSlurm scontrol(0, testing::kSampleNodeLines);
  auto nodes = node_lines(scontrol.command());
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_EQ(scontrol.calls, std::vector<std::string>{"scontrol --details --oneliner show node"});
  ASSERT_EQ(nodes->size(), 5u);
  const SlurmNode& gpu1 = (*nodes)[0];
  EXPECT_EQ(gpu1.name, "gpu1");
  EXPECT_EQ(gpu1.state, "MIXED");
  EXPECT_EQ(gpu1.partitions, (std::vector<std::string>{"gpu", "all", "dw"}));
  EXPECT_EQ(gpu1.cpus_total, 16);
  EXPECT_EQ(gpu1.cpus_allocated, 4);
  EXPECT_EQ(gpu1.gpus, 4);
  EXPECT_EQ(gpu1.gpus_used, 2);
  EXPECT_EQ((*nodes)[1].gpus, 4);
  EXPECT_EQ((*nodes)[2].gpus, 0) << "(null)";
  EXPECT_TRUE(node_takes_jobs(gpu1));
  EXPECT_FALSE(node_takes_jobs((*nodes)[1])) << "drained";
  EXPECT_TRUE(node_takes_jobs((*nodes)[2]));
  EXPECT_FALSE(node_takes_jobs((*nodes)[3])) << "not responding";
  EXPECT_TRUE(node_takes_jobs((*nodes)[4]));
}

TEST(SlurmCliTest, ANodeLineItCannotReadIsNamed) {
  EXPECT_EQ(parse_node_lines("NodeName=a CPUTot=4\n").status().message(), "node list line 1: no CPUAlloc");
  EXPECT_EQ(parse_node_lines("\nNodeName=a CPUTot=x CPUAlloc=0\n").status().message(),
            "node list line 2: bad CPUTot or CPUAlloc 'x', '0'");
  EXPECT_EQ(parse_node_lines("NodeName=a CPUTot=4 CPUAlloc=0 Gres=gpu:many\n").status().message(),
            "node list line 1: bad GPU count 'gpu:many'");
  FakeSlurm garbage(0, "<html>proxy</html>\n");
  EXPECT_EQ(node_lines(garbage.command()).status().message(), "scontrol show node: node list line 1: no NodeName");
  FakeSlurm down(1, "slurm_load_node error: Unable to contact slurm controller (connect failure)\n");
  EXPECT_EQ(node_lines(down.command()).status().message(),
            "scontrol show node: exit 1: slurm_load_node error: Unable to contact slurm controller (connect failure)");
}

TEST(SlurmCliTest, SlurmUserAndPrivateDataComeFromScontrolShowConfig) {
  FakeSlurm scontrol(0, "Configuration data as of 2026-11-27T01:00:00\nPrivateData             = jobs,usage\n"
                        "SlurmUser               = slurm(64030)\n");
  auto a = slurm_config(scontrol.command());
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(scontrol.calls, std::vector<std::string>{"scontrol show config"});
  EXPECT_EQ(a->slurm_user, 64030u);
  EXPECT_TRUE(a->private_jobs);
  auto b = parse_slurm_config("PrivateData = none\nSlurmUser = root(0)\n");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->slurm_user, 0u);
  EXPECT_FALSE(b->private_jobs);
  EXPECT_FALSE(parse_slurm_config("PrivateData = users\nSlurmUser = root(0)\n")->private_jobs);
  EXPECT_EQ(parse_slurm_config("PrivateData = none\n").status().message(), "scontrol show config: no SlurmUser line");
  EXPECT_EQ(parse_slurm_config("SlurmUser = root(0)\n").status().message(), "scontrol show config: no PrivateData line");
  EXPECT_EQ(parse_slurm_config("PrivateData = none\nSlurmUser = slurm\n").status().message(),
            "scontrol show config: SlurmUser: invalid value 'slurm': expected NAME(UID)");
  FakeSlurm down(1, "slurm_load_ctl_conf error: Unable to contact slurm controller (connect failure)\n");
  EXPECT_EQ(slurm_config(down.command()).status().message(),
            "scontrol show config: exit 1: slurm_load_ctl_conf error: Unable to contact slurm controller (connect "
            "failure)");
  FakeSlurm garbage(0, "garbage\n");
  EXPECT_EQ(slurm_config(garbage.command()).status().message(), "scontrol show config: no SlurmUser line");
}

TEST(SlurmCliTest, JobListIsCommaSeparated) {
  EXPECT_EQ(job_list({}), "");
  EXPECT_EQ(job_list({7}), "7");
  EXPECT_EQ(job_list({7, 8, 9}), "7,8,9");
}

}  // namespace
}  // namespace goldminer
