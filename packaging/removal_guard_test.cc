// The plugin packages' removal guard (packaging/scripts/plugins-removal-guard.sh),
// run as their prerm runs it, against Slurm configurations written into a
// temporary directory: a node with its own files, and a configless node whose
// slurmd keeps what slurmctld sent (GOLDMINER_SLURMD_CONF_CACHE). The package
// test (tests/packages/removal.sh) runs the installed guard under a cluster.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/test_util.h"

namespace fs = std::filesystem;
using goldminer::testing::contains_all;
using goldminer::testing::run_command;

namespace {

class RemovalGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gm-guard-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "etc/plugstack.conf.d");
    fs::create_directories(dir_ / "share/plugstack.conf.d");
    fs::create_directories(dir_ / "cache");
    fs::create_directories(dir_ / "bin");
    example_ = dir_ / "share/plugstack.conf.d/goldminer.conf";
    write(example_, "required /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_goldminer.so\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void write(const fs::path& path, const std::string& text) {
    std::ofstream(path) << text;
  }

  // Runs the guard (MODE: --select or --spank) with slurm.conf `conf`
  // (relative to the directory; a missing one is a configless node's) and
  // slurmd's copy in cache/ when `configless`; stderr with stdout.
  goldminer::testing::CommandResult guard(const std::string& mode, const std::string& conf = "etc/slurm.conf",
                                          bool configless = false) {
    // PATH: bin/ (where a test puts a slurmctld), then the shell's tools.
    std::string command = "PATH=" + (dir_ / "bin").string() + ":/usr/bin:/bin";
    command += " GOLDMINER_GUARD_SLURM_VERSION=" + slurm_version_;
    command += " SLURM_CONF=" + (dir_ / conf).string();
    command += " GOLDMINER_SLURMD_CONF_CACHE=" + (configless ? (dir_ / "cache").string() : "/nonexistent");
    command += " sh " GM_TOP_SRCDIR "/packaging/scripts/plugins-removal-guard.sh " + mode;
    if (mode == "--spank") command += " " + example_.string();
    return run_command(command + " 2>&1");
  }

  fs::path dir_;
  fs::path example_;
  std::string slurm_version_ = "22.05.8";  // the release the package was built for
};

TEST_F(RemovalGuardTest, SelectIsRefusedWhileSlurmConfSelectsItNamingTheLine) {
  write(dir_ / "etc/slurm.conf", "ClusterName=c\n# SelectType=select/cons_tres\nSelectType=select/goldminer_cons_tres\n");
  const auto r = guard("--select");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains_all(r.out, {(dir_ / "etc/slurm.conf").string() + " line 3 says SelectType=select/goldminer_cons_tres",
                                   "Change it to SelectType=select/cons_tres"}));
  write(dir_ / "etc/slurm.conf", "ClusterName=c\nSelectType=select/cons_tres\n# SelectType=select/goldminer_cons_tres\n");
  EXPECT_EQ(guard("--select").status, 0);
}

// From 25.11 on only slurmctld loads the select plugin: a host without
// slurmctld may drop it; up to 24.11 sinfo and scontrol need it everywhere.
TEST_F(RemovalGuardTest, SelectFrom2511IsRefusedOnlyWhereSlurmctldIs) {
  write(dir_ / "etc/slurm.conf", "SelectType=select/goldminer_cons_tres\n");
  slurm_version_ = "24.11.5";
  EXPECT_EQ(guard("--select").status, 1);
  slurm_version_ = "25.11.7";
  const auto r = guard("--select");
  EXPECT_EQ(r.status, 0) << r.out;
  write(dir_ / "bin/slurmctld", "#!/bin/sh\nexit 0\n");
  fs::permissions(dir_ / "bin/slurmctld", fs::perms::owner_all);
  EXPECT_EQ(guard("--select").status, 1);
  slurm_version_ = "unknown";  // an unsubstituted copy: as before 25.11
  fs::remove(dir_ / "bin/slurmctld");
  EXPECT_EQ(guard("--select").status, 1);
}

