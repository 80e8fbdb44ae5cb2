// Tests of the per-step firewall's names, script and parsers, and of the
// commands that install and remove it with the real nft, in a network
// namespace of the test's own (root only: skipped, with the reason, else).
#include "launch/job_firewall.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "launch/job_firewall_nft.h"
#include "launch/subprocess.h"

namespace goldminer {
namespace {

TEST(JobFirewallTest, AdmittedSourcesAreAddressesOrPrefixes) {
  EXPECT_EQ(parse_admitted_net("10.1.2.3")->text, "10.1.2.3");
  EXPECT_EQ(parse_admitted_net("10.1.2.3/16")->text, "10.1.0.0/16") << "host bits cleared";
  EXPECT_EQ(parse_admitted_net("10.1.2.3/32")->text, "10.1.2.3");
  EXPECT_EQ(parse_admitted_net("0.0.0.0/0")->text, "0.0.0.0/0");
  EXPECT_EQ(parse_admitted_net("fd00:6d67:1::5/64")->text, "fd00:6d67:1::/64");
  EXPECT_TRUE(parse_admitted_net("fd00::5")->v6);
  EXPECT_FALSE(parse_admitted_net("10.0.0.0/8")->v6);
  EXPECT_EQ(parse_admitted_net("10.0.0.0/33").status().message(), "'10.0.0.0/33': the prefix length must be 0 to 32");
  EXPECT_EQ(parse_admitted_net("fd00::/129").status().message(), "'fd00::/129': the prefix length must be 0 to 128");
  EXPECT_EQ(parse_admitted_net("10.0.0.0/").status().message(), "'10.0.0.0/': the prefix length must be 0 to 32");
  EXPECT_EQ(parse_admitted_net("g1").status().message(), "'g1': not an IPv4 or IPv6 address or ADDRESS/PREFIX");
  EXPECT_EQ(parse_admitted_net("10.0.0.1; flush ruleset").status().message(),
            "'10.0.0.1; flush ruleset': not an IPv4 or IPv6 address or ADDRESS/PREFIX")
      << "nothing but an address reaches the script";
  auto list = parse_admitted_list("10.1.0.0/16,fd00::/64");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].text, "fd00::/64");
  EXPECT_TRUE(parse_admitted_list("")->empty());
  EXPECT_EQ(parse_admitted_list("10.0.0.1,").status().message(), "'10.0.0.1,': an empty entry after the last comma");
  EXPECT_EQ(parse_admitted_list("10.0.0.1,,10.0.0.2").status().message(),
            "'': not an IPv4 or IPv6 address or ADDRESS/PREFIX");
}

TEST(JobFirewallTest, TheScriptReplacesTheStepsTableAndDropsOnlyForItsPorts) {
  JobFirewall f;
  f.job = 42;
  f.pid = 1234;
  f.start = 98765;
  f.ports = {20043, 20042, 20043};
  f.admitted = {"10.213.5.2", "10.213.5.3", "fd00::7", "10.213.5.2", "10.9.0.0/16"};
  auto s = firewall_script(f);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(*s,
            "table inet goldminer_j42_p1234_s98765\n"
            "delete table inet goldminer_j42_p1234_s98765\n"
            "table inet goldminer_j42_p1234_s98765 {\n"
            "  set admitted_v4 {\n"
            "    type ipv4_addr\n"
            "    flags interval\n"
            "    auto-merge\n"
            "    elements = { 127.0.0.0/8, 10.213.5.2, 10.213.5.3, 10.9.0.0/16 }\n"
            "  }\n"
            "  set admitted_v6 {\n"
            "    type ipv6_addr\n"
            "    flags interval\n"
            "    auto-merge\n"
            "    elements = { ::1, fd00::7 }\n"
            "  }\n"
            "  chain input {\n"
            "    type filter hook input priority -10; policy accept;\n"
            "    tcp dport { 20042, 20043 } ip saddr != @admitted_v4 counter drop\n"
            "    tcp dport { 20042, 20043 } ip6 saddr != @admitted_v6 counter drop\n"
            "  }\n"
            "}\n");
  f.ports.clear();
  EXPECT_EQ(firewall_script(f).status().message(), "firewall: no port to guard");
  f.ports = {70000};
  EXPECT_EQ(firewall_script(f).status().message(), "firewall: port 70000 is not 1 to 65535");
  f.ports = {20042};
  f.admitted = {"g1"};
  EXPECT_EQ(firewall_script(f).status().message(),
            "firewall: admitted source 'g1': not an IPv4 or IPv6 address or ADDRESS/PREFIX");
}

