// Tests of a Python child started in the trainer's container image
// (dw_daemon/python_child_command.h), part of tests/dataplane_test: the
// command lines of enroot and ch-run; the program header's container
// lines written and read back; and a Dataset batch run through a stand-in
// for `enroot start` that keeps enroot's contract (its own mount
// namespace with the given mounts, only the named variables, no
// descriptor above 2), whose Dataset module exists only under a mount.
#include "dw_daemon/python_child_command.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dw_daemon/python_program.h"
#include "tests/test_util.h"

namespace goldminer::dw {
namespace {

PythonProgramHeader contained(const std::string& runtime, const std::string& image) {
  auto h = parse_python_program_header(std::string(kPythonProgramMagic) + "runtime=" + runtime + "\nimage=" + image +
                                           "\nmount=/scratch/job:/work:ro+rprivate\npython=/usr/bin/python3\n"
                                           "path=/work/lib\n\npayload",
                                       "");
  EXPECT_TRUE(h.ok()) << h.status().message();
  return h.ok() ? *h : PythonProgramHeader();
}

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

TEST(PythonChildCommandTest, EnrootStartsTheImagesPythonWithThePackageMountedAndTheJobsVariablesNamed) {
  auto c = child_command(contained("enroot", "/images/torch.sqsh"),
                         {"PATH=/usr/bin", "HOME=/home/u", "LD_PRELOAD=/x.so", "ENROOT_DATA_PATH=/d",
                          "PYTHONPATH=/host/site", "SLURM_JOB_ID=7", "MULTI=a\nb"},
                         "/usr/lib/python3/dist-packages");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->argv, (std::vector<std::string>{
                         "enroot", "start", "--mount", "/scratch/job:/work:none:x-create=auto,rbind,ro,rprivate",
                         "--mount",
                         "/usr/lib/python3/dist-packages/goldminer:/opt/goldminer/python/goldminer:none:x-create=dir,rbind,ro",
                         "--env", "SLURM_JOB_ID",
                         "--env", "PYTHONPATH", "/images/torch.sqsh", "/usr/bin/python3", "-u", "-m",
                         "goldminer._dw_child"}));
  // The host's PYTHONPATH stays out: the image's paths are the trainer's.
  EXPECT_TRUE(has(c->env, "PYTHONPATH=/opt/goldminer/python:/work/lib"));
  EXPECT_EQ(c->describe, "/usr/bin/python3 in enroot image /images/torch.sqsh");
}

TEST(PythonChildCommandTest, ChRunNeedsTheImagesMountPointAndKeepsTheEnvironment) {
  char dir[] = "/tmp/goldminer-chimage-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string image = dir;
  auto missing = child_command(contained("ch-run", image), {}, "/pkg");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "python dataset: ch-run image " + image +
                " has no directory /opt/goldminer/python/goldminer to bind goldminer-dw's package onto (ch-run binds "
                "only onto existing directories): mkdir -p " + image + "/opt/goldminer/python/goldminer");
  ASSERT_EQ(std::system(("mkdir -p " + image + "/opt/goldminer/python/goldminer").c_str()), 0);
  auto c = child_command(contained("ch-run", image), {"USER=u", "SLURM_JOB_ID=7"}, "/pkg");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->argv, (std::vector<std::string>{"ch-run", "-b", "/scratch/job:/work", "-b",
                                               "/pkg/goldminer:/opt/goldminer/python/goldminer", "--unset-env=LD_LIBRARY_PATH",
                                               "--unset-env=LD_PRELOAD", "--unset-env=PYTHONHOME", image, "--",
                                               "/usr/bin/python3", "-u", "-m", "goldminer._dw_child"}));
  EXPECT_TRUE(has(c->env, "SLURM_JOB_ID=7"));
  auto not_dir = child_command(contained("ch-run", image + "/nothing"), {}, "/pkg");
  ASSERT_FALSE(not_dir.ok());
  EXPECT_EQ(not_dir.status().message(), "python dataset: ch-run image " + image + "/nothing is not a directory on this node");
  std::system(("rm -rf " + image).c_str());
}

// The trainer's own workers run in its image already: no runtime.
TEST(PythonChildCommandTest, WithoutAPackageTheHeadersInterpreterRunsAsItIs) {
  auto c = child_command(contained("enroot", "/images/torch.sqsh"), {"PYTHONPATH=/host/site"}, "");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->argv, (std::vector<std::string>{"/usr/bin/python3", "-u", "-m", "goldminer._dw_child"}));
  EXPECT_TRUE(has(c->env, "PYTHONPATH=/work/lib:/host/site"));
}