TEST_F(RemovalGuardTest, SelectOnAConfiglessNodeNamesTheCopyAndTheControllersFile) {
  write(dir_ / "cache/slurm.conf", "SelectType=select/goldminer_cons_tres\n");
  const auto r = guard("--select", "etc/none.conf", true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains_all(r.out, {(dir_ / "cache/slurm.conf").string() + " line 1", "slurmd's copy",
                                   "on the slurmctld host", "scontrol reconfigure"}));
  write(dir_ / "cache/slurm.conf", "SelectType=select/cons_tres\n");
  EXPECT_EQ(guard("--select", "etc/none.conf", true).status, 0);
}

TEST_F(RemovalGuardTest, SpankDeletesAnIncludedLinkToTheExampleThatWouldDangle) {
  write(dir_ / "etc/slurm.conf", "ClusterName=c\n");
  write(dir_ / "etc/plugstack.conf", "include " + (dir_ / "etc/plugstack.conf.d").string() + "/*\n");
  const fs::path link = dir_ / "etc/plugstack.conf.d/goldminer.conf";
  fs::create_symlink(example_, link);
  write(dir_ / "etc/plugstack.conf.d/other.conf", "optional /usr/lib/other.so\n");
  const auto r = guard("--spank");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(contains_all(r.out, {"removed the plugstack include " + link.string()}));
  EXPECT_FALSE(fs::is_symlink(link));
  EXPECT_TRUE(fs::exists(dir_ / "etc/plugstack.conf.d/other.conf"));
}

TEST_F(RemovalGuardTest, SpankIsRefusedWhileAPlugstackFileLoadsItAndRemovesNothing) {
  write(dir_ / "etc/slurm.conf", "PlugStackConfig=" + (dir_ / "etc/stack.conf").string() + "\n");
  write(dir_ / "etc/stack.conf", "include plugstack.conf.d/*.conf\n");
  fs::create_symlink(example_, dir_ / "etc/plugstack.conf.d/a.conf");
  write(dir_ / "etc/plugstack.conf.d/b.conf", "# a comment\nrequired /x/spank_goldminer.so dw_partition=dw\n");
  const auto r = guard("--spank");
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains_all(r.out, {(dir_ / "etc/plugstack.conf.d/b.conf").string() + " line 2 loads spank_goldminer.so",
                                   "remove that line first"}));
  EXPECT_TRUE(fs::is_symlink(dir_ / "etc/plugstack.conf.d/a.conf"));
}

// 24.11 and later: plugstack.conf includes the line from a file that
// slurmctld sends along; the node's copy names it.
TEST_F(RemovalGuardTest, SpankOnAConfiglessNodeIsRefusedWhileTheSentIncludeLoadsIt) {
  write(dir_ / "cache/plugstack.conf", "include goldminer-plugstack.conf\n");
  write(dir_ / "cache/goldminer-plugstack.conf", "# sent by slurmctld\nrequired /x/spank_goldminer.so\n");
  const auto r = guard("--spank", "etc/none.conf", true);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(contains_all(r.out, {(dir_ / "cache/goldminer-plugstack.conf").string() + " line 2 loads spank_goldminer.so",
                                   "slurmd's copy", "on the slurmctld host", "scontrol reconfigure"}));
  write(dir_ / "cache/goldminer-plugstack.conf", "# the line removed on the controller\n");
  EXPECT_EQ(guard("--spank", "etc/none.conf", true).status, 0);
}

// 22.05 sends plugstack.conf alone, with the line in it; an absolute glob
// there names this node's own directory, whose link to the example goes.
TEST_F(RemovalGuardTest, SpankOnAConfiglessNodeReadsAbsoluteIncludesOnTheNode) {
  write(dir_ / "cache/plugstack.conf", "required /x/spank_goldminer.so\n");
  EXPECT_EQ(guard("--spank", "etc/none.conf", true).status, 1);
  const fs::path link = dir_ / "etc/plugstack.conf.d/goldminer.conf";
  fs::create_symlink(example_, link);
  write(dir_ / "cache/plugstack.conf", "include " + (dir_ / "etc/plugstack.conf.d").string() + "/*\n");
  const auto r = guard("--spank", "etc/none.conf", true);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_FALSE(fs::is_symlink(link));
}

TEST_F(RemovalGuardTest, AnUnknownModeIsAUsageError) {
  const auto r = run_command("sh " GM_TOP_SRCDIR "/packaging/scripts/plugins-removal-guard.sh --both 2>&1");
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains_all(r.out, {"usage: plugins-removal-guard.sh --select | --spank EXAMPLE"}));
}

}  // namespace