TEST(JobFirewallTest, OurTablesAreReadBackFromNftsListing) {
  const std::string listing =
      "table inet filter\n"
      "table inet goldminer_j42_p1234_s98765\n"
      "table ip goldminer_j43_p1_s2\n"           // another family: not ours
      "table inet goldminer_j44_p1_s2 extra\n"   // not a plain listing line
      "table inet goldminer_jx_p1_s2\n"
      "table inet goldminer_j45_p01_s2\n"        // not as we name them
      "table inet goldminer_j46_p7_s99999999999999999999\n"  // too long to be ours
      "table inet goldminer_j47_p8_s9\n";
  auto tables = firewall_tables(listing);
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_EQ(tables[0].name, "goldminer_j42_p1234_s98765");
  EXPECT_EQ(tables[0].job, 42u);
  EXPECT_EQ(tables[0].pid, 1234);
  EXPECT_EQ(tables[0].start, 98765u);
  EXPECT_EQ(tables[1].name, firewall_table_name(47, 8, 9));
}

TEST(JobFirewallTest, GetentsAddressesEachOnce) {
  const std::string out =
      "10.213.5.2      STREAM g1\n"
      "10.213.5.2      DGRAM  \n"
      "10.213.5.2      RAW    \n"
      "fd00::2         STREAM g1\n"
      "garbage line\n"
      "10.213.5.3      STREAM g2\n";
  EXPECT_EQ(getent_addresses(out), (std::vector<std::string>{"10.213.5.2", "fd00::2", "10.213.5.3"}));
}

TEST(JobFirewallTest, TheJobsNodeListsComeFromTheStepsEnvironment) {
  EXPECT_EQ(job_nodelists({"HOME=/root", "SLURM_NODELIST=old[1-2]", "SLURM_JOB_NODELIST=g[1-2]"}),
            (std::vector<std::string>{"g[1-2]"}));
  EXPECT_EQ(job_nodelists({"SLURM_NODELIST=c1"}), (std::vector<std::string>{"c1"}));
  EXPECT_EQ(job_nodelists({"SLURM_JOB_NODELIST=g1,c[1-2]", "SLURM_JOB_NODELIST_HET_GROUP_0=g1",
                           "SLURM_JOB_NODELIST_HET_GROUP_1=c[1-2]", "SLURM_JOB_NODELIST_HET_GROUP_2=g1"}),
            (std::vector<std::string>{"g1,c[1-2]", "g1", "c[1-2]"}));
  EXPECT_TRUE(job_nodelists({"PATH=/bin"}).empty());
}