TEST(PythonChildCommandTest, TheSessionsContainerLinesGoIntoTheHeaderOnce) {
  ContainerImage image;
  image.runtime = "ch-run";
  image.image = "/images/torch";
  image.mounts = {{"/data", "/data", "ro"}};
  const std::string program = std::string(kPythonProgramMagic) + "python=/usr/bin/python3\n\npayload\n\nmore";
  const std::string with = with_container(program, image);
  EXPECT_EQ(with, std::string(kPythonProgramMagic) +
                      "runtime=ch-run\nimage=/images/torch\nmount=/data:/data:ro\npython=/usr/bin/python3\n\npayload\n\nmore");
  EXPECT_EQ(with_container(with, ContainerImage{"enroot", "/other.sqsh", {}}), with);  // the program's own wins
  EXPECT_EQ(with_container("PK\x03\x04zip", image), "PK\x03\x04zip");
  auto h = parse_python_program_header(with, "");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->container.runtime, "ch-run");
  EXPECT_EQ(h->container.mounts.at(0).text(), "/data:/data:ro");
  EXPECT_EQ(h->payload, "payload\n\nmore");
  auto bare = parse_python_program_header(std::string(kPythonProgramMagic) + "image=/x.sqsh\npython=/p\n\nx", "");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->container.runtime, "enroot");
  for (const auto& [line, error] : std::vector<std::pair<std::string, std::string>>{
           {"runtime=docker\nimage=/x", "python dataset: header line 2: runtime 'docker': expected enroot or ch-run"},
           {"runtime=enroot", "python dataset: runtime=enroot without image="},
           {"image=/x\nmount=rel:/y",
            "python dataset: header line 3: mount 1 'rel:/y': expected SRC[:DST[:FLAGS]] with absolute paths"}}) {
    auto bad = parse_python_program_header(std::string(kPythonProgramMagic) + line + "\npython=/p\n\nx", "");
    ASSERT_FALSE(bad.ok()) << line;
    EXPECT_EQ(bad.status().message(), error);
  }
}

// `enroot start` as goldminer-dw uses it, kept to enroot 4.1.2's contract
// (runtime.sh, enroot-switchroot.c): its options (a mount is an fstab
// line with colons for blanks), its own user and mount
// namespaces (the host's /opt replaced, each mount bind-mounted and its
// target made), only the --env variables, every descriptor above 2
// closed; it logs what it was given to $FAKE_ENROOT_LOG.
void write_fake_enroot(const std::string& dir) {
  std::ofstream(dir + "/enroot") << R"(#!/usr/bin/python3
import json, os, sys
args = sys.argv[1:]
if args[:1] != ["start"]:
    sys.exit("fake enroot: only start")
mounts, names, i = [], [], 1
while args[i].startswith("--"):
    if args[i] == "--mount":
        mounts.append(args[i + 1].split(":"))
    elif args[i] == "--env":
        names.append(args[i + 1])
    else:
        sys.exit("fake enroot: unknown option " + args[i])
    i += 2
image, command = args[i], args[i + 1:]
with open(os.environ["FAKE_ENROOT_LOG"], "a") as log:
    log.write(json.dumps({"image": image, "mounts": mounts, "env": names}) + "\n")
env = {n: os.environ[n] for n in names if n in os.environ}
env["PATH"] = "/usr/bin:/bin"
script = "mount -t tmpfs none /opt"
for source, target, *_ in mounts:
    script += " && mkdir -p %s && mount --bind %s %s" % (target, source, target)
os.closerange(3, os.sysconf("SC_OPEN_MAX"))
os.execvpe("unshare", ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script + ' && exec "$@"', "sh"]
           + command, env)
)";
  ::chmod((dir + "/enroot").c_str(), 0755);
}

