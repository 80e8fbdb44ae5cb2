// Tests of the trainer's container image for its workers
// (launch/container_image.h): pyxis's mounts parsed, the image checked for
// workers on other nodes, pyxis's options as the SPANK plugin sees them.
#include "launch/container_image.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace goldminer {
namespace {

std::vector<std::string> texts(const std::vector<ContainerMount>& mounts) {
  std::vector<std::string> out;
  for (const ContainerMount& m : mounts) out.push_back(m.text());
  return out;
}

TEST(ContainerImageTest, MountsTakePyxisFormsWithTheTargetDefaultingToTheSource) {
  auto m = parse_container_mounts("/data:/data:ro,/scratch/job:/work,/opt/tools,/a:/b:ro+rprivate,");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(texts(*m), (std::vector<std::string>{"/data:/data:ro", "/scratch/job:/work", "/opt/tools:/opt/tools",
                                                 "/a:/b:ro+rprivate"}));
  EXPECT_TRUE(parse_container_mounts("")->empty());
}

TEST(ContainerImageTest, ABadMountNamesItsEntry) {
  for (const auto& [list, error] : std::vector<std::pair<std::string, std::string>>{
           {"/a:/b,,/c", "mount 2 is empty: expected SRC[:DST[:FLAGS]]"},
           {"data:/data", "mount 1 'data:/data': expected SRC[:DST[:FLAGS]] with absolute paths"},
           {"/a:/b,/c:d", "mount 2 '/c:d': expected SRC[:DST[:FLAGS]] with absolute paths"},
           {"/a:/b:ro:x", "mount 1 '/a:/b:ro:x': expected SRC[:DST[:FLAGS]] with absolute paths"}}) {
    auto m = parse_container_mounts(list);
    ASSERT_FALSE(m.ok()) << list;
    EXPECT_EQ(m.status().message(), error);
  }
}

TEST(ContainerImageTest, WorkersTakeAnAbsoluteImageOrAnEnrootContainerName) {
  auto file = container_image_for_workers("", "/images/torch.sqsh", "/data:/data");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->runtime, "enroot");
  EXPECT_EQ(texts(file->mounts), (std::vector<std::string>{"/data:/data"}));
  auto name = container_image_for_workers("enroot", "pyxis_train.1", "");
  ASSERT_TRUE(name.ok()) << name.status().message();
  EXPECT_EQ(name->image, "pyxis_train.1");
  auto dir = container_image_for_workers("ch-run", "/var/tmp/images/torch", "");
  ASSERT_TRUE(dir.ok()) << dir.status().message();
  EXPECT_EQ(dir->runtime, "ch-run");
}

TEST(ContainerImageTest, WhatWorkersCannotRunIsRefusedSayingWhatToDo) {
  auto registry = container_image_for_workers("", "nvcr.io#nvidia/pytorch:24.01-py3", "");
  ASSERT_FALSE(registry.ok());
  EXPECT_EQ(registry.status().message(),
            "GOLDMINER_CONTAINER_IMAGE 'nvcr.io#nvidia/pytorch:24.01-py3': the data workers cannot pull a registry "
            "image: import it once (enroot import) into a squashfs file the workers' nodes see, and give its "
            "absolute path");
  auto relative = container_image_for_workers("", "./torch.sqsh", "");
  ASSERT_FALSE(relative.ok());
  EXPECT_EQ(relative.status().message(),
            "GOLDMINER_CONTAINER_IMAGE './torch.sqsh': the data workers run on other nodes and directories: give the "
            "image's absolute path (or the name of an enroot container there)");
  auto ch_name = container_image_for_workers("ch-run", "torch", "");
  ASSERT_FALSE(ch_name.ok());
  EXPECT_EQ(ch_name.status().message(),
            "GOLDMINER_CONTAINER_IMAGE 'torch': ch-run runs an image directory: give its absolute path");
  auto runtime = container_image_for_workers("docker", "/x.sqsh", "");
  ASSERT_FALSE(runtime.ok());
  EXPECT_EQ(runtime.status().message(),
            "GOLDMINER_CONTAINER_RUNTIME: invalid value 'docker': expected enroot or ch-run");
  auto mounts = container_image_for_workers("", "/x.sqsh", "/a:b");
  ASSERT_FALSE(mounts.ok());
  EXPECT_EQ(mounts.status().message(),
            "GOLDMINER_CONTAINER_MOUNTS: mount 1 '/a:b': expected SRC[:DST[:FLAGS]] with absolute paths");
}

// The step's own srun option first, then the batch script's sbatch
// option, then the user's pyxis default; the mounts from the same place.
TEST(ContainerImageTest, PyxisImageComesFromTheStepThenTheJobThenTheUsersDefault) {
  const std::vector<std::string> all = {
      "PYXIS_CONTAINER_IMAGE=/user.sqsh", "PYXIS_CONTAINER_MOUNTS=/u:/u",
      "SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_image=/job.sqsh",
      "SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_mounts=/j:/j",
      "_SLURM_SPANK_OPTION_pyxis_container_image=/step.sqsh"};
  PyxisContainer step = pyxis_container_of(all);
  EXPECT_EQ(step.image, "/step.sqsh");
  EXPECT_EQ(step.mounts, "");
  PyxisContainer job = pyxis_container_of({all.begin(), all.end() - 1});
  EXPECT_EQ(job.image, "/job.sqsh");
  EXPECT_EQ(job.mounts, "/j:/j");
  PyxisContainer user = pyxis_container_of({all[0], all[1]});
  EXPECT_EQ(user.image, "/user.sqsh");
  EXPECT_EQ(user.mounts, "/u:/u");
  EXPECT_TRUE(pyxis_container_of({"PATH=/usr/bin", "SLURM_JOB_ID=7"}).image.empty());
}

TEST(ContainerImageTest, ThePluginHandsTheImageOnUnlessTheUserNamedOne) {
  PyxisContainer seen{"/job.sqsh", "/data:/data"};
  using Vars = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(container_variables(seen, {"PATH=/usr/bin"}),
            (Vars{{"GOLDMINER_CONTAINER_IMAGE", "/job.sqsh"}, {"GOLDMINER_CONTAINER_MOUNTS", "/data:/data"}}));
  EXPECT_EQ(container_variables({"/job.sqsh", ""}, {}), (Vars{{"GOLDMINER_CONTAINER_IMAGE", "/job.sqsh"}}));
  EXPECT_TRUE(container_variables(seen, {"GOLDMINER_CONTAINER_IMAGE=/mine"}).empty());
  EXPECT_TRUE(container_variables({}, {"PATH=/usr/bin"}).empty());
}

}  // namespace
}  // namespace goldminer