// The real nft, in a network namespace the test makes (unshare --net, a
// sleeping process holding it; nft entered into it by nsenter): a table of
// a step that is gone is swept, the step's table is installed with its
// ports and sources, and closing it removes it (twice is fine).
TEST(JobFirewallTest, RealNftInstallsSweepsAndRemovesTables) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (nft in a network namespace of its own)";
  for (const char* p : {"/usr/sbin/nft", "/usr/bin/unshare", "/usr/bin/nsenter"})
    if (access(p, X_OK) != 0) GTEST_SKIP() << "needs " << p << " (Debian: nftables, util-linux)";
  char dir_template[] = "/tmp/gm-firewall-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  const pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    execl("/usr/bin/unshare", "unshare", "--net", "/bin/sleep", "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  struct Cleanup {
    pid_t pid;
    std::string dir;
    ~Cleanup() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      std::system(("rm -rf " + dir).c_str());
    }
  } cleanup{holder, dir};
  // Wait until the holder is in its own namespace.
  const std::string own_ns = "/proc/self/ns/net", its_ns = "/proc/" + std::to_string(holder) + "/ns/net";
  bool entered = false;
  for (int i = 0; i < 200 && !entered; ++i) {
    char a[64] = "", b[64] = "";
    const ssize_t na = readlink(own_ns.c_str(), a, sizeof a - 1), nb = readlink(its_ns.c_str(), b, sizeof b - 1);
    entered = na > 0 && nb > 0 && std::string(a, na) != std::string(b, nb);
    if (!entered) usleep(10000);
  }
  ASSERT_TRUE(entered) << "the namespace holder did not start";
  const std::string nft = dir + "/nft";
  {
    std::ofstream w(nft);
    w << "#!/bin/sh\nexec /usr/bin/nsenter -t " << holder << " -n /usr/sbin/nft \"$@\"\n";
  }
  ASSERT_EQ(chmod(nft.c_str(), 0700), 0);
  FirewallTools tools;
  tools.nft = nft;
  tools.nft_source = "test";
  tools.script_dir = dir;
  tools.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  tools.timeout_s = 20;
  tools.timeout_source = "test";
  auto list = [&] {
    CommandSpec spec;
    spec.argv = {nft, "list", "ruleset"};
    spec.env = tools.env;
    auto r = run_command(spec);
    return r.ok() ? r->output : r.status().message();
  };
  // A table of a step that is gone, as a killed slurmstepd leaves it.
  JobFirewall gone;
  gone.job = 41;
  gone.pid = 999999;
  gone.start = 5;
  gone.ports = {20041};
  auto first = open_job_firewall(tools, gone, [](pid_t, uint64_t) { return true; });
  ASSERT_TRUE(first.ok()) << first.status().message();
  JobFirewall f;
  f.job = 42;
  f.pid = getpid();
  f.start = 7;
  f.ports = {20042, 20043};
  f.admitted = {"10.213.5.2", "10.9.0.0/16", "fd00::/64"};
  auto name = open_job_firewall(tools, f, [&](pid_t pid, uint64_t) { return pid == getpid(); });
  ASSERT_TRUE(name.ok()) << name.status().message();
  EXPECT_EQ(*name, "goldminer_j42_p" + std::to_string(getpid()) + "_s7");
  std::string rules = list();
  EXPECT_EQ(rules.find("goldminer_j41_"), std::string::npos) << "the gone step's table was not swept:\n" << rules;
  EXPECT_NE(rules.find("table inet " + *name), std::string::npos) << rules;
  EXPECT_NE(rules.find("tcp dport { 20042, 20043 } ip saddr != @admitted_v4 counter packets 0 bytes 0 drop"),
            std::string::npos)
      << rules;
  EXPECT_NE(rules.find("10.9.0.0/16"), std::string::npos) << rules;
  EXPECT_NE(rules.find("fd00::/64"), std::string::npos) << rules;
  // Opening again (a second step of the same process never does; a
  // restarted one with the same name would) replaces, not duplicates.
  ASSERT_TRUE(open_job_firewall(tools, f, [](pid_t, uint64_t) { return true; }).ok());
  rules = list();
  EXPECT_EQ(rules.find("table inet " + *name), rules.rfind("table inet " + *name)) << rules;
  EXPECT_TRUE(close_job_firewall(tools, *name).ok());
  EXPECT_EQ(list().find("goldminer_"), std::string::npos) << list();
  EXPECT_TRUE(close_job_firewall(tools, *name).ok()) << "a table gone already";
  // nft's own error reaches the message.
  f.admitted = {};
  tools.nft = "/bin/false";
  auto refused = open_job_firewall(tools, f, [](pid_t, uint64_t) { return true; });
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().rfind("/bin/false list tables: exit 1", 0), 0u) << refused.status().message();
}

}  // namespace
}  // namespace goldminer
