#include "launch/elastic_setup.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace goldminer {
namespace {

// "NAME ARG...": a Slurm command as the fake records it.
std::string command_line(const std::string& name, const std::vector<std::string>& args) {
  std::string line = name;
  for (const std::string& a : args) line += " " + a;
  return line;
}

// A fake sbatch/squeue/scancel: sbatch hands out ids from 100; squeue
// answers `states` (id -> state, missing: gone); every call is recorded.
struct FakeSlurm {
  uint32_t next_id = 100;
  int sbatch_exit = 0;
  std::map<uint32_t, std::string> states;
  std::vector<std::string> calls;
  SlurmCommand command() {
    return [this](const std::string& name, const std::vector<std::string>& args) -> Expected<CommandResult> {
      calls.push_back(command_line(name, args));
      CommandResult r;
      r.exit_code = 0;
      if (name == "sbatch") {
        r.exit_code = sbatch_exit;
        r.output = sbatch_exit == 0 ? std::to_string(next_id) + "\n" : "sbatch: error: Invalid partition name\n";
        if (sbatch_exit == 0) states[next_id++] = "PENDING";
      } else if (name == "squeue") {
        for (const auto& [id, st] : states) r.output += std::to_string(id) + " " + st + "\n";
        if (r.output.empty()) {
          r.exit_code = 1;
          r.output = "slurm_load_jobs error: Invalid job id specified\n";
        }
      }
      return r;
    };
  }
};

TEST(ElasticSetupTest, SlurmLauncherSubmitsOneJobPerWorkerAndCancelsOnlyPendingOnes) {
  FakeSlurm slurm;
  SlurmWorkerLauncher l({"--parsable", "--ntasks=1"}, slurm.command());
  std::string error;
  EXPECT_EQ(l.start(3, &error), 3);
  EXPECT_EQ(l.jobs(), (std::vector<uint32_t>{100, 101, 102}));
  EXPECT_EQ(slurm.calls[0], "sbatch --parsable --ntasks=1");
  EXPECT_EQ(l.waiting(), 3);
  EXPECT_EQ(slurm.calls.back(), "squeue --noheader --format=%i %T --jobs=100,101,102");
  slurm.states[100] = "RUNNING";
  EXPECT_EQ(l.waiting(), 2);
  // Newest first.
  EXPECT_EQ(l.cancel_waiting(1), 1);
  EXPECT_EQ(slurm.calls.back(), "scancel --quiet --state=PENDING 102");
  slurm.states.erase(102);
  EXPECT_EQ(l.cancel_waiting(5), 1) << "only 101 still waits";
  EXPECT_EQ(slurm.calls.back(), "scancel --quiet --state=PENDING 101");
  slurm.states.erase(101);
  EXPECT_EQ(l.waiting(), 0);
  EXPECT_EQ(slurm.calls.back(), "squeue --noheader --format=%i %T --jobs=100") << "gone ones are not asked again";

  slurm.sbatch_exit = 1;
  EXPECT_EQ(l.start(2, &error), 0);
  EXPECT_EQ(error, "sbatch: exit 1: sbatch: error: Invalid partition name");

  // The end: the running one is told to drain; nothing after that.
  l.end();
  EXPECT_EQ(slurm.calls.back(), "scancel --quiet --signal=TERM 100");
  const size_t calls = slurm.calls.size();
  l.end();
  EXPECT_EQ(l.start(1, &error), 0);
  EXPECT_EQ(slurm.calls.size(), calls);
}

TEST(ElasticSetupTest, SlurmLauncherEndCancelsWaitingJobs) {
  FakeSlurm slurm;
  {
    SlurmWorkerLauncher l({"--parsable"}, slurm.command());
    std::string error;
    l.start(2, &error);
    slurm.states[100] = "RUNNING";
  }  // destroyed: end()
  EXPECT_EQ(slurm.calls[slurm.calls.size() - 2], "scancel --quiet --state=PENDING 101");
  EXPECT_EQ(slurm.calls.back(), "scancel --quiet --signal=TERM 100");
}

TEST(ElasticSetupTest, SlurmLauncherTreatsUnknownStatesAsWaiting) {
  FakeSlurm slurm;
  SlurmWorkerLauncher l({"--parsable"}, [&](const std::string& name, const std::vector<std::string>& args) {
    if (name == "squeue") {
      CommandResult r;
      r.exit_code = 1;
      r.output = "squeue: error: Unable to contact slurm controller\n";
      return Expected<CommandResult>(r);
    }
    return slurm.command()(name, args);
  });
  std::string error;
  l.start(1, &error);
  EXPECT_EQ(l.waiting(), 1) << "not knowing holds growth back";
}

TEST(ElasticSetupTest, SlurmLauncherExcludesTheTrainersNodeOnceAsked) {
  FakeSlurm slurm;
  SlurmWorkerLauncher l({"--parsable", "--ntasks=1"}, slurm.command());
  l.avoid_trainer_node();  // its node is not known: nothing to exclude
  std::string error;
  ASSERT_EQ(l.start(1, &error), 1);
  EXPECT_EQ(slurm.calls.back(), "sbatch --parsable --ntasks=1");
  l.set_trainer_node("g1");
  l.avoid_trainer_node();
  l.avoid_trainer_node();
  ASSERT_EQ(l.start(1, &error), 1);
  EXPECT_EQ(slurm.calls.back(), "sbatch --exclude=g1 --parsable --ntasks=1") << "once, before the job's own options";
  l.end();
}

std::vector<std::string> elastic_env() {
  return {"PATH=/usr/bin:/bin",
          "GOLDMINER_MODE=elastic",
          "GOLDMINER_DW=2",
          "GOLDMINER_DW_MAX=6",
          "GOLDMINER_DW_SBATCH=--parsable '--wrap=exec srun goldminer-dw -v' --ntasks=1",
          "GOLDMINER_TRAINER=ucx://10.0.0.1:20007",
          "GOLDMINER_AUTH=munge",
          "GOLDMINER_AUTH_JOB=7",
          "GOLDMINER_MUNGE_SOCKET=/run/gm/munge.socket",
          "GOLDMINER_LISTEN=ucx://10.0.0.1:20007",
          "SLURM_JOB_ID=7",
          "SLURM_CONF=/etc/slurm.conf",
          "HOME=/home/u"};
}

TEST(ElasticSetupTest, SetUpFromTheBatchJobsEnvironment) {
  std::vector<CommandSpec> ran;
  auto setup = elastic_from_environment(elastic_env(), [&](const CommandSpec& spec) -> Expected<CommandResult> {
    ran.push_back(spec);
    CommandResult r;
    r.exit_code = 0;
    r.output = "55\n";
    return r;
  });
  ASSERT_TRUE(setup.ok()) << setup.status().message();
  ASSERT_NE(setup->launcher, nullptr);
  EXPECT_EQ(setup->config.initial_workers, 2);
  EXPECT_EQ(setup->config.autosizer.min_workers, 1);
  EXPECT_EQ(setup->config.autosizer.max_workers, 6);
  EXPECT_EQ(setup->interval_s, kDefaultAutoscaleIntervalS);
  std::string error;
  ASSERT_EQ(setup->launcher->start(1, &error), 1) << error;
  ASSERT_EQ(ran.size(), 1u);
  EXPECT_EQ(ran[0].argv, (std::vector<std::string>{"/usr/bin/sbatch", "--parsable", "--wrap=exec srun goldminer-dw -v",
                                                   "--ntasks=1"}));
  // The workers' environment: the job's without Slurm's input variables
  // and GOLDMINER_* but the trainer and how to prove the job.
  const auto& env = ran[0].env;
  for (const char* kept : {"PATH=/usr/bin:/bin", "HOME=/home/u", "SLURM_CONF=/etc/slurm.conf",
                           "GOLDMINER_TRAINER=ucx://10.0.0.1:20007", "GOLDMINER_AUTH=munge", "GOLDMINER_AUTH_JOB=7",
                           "GOLDMINER_MUNGE_SOCKET=/run/gm/munge.socket"})
    EXPECT_NE(std::find(env.begin(), env.end(), kept), env.end()) << kept;
  for (const char* dropped : {"SLURM_JOB_ID=7", "GOLDMINER_DW_SBATCH=", "GOLDMINER_LISTEN=", "GOLDMINER_MODE="})
    EXPECT_TRUE(std::none_of(env.begin(), env.end(), [&](const std::string& e) { return e.rfind(dropped, 0) == 0; }))
        << dropped;
  // squeue and scancel get PATH and SLURM_CONF only.
  setup->launcher->waiting();
  EXPECT_EQ(ran.back().argv[0], "/usr/bin/squeue");
  EXPECT_EQ(ran.back().env, (std::vector<std::string>{"PATH=/usr/bin:/bin", "SLURM_CONF=/etc/slurm.conf"}));
  // Asked to avoid the trainer's node: Slurm's name for it.
  std::vector<std::string> on_g1 = elastic_env();
  on_g1.push_back("SLURMD_NODENAME=g1");
  auto placed = elastic_from_environment(on_g1, [&](const CommandSpec& spec) -> Expected<CommandResult> {
    ran.push_back(spec);
    CommandResult r;
    r.exit_code = 0;
    r.output = "56\n";
    return r;
  });
  ASSERT_TRUE(placed.ok());
  placed->launcher->avoid_trainer_node();
  ASSERT_EQ(placed->launcher->start(1, &error), 1) << error;
  EXPECT_EQ(ran.back().argv[1], "--exclude=g1");
  placed->launcher->end();
  setup->launcher->end();
}

TEST(ElasticSetupTest, NoLauncherForStaticJobsOrWithoutACompanionJob) {
  auto env = elastic_env();
  std::replace(env.begin(), env.end(), std::string("GOLDMINER_MODE=elastic"), std::string("GOLDMINER_MODE=static"));
  auto s = elastic_from_environment(env, [](const CommandSpec&) { return Expected<CommandResult>(CommandResult{}); });
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->launcher, nullptr);
  s = elastic_from_environment({"GOLDMINER_MODE=elastic", "GOLDMINER_DW=0"});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->launcher, nullptr);
}