// Injected: the worker enters an "image" through the stand-in; the
// Dataset's module is only in a directory mounted at /opt/work (the
// stand-in's mounts go on the host's tree, under a tmpfs on /opt), the host's
// PYTHONPATH does not reach the child, and the trainer mounts a package of
// its own (one that fails to import) over /opt/goldminer/python. Checked:
// the batch is the module's (the worker's package, mounted last, is on top),
// and enroot was given the image, both mounts and the job's variables but
// not the host's PATH.
TEST(PythonChildCommandTest, ADatasetRunsThroughEnrootStartWithItsModuleOnlyInAMount) {
  if (access("/usr/bin/python3", X_OK) != 0 || access("/usr/bin/unshare", X_OK) != 0)
    GTEST_SKIP() << "no /usr/bin/python3 or unshare here";
  if (std::system("unshare --user --map-root-user --mount sh -c 'mount -t tmpfs none /opt' 2>/dev/null") != 0)
    GTEST_SKIP() << "user and mount namespaces are not available here (unshare -U -r -m)";
  auto package = find_python_package();
  if (!package.ok()) GTEST_SKIP() << package.status().message();
  if (testing::output_if_ok("/usr/bin/python3 -c 'import torch' 2>/dev/null && echo yes") != "yes\n")
    GTEST_SKIP() << "/usr/bin/python3 has no torch";
  char dir[] = "/tmp/goldminer-enroot-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string d = dir;
  write_fake_enroot(d);
  ::mkdir((d + "/work").c_str(), 0755);
  // The trainer's own package, mounted over /opt/goldminer/python: one
  // that cannot be imported, which the worker's must cover.
  ASSERT_EQ(std::system(("mkdir -p " + d + "/trainer/goldminer").c_str()), 0);
  std::ofstream(d + "/trainer/goldminer/__init__.py") << "raise ImportError('the trainer package hides the worker')\n";
  std::ofstream(d + "/work/image_only_dataset.py") << "import torch\n"
                                                     "class Tens(torch.utils.data.Dataset):\n"
                                                     "    def __len__(self): return 8\n"
                                                     "    def __getitem__(self, i): return torch.tensor(i * 10)\n";
  const std::string pickle = testing::output_if_ok(
      "cd " + d + "/work && /usr/bin/python3 -c 'import pickle, sys, image_only_dataset as m; "
      "sys.stdout.buffer.write(pickle.dumps({\"dataset\": m.Tens(), \"sampler\": None, \"shuffle\": False, "
      "\"seed\": 0, \"length\": 8, \"collate_fn\": None}))'");
  ASSERT_FALSE(pickle.empty());
  const char* old_path = std::getenv("PATH");
  const std::string saved_path = old_path != nullptr ? old_path : "/usr/bin:/bin";
  ::setenv("PATH", (d + ":" + saved_path).c_str(), 1);
  ::setenv("FAKE_ENROOT_LOG", (d + "/enroot.log").c_str(), 1);
  ::setenv("GOLDMINER_TEST_JOB_VARIABLE", "1", 1);
  auto program = load_python_program(std::string(kPythonProgramMagic) + "runtime=enroot\nimage=/images/test.sqsh\n" +
                                         "mount=" + d + "/work:/opt/work\nmount=" + d + "/trainer:/opt/goldminer/python\n" +
                                         "python=/usr/bin/python3\npath=/opt/work\n\n" + pickle,
                                     1, "", true);
  ::setenv("PATH", saved_path.c_str(), 1);
  ASSERT_TRUE(program.ok()) << program.status().message();
  readers::Batch positions;
  positions.records = {2, 3, 5};
  auto batch = (*program)->run(positions, 1, 0);
  ASSERT_TRUE(batch.ok()) << batch.status().message();
  ASSERT_EQ((*batch)->tensors().size(), 2u);  // the batch's structure, then the collated items
  const auto* v = reinterpret_cast<const int64_t*>((*batch)->tensors()[1].data);
  EXPECT_EQ(std::vector<int64_t>(v, v + 3), (std::vector<int64_t>{20, 30, 50}));
  batch = Expected<std::unique_ptr<ProgramOutput>>(Status::error("released"));
  program = Expected<std::unique_ptr<WorkerProgram>>(Status::error("released"));
  std::ifstream in(d + "/enroot.log");
  std::string first;
  std::getline(in, first);
  EXPECT_NE(first.find("\"image\": \"/images/test.sqsh\""), std::string::npos) << first;
  EXPECT_NE(first.find("[\"" + *package + "/goldminer\", \"/opt/goldminer/python/goldminer\", \"none\", "
                       "\"x-create=dir,rbind,ro\"]"),
            std::string::npos)
      << first;
  EXPECT_NE(first.find("[\"" + d + "/work\", \"/opt/work\", \"none\", \"x-create=auto,rbind\"]"), std::string::npos)
      << first;
  EXPECT_NE(first.find("\"GOLDMINER_TEST_JOB_VARIABLE\""), std::string::npos) << first;
  EXPECT_EQ(first.find("\"PATH\""), std::string::npos) << first;
  ::unsetenv("GOLDMINER_TEST_JOB_VARIABLE");
  ::unsetenv("FAKE_ENROOT_LOG");
  std::system(("rm -rf " + d).c_str());
}

}  // namespace
}  // namespace goldminer::dw
