#include "launch/trainer_rendezvous.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace goldminer {
namespace {

// A SlurmCommand that records each call and answers from `comment`
// (squeue) and `update_exit` (scontrol).
struct FakeSlurm {
  std::string comment = "(null)";
  int squeue_exit = 0;
  int update_exit = 0;
  std::vector<std::vector<std::string>> calls;

  SlurmCommand command() {
    return [this](const std::string& name, const std::vector<std::string>& args) -> Expected<CommandResult> {
      std::vector<std::string> call{name};
      call.insert(call.end(), args.begin(), args.end());
      calls.push_back(call);
      CommandResult r;
      if (name == "squeue") {
        r.exit_code = squeue_exit;
        r.output = squeue_exit == 0 ? comment + "\n" : "slurm_load_jobs error: Unable to contact slurm controller\n";
      } else {
        r.exit_code = update_exit;
        r.output = update_exit == 0 ? "" : "slurm_update error: Access/permission denied\n";
        const std::string prefix = "Comment=";
        if (update_exit == 0 && args.size() == 3 && args[2].rfind(prefix, 0) == 0) comment = args[2].substr(prefix.size());
      }
      return r;
    };
  }
};

TEST(TrainerRendezvousTest, TheTokenIsAddedBesideTheUsersCommentAndReplacedNotRepeated) {
  EXPECT_EQ(*comment_with_trainer("(null)", "ucx://10.0.0.1:41000"), "goldminer-trainer=ucx://10.0.0.1:41000");
  EXPECT_EQ(*comment_with_trainer("", "ucx://10.0.0.1:41000"), "goldminer-trainer=ucx://10.0.0.1:41000");
  auto once = comment_with_trainer("run 7 of the sweep", "ucx://10.0.0.1:41000");
  EXPECT_EQ(*once, "run 7 of the sweep goldminer-trainer=ucx://10.0.0.1:41000");
  auto twice = comment_with_trainer(*once, "ucx://[fd00::2]:42000");
  EXPECT_EQ(*twice, "run 7 of the sweep goldminer-trainer=ucx://[fd00::2]:42000");
  EXPECT_EQ(trainer_in_comment(*twice), "ucx://[fd00::2]:42000");
}

TEST(TrainerRendezvousTest, OnlyAUcxHostAndPortIsEverReadFromAComment) {
  EXPECT_EQ(trainer_in_comment("(null)"), "");
  EXPECT_EQ(trainer_in_comment("nothing of ours"), "");
  EXPECT_EQ(trainer_in_comment("goldminer-trainer=ucx://node7:40001"), "ucx://node7:40001");
  for (const char* bad : {"goldminer-trainer=", "goldminer-trainer=mpi://", "goldminer-trainer=local://x",
                          "goldminer-trainer=ucx://node7", "goldminer-trainer=ucx://node7:0",
                          "goldminer-trainer=ucx://node7:99999", "goldminer-trainer=ucx://:40001",
                          "goldminer-trainer=ucx://node7:40001\x1b[2J"})
    EXPECT_EQ(trainer_in_comment(bad), "") << bad;
  const std::string longest(kMaxPublishedAddress - 6 - 6, 'a');
  EXPECT_EQ(trainer_in_comment("goldminer-trainer=ucx://" + longest + ":40001"), "ucx://" + longest + ":40001");
  EXPECT_EQ(trainer_in_comment("goldminer-trainer=ucx://a" + longest + ":40001"), "") << "one byte over the bound";
  auto refused = comment_with_trainer("x", "ucx://node7:0");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("trainer address 'ucx://node7:0'"), std::string::npos)
      << refused.status().message();
}

TEST(TrainerRendezvousTest, ACommentSlurmWouldRefuseIsAnErrorNotATruncation) {
  auto r = comment_with_trainer(std::string(1000, 'c'), "ucx://10.0.0.1:41000");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Slurm takes at most 1024"), std::string::npos) << r.status().message();
}

TEST(TrainerRendezvousTest, PublishingReadsTheCommentAndWritesItBackWithTheToken) {
  FakeSlurm slurm;
  slurm.comment = "my sweep";
  ASSERT_TRUE(publish_trainer(slurm.command(), 42, "ucx://10.0.0.1:41000").ok());
  ASSERT_EQ(slurm.calls.size(), 2u);
  EXPECT_EQ(slurm.calls[0],
            (std::vector<std::string>{"squeue", "--noheader", "--states=all", "--jobs=42", "--format=%k"}));
  EXPECT_EQ(slurm.calls[1], (std::vector<std::string>{"scontrol", "update", "JobId=42",
                                                      "Comment=my sweep goldminer-trainer=ucx://10.0.0.1:41000"}));
  EXPECT_EQ(published_trainer(slurm.command(), 42), "ucx://10.0.0.1:41000");
}

TEST(TrainerRendezvousTest, AFailingSqueueOrScontrolIsNamedAndReadsAsNothingPublished) {
  FakeSlurm down;
  down.squeue_exit = 1;
  Status s = publish_trainer(down.command(), 42, "ucx://10.0.0.1:41000");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("squeue (reading job 42's Comment): exit 1"), std::string::npos) << s.message();
  EXPECT_EQ(down.calls.size(), 1u) << "nothing written over a Comment it could not read";
  EXPECT_EQ(published_trainer(down.command(), 42), "");
  FakeSlurm denied;
  denied.update_exit = 1;
  s = publish_trainer(denied.command(), 42, "ucx://10.0.0.1:41000");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("scontrol update JobId=42 Comment=...: exit 1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("Access/permission denied"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace goldminer