TEST(ElasticSetupTest, BadVariablesAreNamed) {
  auto with = [](const std::string& entry) {
    auto env = elastic_env();
    const std::string name = entry.substr(0, entry.find('=') + 1);
    for (auto& e : env)
      if (e.rfind(name, 0) == 0) e = entry;
    if (std::find(env.begin(), env.end(), entry) == env.end()) env.push_back(entry);
    return elastic_from_environment(env).status().message();
  };
  EXPECT_EQ(with("GOLDMINER_DW_MAX=lots"), "GOLDMINER_DW_MAX: invalid value 'lots': expected an integer >= 1");
  EXPECT_EQ(with("GOLDMINER_MODE=sometimes"), "GOLDMINER_MODE: invalid value 'sometimes': expected one of elastic, static");
  EXPECT_EQ(with("GOLDMINER_DW_SBATCH=--wrap='exec"), "GOLDMINER_DW_SBATCH: unterminated ' at offset 7");
  EXPECT_EQ(with("GOLDMINER_AUTOSCALE_INTERVAL=0"),
            "GOLDMINER_AUTOSCALE_INTERVAL: invalid value '0': expected a number from 0.01 to 3600");
  EXPECT_EQ(with("GOLDMINER_TRAINER="), "GOLDMINER_DW_SBATCH is set but GOLDMINER_TRAINER or GOLDMINER_AUTH_JOB is not");
  EXPECT_EQ(with("GOLDMINER_AUTH_JOB=x"), "GOLDMINER_AUTH_JOB: invalid value 'x': expected an integer from 1 to 4294967295");
  EXPECT_EQ(with("GOLDMINER_CPUS_PER_DW=0"),
            "GOLDMINER_CPUS_PER_DW: invalid value '0': expected an integer from 1 to 1024");
  EXPECT_EQ(with("GOLDMINER_MODE="), "GOLDMINER_DW_SBATCH is set but GOLDMINER_MODE is not");
  EXPECT_EQ(with("GOLDMINER_DW="), "GOLDMINER_DW_SBATCH is set but GOLDMINER_DW or GOLDMINER_DW_MAX is not");
  EXPECT_EQ(with("GOLDMINER_AUTOSCALE_INTERVAL=0.5"), "");
  // A worker's CPUs come from the job's option, never from the sbatch line.
  auto env = elastic_env();
  env.push_back("GOLDMINER_CPUS_PER_DW=3");
  EXPECT_DOUBLE_EQ(elastic_from_environment(env)->cpus_per_dw, 3);
  EXPECT_DOUBLE_EQ(elastic_from_environment(elastic_env())->cpus_per_dw, 1) << "outside the plugin: 1";
}

}  // namespace
}  // namespace goldminer
