#include "launch/job_environment.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "launch/admin_config.h"
#include "launch/companion_job.h"
#include "launch/job_options.h"
#include "tests/test_util.h"

namespace goldminer {
namespace {

const JobEnvironmentVariable* row_of(const std::string& name) {
  for (const JobEnvironmentVariable& row : job_environment_table())
    if (row.name == name) return &row;
  return nullptr;
}

TEST(JobEnvironmentTest, EveryRowIsNamedDocumentedAndReadBySomeone) {
  std::set<std::string> names;
  for (const JobEnvironmentVariable& row : job_environment_table()) {
    EXPECT_EQ(row.name.rfind("GOLDMINER_", 0), 0u) << row.name;
    EXPECT_TRUE(names.insert(row.name).second) << row.name << " twice";
    EXPECT_FALSE(row.value_doc.empty()) << row.name;
    EXPECT_FALSE(row.help.empty()) << row.name;
    EXPECT_NE(row.readers, 0u) << row.name;
    // A row read by a process stores its value; one only for job scripts does not.
    EXPECT_EQ(row.store != nullptr, (row.readers & ~static_cast<unsigned>(kReadByJobScript)) != 0) << row.name;
  }
}

TEST(JobEnvironmentTest, EveryVariableThePluginWritesIsARowOfTheContract) {
  AdminConfig admin;
  admin.dw_partition = "cpu";
  admin.dw_qos = "dw";
  admin.ctld = "ctld:6830";
  admin.munge_socket = "/run/munge/munge.socket.2";
  auto options = parse_job_options("dw=2,dw-max=4", admin);
  ASSERT_TRUE(options.ok()) << options.status().message();
  std::vector<std::string> written;
  for (const auto& [name, value] : job_environment(*options, admin)) written.push_back(name);
  for (const std::string& e : companion_job_env({"PATH=/usr/bin"}, "ucx://10.0.0.1:7000", 12, "/run/munge/s"))
    if (e.rfind("GOLDMINER_", 0) == 0) written.push_back(e.substr(0, e.find('=')));
  BatchJob job;
  job.job_id = 12;
  job.node_address = "10.0.0.1";
  job.trainer_port = 7000;
  job.ucx_port = 7001;
  job.elastic = true;
  const CompanionJob plan = plan_companion_job(*options, admin, job);
  JobVariables trainer(plan.trainer_env);
  EXPECT_TRUE(trainer.check().ok()) << trainer.check().message();
  for (const auto& [name, value] : plan.trainer_env)
    if (name.rfind("GOLDMINER_", 0) == 0) written.push_back(name);
  ASSERT_GE(written.size(), 10u);
  for (const std::string& name : written) {
    const JobEnvironmentVariable* row = row_of(name);
    ASSERT_NE(row, nullptr) << name << " is written but is no row of the contract";
    EXPECT_TRUE(row->job_page) << name << " is set by the plugin: its man page must list it";
  }
}

TEST(JobEnvironmentTest, AStepsVariablesHoldOneValueEachAndAreCheckedAgainstTheContract) {
  AdminConfig admin;
  auto options = parse_job_options("dw=2,dw-max=4,cpus-per-dw=3", admin);
  ASSERT_TRUE(options.ok()) << options.status().message();
  JobVariables vars(job_environment(*options, admin));
  const size_t n = vars.list().size();
  // A heterogeneous job's workers' component says how many workers start.
  vars.add({{"GOLDMINER_DW", "5"}, {"GOLDMINER_DW_STEP", "30+1"}, {"UCX_TCP_CM_REUSEADDR", "y"}});
  EXPECT_EQ(vars.list().size(), n + 2) << "GOLDMINER_DW is set once";
  size_t dw = 0;
  for (const auto& [name, value] : vars.list())
    if (name == "GOLDMINER_DW") {
      ++dw;
      EXPECT_EQ(value, "5");
    }
  EXPECT_EQ(dw, 1u);
  EXPECT_TRUE(vars.check().ok()) << vars.check().message();

  JobVariables bad;
  bad.set("GOLDMINER_UCX_PORT", "70000");
  EXPECT_EQ(bad.check().message(), "GOLDMINER_UCX_PORT: invalid value '70000': expected an integer from 1 to 65535");
  JobVariables unknown;
  unknown.set("GOLDMINER_NO_SUCH", "1");
  EXPECT_EQ(unknown.check().message(), "GOLDMINER_NO_SUCH: not a variable of the job-environment contract");
  JobVariables empty;
  empty.set("GOLDMINER_DW_JOB", "");
  EXPECT_NE(empty.check().message().find("GOLDMINER_DW_JOB: set empty"), std::string::npos);
}

TEST(JobEnvironmentTest, ReadsTypedValuesOfItsRoleOnly) {
  const std::vector<std::string> env = {
      "GOLDMINER_LISTEN=ucx://10.0.0.1:7000", "GOLDMINER_UCX_PORT=7001",     "GOLDMINER_LOCAL_WORKERS=0",
      "GOLDMINER_AUTH=munge",                 "GOLDMINER_AUTH_JOB=4294967295", "GOLDMINER_DW=2",
      "GOLDMINER_DW_MAX=8",                   "GOLDMINER_CPUS_PER_DW=3",      "GOLDMINER_MODE=elastic",
      "GOLDMINER_AUTOSCALE_INTERVAL=0.5",     "GOLDMINER_DW_JOB=77",          "GOLDMINER_DW_BIND=bogus",
      "GOLDMINER_TRAINER=",                   "PATH=/usr/bin"};
  auto s = read_job_environment(env, kReadBySession);
  ASSERT_TRUE(s.ok()) << s.status().message();  // GOLDMINER_DW_BIND is goldminer-dw's: not checked here
  EXPECT_EQ(s->listen, "ucx://10.0.0.1:7000");
  EXPECT_EQ(s->ucx_port, 7001);
  ASSERT_TRUE(s->local_workers.has_value());
  EXPECT_EQ(*s->local_workers, 0u);
  EXPECT_EQ(s->auth, "munge");
  EXPECT_EQ(s->auth_job, 4294967295u);
  EXPECT_EQ(s->dw.value_or(-1), 2);
  EXPECT_EQ(s->dw_max.value_or(-1), 8);
  EXPECT_EQ(s->cpus_per_dw.value_or(-1), 3);
  EXPECT_DOUBLE_EQ(s->autoscale_interval_s.value_or(0), 0.5);
  EXPECT_EQ(s->dw_job, 77u);
  EXPECT_EQ(s->trainer, "") << "empty counts as unset";
  EXPECT_EQ(s->dw_bind, "") << "not the session's";
  EXPECT_FALSE(s->secret.has_value());

  auto w = read_job_environment(env, kReadByWorker);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(), "GOLDMINER_DW_BIND: invalid value 'bogus': expected one of cores, none");
}

TEST(JobEnvironmentTest, AValueOutOfItsRangeIsNamedWithTheRangeItsOptionHas) {
  auto bad = [](const std::string& entry, unsigned reader = kReadBySession) {
    auto r = read_job_environment({entry}, reader);
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  EXPECT_EQ(bad("GOLDMINER_UCX_PORT=70000"), "GOLDMINER_UCX_PORT: invalid value '70000': expected an integer from 1 to 65535");
  EXPECT_EQ(bad("GOLDMINER_LOCAL_WORKERS=1025"),
            "GOLDMINER_LOCAL_WORKERS: invalid value '1025': expected an integer from 0 to 1024");
  EXPECT_EQ(bad("GOLDMINER_AUTH_JOB=0", kReadByWorker),
            "GOLDMINER_AUTH_JOB: invalid value '0': expected an integer from 1 to 4294967295");
  EXPECT_EQ(bad("GOLDMINER_AUTH=kerberos", kReadByWorker),
            "GOLDMINER_AUTH: invalid value 'kerberos': expected one of munge, secret");
  EXPECT_EQ(bad("GOLDMINER_CTLD=nohost", kReadByTop).rfind("GOLDMINER_CTLD: invalid value 'nohost': ", 0), 0u);
  // cpus-per-dw has one range: the option's, in sbatch and in the job's environment alike.
  auto option = parse_job_options("cpus-per-dw=0", AdminConfig());
  ASSERT_FALSE(option.ok());
  const std::string why = option.status().message().substr(option.status().message().find("': ") + 3);
  EXPECT_EQ(bad("GOLDMINER_CPUS_PER_DW=0"), "GOLDMINER_CPUS_PER_DW: invalid value '0': " + why);
  EXPECT_EQ(bad("GOLDMINER_CPUS_PER_DW=1024"), "accepted") << "the site's max_cpus_per_dw is the plugin's to apply";
  EXPECT_EQ(bad("GOLDMINER_CPUS_PER_DW=1025"),
            "GOLDMINER_CPUS_PER_DW: invalid value '1025': expected an integer from 1 to 1024")
      << "no more than goldminer-dw --threads takes";
}

TEST(JobEnvironmentTest, ASecretSetButEmptyIsKeptForItsErrorAndNeverPrinted) {
  auto r = read_job_environment({"GOLDMINER_SECRET="}, kReadByWorker);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->secret.has_value());
  EXPECT_EQ(*r->secret, "");
  r = read_job_environment({"GOLDMINER_SECRET=hunter2hunter2", "GOLDMINER_TRAINER=ucx://h:1"}, kReadByWorker);
  ASSERT_TRUE(r.ok());
  const std::string text = describe_job_environment(*r, kReadByWorker);
  EXPECT_EQ(text.find("hunter2"), std::string::npos) << text;
  EXPECT_TRUE(testing::contains_all(text, {"# GOLDMINER_SECRET set (14 bytes, not shown)\n",
                                           "GOLDMINER_TRAINER=ucx://h:1  # environment\n",
                                           "# GOLDMINER_PYTHON unset\n"}));
  EXPECT_EQ(text.find("GOLDMINER_DW_SBATCH"), std::string::npos) << "not the worker's: " << text;
}

TEST(JobEnvironmentTest, ManPagesListTheVariablesEachRoleReads) {
  const std::string worker = render_man_job_environment(kReadByWorker);
  EXPECT_NE(worker.find("\\fBGOLDMINER_TRAINER\\fR=\\fIucx://HOST:PORT\\fR\n"), std::string::npos) << worker;
  EXPECT_NE(worker.find("GOLDMINER_PYTHON"), std::string::npos);
  EXPECT_EQ(worker.find("GOLDMINER_DW_SBATCH"), std::string::npos);
  const std::string plugin = render_man_plugin_environment();
  EXPECT_NE(plugin.find("GOLDMINER_DW_SBATCH"), std::string::npos);
  EXPECT_NE(plugin.find("GOLDMINER_OPTIONS"), std::string::npos);
  EXPECT_EQ(plugin.find("GOLDMINER_SECRET"), std::string::npos) << "never set by the plugin";
}

}  // namespace
}  // namespace goldminer
