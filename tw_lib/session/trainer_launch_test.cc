// Tests of the trainer's setup sequence (tw_lib/session/trainer_launch.h)
// without Slurm: the checks and their texts as each front door names its
// arguments, where the session listens, the secret, who starts the
// workers, a trainer over local threads and over goldminer-dw processes
// on UCX loopback (stopped with it), and a command's launch.
#include "tw_lib/session/trainer_launch.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dw_daemon/python_program.h"
#include "tw_lib/session/dataplane_test_util.h"

namespace goldminer {
namespace {

using testing::TempDir;

// The variables the launch reads, unset for a test and put back after it;
// set() sets one for the test.
class LaunchEnvironment {
 public:
  LaunchEnvironment() {
    for (const char* name : {"RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_HET_SIZE",
                             "GOLDMINER_LISTEN", "GOLDMINER_SECRET", "GOLDMINER_SECRET_FILE", "GOLDMINER_AUTH",
                             "GOLDMINER_LOCAL_WORKERS", "GOLDMINER_DW_PROGRAM", "GOLDMINER_RANK_LISTEN",
                             "GOLDMINER_CONTAINER_IMAGE", "GOLDMINER_CONTAINER_RUNTIME", "GOLDMINER_CONTAINER_MOUNTS"})
      set(name, std::nullopt);
  }
  ~LaunchEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  void set(const std::string& name, const std::optional<std::string>& value) {
    if (saved_.count(name) == 0) {
      const char* v = std::getenv(name.c_str());
      saved_[name] = v != nullptr ? std::optional<std::string>(v) : std::nullopt;
    }
    if (value) {
      setenv(name.c_str(), value->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

TrainerRequest text_request(const TempDir& d, int records, const std::string& transport, uint32_t workers) {
  testing::write_text(d / "t.txt", records);
  TrainerRequest r;
  r.transport = transport;
  r.workers = workers;
  r.session.input = "text:" + (d / "t.txt");
  r.session.batch_size = 64;
  return r;
}

// The error prepare_trainer gives `r`, "" when it gives none.
std::string error_of(TrainerRequest r, LaunchError::Kind* kind = nullptr) {
  auto setup = prepare_trainer(std::move(r));
  if (setup.ok()) return "";
  if (kind != nullptr) *kind = setup.error().kind;
  return setup.error().message;
}

// The records of one epoch, each once.
uint64_t unique_records_of_one_epoch(Session& s) {
  std::vector<std::pair<int64_t, int64_t>> ids;
  for (const SessionBatch& b : s.epoch())
    for (uint32_t i = 0; i < b.samples; ++i) ids.emplace_back(b.sample_ids[2 * i], b.sample_ids[2 * i + 1]);
  EXPECT_TRUE(s.status().ok()) << s.status().message();
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end()) << "a record came twice";
  return ids.size();
}

TEST(TrainerLaunchTest, RanksAreCheckedAndNamedAsEachFrontDoorNamesThem) {
  LaunchEnvironment env;
  TempDir d;
  TrainerRequest r = text_request(d, 10, "local", 0);
  LaunchError::Kind kind = LaunchError::Kind::kFailed;
  r.world_size = 0;
  EXPECT_EQ(error_of(r, &kind), "world_size must be 1..65536");
  EXPECT_EQ(kind, LaunchError::Kind::kBadArgument);
  r.names = ArgumentNames::kOptions;
  EXPECT_EQ(error_of(r), "--world-size: must be 1..65536");
  r.world_size = 65537;
  EXPECT_EQ(error_of(r), "--world-size: must be 1..65536");
  r.world_size = 2;
  r.rank = 2;
  EXPECT_EQ(error_of(r), "--rank: 2 is not a rank of world size 2 (ranks are 0..1)");
  r.rank = -1;
  EXPECT_EQ(error_of(r), "--rank: -1 is not a rank of world size 2 (ranks are 0..1)");
  r.names = ArgumentNames::kKeywords;
  r.world_size = 3;
  r.rank = 3;
  EXPECT_EQ(error_of(r), "rank 3 is not a rank of world_size 3");
  // The environment's world size, the rank asked for.
  env.set("RANK", "0");
  env.set("WORLD_SIZE", "4");
  r.world_size.reset();
  r.rank = 3;
  auto setup = prepare_trainer(r);
  ASSERT_TRUE(setup.ok()) << setup.error().message;
  EXPECT_EQ(setup->session.rank, 3u);
  EXPECT_EQ(setup->session.world_size, 4u);
  // A world size alone: rank 0 of it.
  r.rank.reset();
  r.world_size = 2;
  env.set("RANK", "1");
  setup = prepare_trainer(r);
  ASSERT_TRUE(setup.ok()) << setup.error().message;
  EXPECT_EQ(setup->session.rank, 0u);
  EXPECT_EQ(setup->session.world_size, 2u);
  // A bad environment is the environment's fault.
  env.set("RANK", "5");
  r.world_size.reset();
  EXPECT_EQ(error_of(r, &kind), "RANK=5 is not a rank of WORLD_SIZE=4");
  EXPECT_EQ(kind, LaunchError::Kind::kBadEnvironment);
}

// The port the plugin reserved for the task's own rank is dropped when
// the rank asked for is another.
TEST(TrainerLaunchTest, AnotherRankThanTheTasksLeavesItsReservedPort) {
  LaunchEnvironment env;
  TempDir d;
  env.set("SLURM_PROCID", "1");
  env.set("SLURM_STEP_NUM_TASKS", "3");
  env.set("GOLDMINER_RANK_LISTEN", "ucx://127.0.0.1:7000");
  TrainerRequest r = text_request(d, 10, "ucx", 0);
  auto own = prepare_trainer(r);
  ASSERT_TRUE(own.ok()) << own.error().message;
  EXPECT_EQ(own->session.rank_listen, "ucx://127.0.0.1:7000");
  r.rank = 2;
  auto other = prepare_trainer(r);
  ASSERT_TRUE(other.ok()) << other.error().message;
  EXPECT_EQ(other->session.rank, 2u);
  EXPECT_EQ(other->session.rank_listen, "");
}

TEST(TrainerLaunchTest, TransportThreadsAndListenFormAreChecked) {
  LaunchEnvironment env;
  TempDir d;
  TrainerRequest r = text_request(d, 10, "tcp", 0);
  r.transports = {"ucx", "local"};
  LaunchError::Kind kind = LaunchError::Kind::kFailed;
  EXPECT_EQ(error_of(r, &kind), "transport: invalid value 'tcp': expected ucx or local");
  EXPECT_EQ(kind, LaunchError::Kind::kBadArgument);
  r.names = ArgumentNames::kOptions;
  r.transports = {"ucx", "mpi", "local"};
  EXPECT_EQ(error_of(r), "--transport: invalid value 'tcp': expected ucx, mpi or local");
  r.transport = "ucx";
  r.threads = 0;
  EXPECT_EQ(error_of(r), "--threads must be at least 1");
  r.threads = 1;
  r.listen = "tcp://127.0.0.1:1";
  EXPECT_EQ(error_of(r),
            "--listen: invalid value 'tcp://127.0.0.1:1': expected ucx://HOST:PORT, HOST:PORT, local://NAME or mpi://");
  r.listen = "127.0.0.1:0";
  auto setup = prepare_trainer(r);
  ASSERT_TRUE(setup.ok()) << setup.error().message;
  EXPECT_EQ(setup->session.listen, "ucx://127.0.0.1:0");
  EXPECT_TRUE(setup->expects_external_workers);
  // goldminer-dw processes reach the session only over ucx.
  r.names = ArgumentNames::kKeywords;
  r.listen = "local://elsewhere";
  r.workers = 2;
  EXPECT_EQ(error_of(r), "workers=2 with transport 'ucx' needs a ucx:// address to listen on, not "
                         "'local://elsewhere'");
}

TEST(TrainerLaunchTest, ListensWhereTheCallerOrTheEnvironmentSaysElseAtTheTransportsDefault) {
  LaunchEnvironment env;
  TempDir d;
  auto listen_of = [&](const TrainerRequest& r) {
    auto setup = prepare_trainer(r);
    EXPECT_TRUE(setup.ok()) << setup.error().message;
    return setup.ok() ? setup->session.listen + (setup->expects_external_workers ? " external" : "") : "";
  };
  TrainerRequest r = text_request(d, 10, "ucx", 0);
  EXPECT_EQ(listen_of(r), "ucx://127.0.0.1:0");
  r.transport = "local";
  EXPECT_EQ(listen_of(r).rfind("local://goldminer-", 0), 0u) << listen_of(r);
  EXPECT_NE(listen_of(r), listen_of(r)) << "each local session its own name";
  r.transport = "mpi";
  EXPECT_EQ(listen_of(r), "mpi://");
  env.set("GOLDMINER_LISTEN", "ucx://127.0.0.1:5555");
  r.transport = "ucx";
  EXPECT_EQ(listen_of(r), "ucx://127.0.0.1:5555 external");
  r.listen = "ucx://127.0.0.1:6666";
  EXPECT_EQ(listen_of(r), "ucx://127.0.0.1:6666 external");
  // Ranks sharing rank 0's workers: the session picks (Session::create).
  r.listen.reset();
  r.world_size = 2;
  r.rank = 1;
  EXPECT_EQ(listen_of(r), " external");
  env.set("GOLDMINER_LISTEN", std::nullopt);
  r.rank0 = "127.0.0.1:5555";
  auto setup = prepare_trainer(r);
  ASSERT_TRUE(setup.ok()) << setup.error().message;
  EXPECT_EQ(setup->session.rank0, "ucx://127.0.0.1:5555");
  EXPECT_EQ(setup->session.listen, "");
  EXPECT_FALSE(setup->expects_external_workers);
}

TEST(TrainerLaunchTest, TheSecretIsTheGivenOneTheEnvironmentsOrAFreshOne) {
  LaunchEnvironment env;
  TempDir d;
  TrainerRequest r = text_request(d, 10, "local", 0);
  auto fresh = prepare_trainer(r);
  ASSERT_TRUE(fresh.ok()) << fresh.error().message;
  EXPECT_GE(fresh->session.secret.size(), 16u);
  env.set("GOLDMINER_SECRET", "from-the-environment");
  auto from_env = prepare_trainer(r);
  ASSERT_TRUE(from_env.ok()) << from_env.error().message;
  EXPECT_EQ(from_env->session.secret, "from-the-environment");
  r.secret = "given";
  auto given = prepare_trainer(r);
  ASSERT_TRUE(given.ok()) << given.error().message;
  EXPECT_EQ(given->session.secret, "given");
}

// A trainer in a container image (GOLDMINER_CONTAINER_*, as the SPANK
// plugin sets them from pyxis's options): its Python program tells the
// workers to enter the image; a TorchScript zip for goldminer-dw's own
// libtorch is left as it is; an image workers cannot use is refused.
TEST(TrainerLaunchTest, AContainerisedTrainersPythonProgramNamesItsImage) {
  LaunchEnvironment env;
  TempDir d;
  TrainerRequest r = text_request(d, 10, "local", 0);
  r.session.program = std::string(dw::kPythonProgramMagic) + "python=/usr/bin/python3\n\npickle";
  env.set("GOLDMINER_CONTAINER_IMAGE", "/images/torch.sqsh");
  env.set("GOLDMINER_CONTAINER_MOUNTS", "/scratch:/work");
  auto setup = prepare_trainer(r);
  ASSERT_TRUE(setup.ok()) << setup.error().message;
  EXPECT_EQ(setup->session.program, std::string(dw::kPythonProgramMagic) +
                                        "runtime=enroot\nimage=/images/torch.sqsh\nmount=/scratch:/work\n"
                                        "python=/usr/bin/python3\n\npickle");
  r.session.program = "PK\x03\x04 a TorchScript zip";
  setup = prepare_trainer(r);
  ASSERT_TRUE(setup.ok()) << setup.error().message;
  EXPECT_EQ(setup->session.program, "PK\x03\x04 a TorchScript zip");
  r.session.program = std::string(dw::kPythonProgramMagic) + "python=/usr/bin/python3\n\npickle";
  env.set("GOLDMINER_CONTAINER_IMAGE", "docker://pytorch/pytorch");
  EXPECT_EQ(error_of(r), "GOLDMINER_CONTAINER_IMAGE 'docker://pytorch/pytorch': the data workers cannot pull a "
                         "registry image: import it once (enroot import) into a squashfs file the workers' nodes see, "
                         "and give its absolute path");
  env.set("GOLDMINER_CONTAINER_IMAGE", "/images/torch.sqsh");
  env.set("GOLDMINER_CONTAINER_RUNTIME", "podman");
  EXPECT_EQ(error_of(r), "GOLDMINER_CONTAINER_RUNTIME: invalid value 'podman': expected one of enroot, ch-run");
}

TEST(TrainerLaunchTest, PlansWhoStartsTheWorkers) {
  LaunchEnvironment env;
  TempDir d;
  TrainerRequest r = text_request(d, 10, "local", 2);
  r.threads = 3;
  auto threads = prepare_trainer(r);
  ASSERT_TRUE(threads.ok()) << threads.error().message;
  EXPECT_EQ(threads->start.start, WorkerStart::kLocalThreads);
  EXPECT_EQ(threads->session.local_workers, 2u);
  EXPECT_EQ(threads->session.local_worker_threads, 3u);
  // GOLDMINER_LOCAL_WORKERS (goldminer-run --transport local) when the
  // request starts none, unless the front door's --workers alone count.
  env.set("GOLDMINER_LOCAL_WORKERS", "4");
  r.workers = 0;
  auto from_env = prepare_trainer(r);
  ASSERT_TRUE(from_env.ok()) << from_env.error().message;
  EXPECT_EQ(from_env->session.local_workers, 4u);
  r.local_workers_from_environment = false;
  auto own = prepare_trainer(r);
  ASSERT_TRUE(own.ok()) << own.error().message;
  EXPECT_EQ(own->session.local_workers, 0u);
  // goldminer-dw processes: the one the environment names, found.
  TrainerRequest p = text_request(d, 10, "ucx", 2);
  p.dw_program = testing::builddir() + "/goldminer-dw";
  auto processes = prepare_trainer(p);
  ASSERT_TRUE(processes.ok()) << processes.error().message;
  EXPECT_EQ(processes->start.start, WorkerStart::kLocalProcesses);
  EXPECT_EQ(processes->worker.dw_path, p.dw_program);
  EXPECT_EQ(processes->worker.secret, processes->session.secret);
  env.set("GOLDMINER_DW_PROGRAM", d / "no-such-goldminer-dw");
  LaunchError::Kind kind = LaunchError::Kind::kBadArgument;
  EXPECT_EQ(error_of(p, &kind), "cannot find the data worker '" + (d / "no-such-goldminer-dw") +
                                    "' (set GOLDMINER_DW_PROGRAM to the goldminer-dw to run)");
  EXPECT_EQ(kind, LaunchError::Kind::kFailed);
  // Not looked for first: each worker that cannot start exits.
  p.find_data_worker = false;
  auto unchecked = prepare_trainer(p);
  ASSERT_TRUE(unchecked.ok()) << unchecked.error().message;
  EXPECT_EQ(unchecked->worker.dw_path, d / "no-such-goldminer-dw");
}

TEST(TrainerLaunchTest, ATrainerWithLocalThreadsDeliversAnEpoch) {
  LaunchEnvironment env;
  TempDir d;
  auto trainer = launch_trainer(text_request(d, 500, "local", 2));
  ASSERT_TRUE(trainer.ok()) << trainer.error().message;
  EXPECT_EQ((*trainer)->local_workers(), 2u);
  EXPECT_TRUE((*trainer)->workers().started().empty());
  EXPECT_EQ(unique_records_of_one_epoch((*trainer)->session()), 500u);
  (*trainer)->close();
  EXPECT_TRUE((*trainer)->closed());
  (*trainer)->close();  // idempotent
}

// goldminer-dw processes over UCX on loopback: started for the session's
// address, gone once the trainer is closed.
TEST(TrainerLaunchTest, ATrainerStartsAndStopsItsWorkerProcesses) {
  LaunchEnvironment env;
  env.set("UCX_NET_DEVICES", "lo");
  TempDir d;
  TrainerRequest r = text_request(d, 2000, "ucx", 2);
  r.dw_program = testing::builddir() + "/goldminer-dw";
  auto trainer = launch_trainer(r);
  ASSERT_TRUE(trainer.ok()) << trainer.error().message;
  const std::vector<pid_t> pids = (*trainer)->workers().started();
  ASSERT_EQ(pids.size(), 2u);
  EXPECT_FALSE((*trainer)->expects_external_workers());
  EXPECT_EQ(unique_records_of_one_epoch((*trainer)->session()), 2000u);
  trainer->reset();
  for (pid_t p : pids) EXPECT_TRUE(kill(p, 0) != 0 && errno == ESRCH) << "worker " << p << " left running";
}

TEST(TrainerLaunchTest, ACommandGetsItsAddressSecretAndEnvironment) {
  LaunchEnvironment env;
  env.set("UCX_NET_DEVICES", std::nullopt);
  TrainerRequest r;
  r.names = ArgumentNames::kOptions;
  r.workers = 2;
  r.threads = 3;
  r.dw_program = testing::builddir() + "/goldminer-dw";
  auto ucx = prepare_command(r);
  ASSERT_TRUE(ucx.ok()) << ucx.error().message;
  EXPECT_EQ(ucx->address.rfind("ucx://127.0.0.1:", 0), 0u) << ucx->address;
  EXPECT_NE(ucx->address, "ucx://127.0.0.1:0");
  const std::map<std::string, std::string> set(ucx->set.begin(), ucx->set.end());
  EXPECT_EQ(set.at("GOLDMINER_LISTEN"), ucx->address);
  EXPECT_EQ(set.at("GOLDMINER_SECRET"), ucx->secret);
  EXPECT_EQ(set.at("GOLDMINER_LOCAL_WORKERS"), "0");
  EXPECT_EQ(set.at("UCX_NET_DEVICES"), "lo");
  EXPECT_EQ(ucx->unset, std::vector<std::string>{"GOLDMINER_SECRET_FILE"});
  EXPECT_EQ(ucx->start.start, WorkerStart::kLocalProcesses);
  EXPECT_EQ(ucx->worker.trainer, ucx->address);
  EXPECT_EQ(ucx->worker.threads, 3u);
  r.transport = "local";
  auto local = prepare_command(r);
  ASSERT_TRUE(local.ok()) << local.error().message;
  EXPECT_EQ(local->address, "local://run");
  const std::map<std::string, std::string> local_set(local->set.begin(), local->set.end());
  EXPECT_EQ(local_set.at("GOLDMINER_LOCAL_WORKERS"), "2");
  EXPECT_EQ(local->start.start, WorkerStart::kLocalThreads);
  WorkerProcesses none;
  EXPECT_TRUE(local->start_workers(&none).ok());
  EXPECT_TRUE(none.started().empty());
  // mpi: mpirun starts the workers, as ranks 1..N.
  r.transport = "mpi";
  r.workers = 0;
  auto refused = prepare_command(r);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "--transport mpi starts its workers itself: --workers must be at least 1");
  r.workers = 2;
  auto mpi = prepare_command(r);
  ASSERT_TRUE(mpi.ok()) << mpi.error().message;
  const std::vector<std::string> args = mpirun_command(*mpi, {"goldminer-consume", "--input", "text:x"}, 2, 3);
  const std::vector<std::string> tail = {"--input", "text:x", ":", "-np", "2", r.dw_program, "--trainer",
                                         "mpi://", "--threads", "3"};
  ASSERT_GT(args.size(), tail.size());
  EXPECT_EQ(args[0], "mpirun");
  EXPECT_EQ(std::vector<std::string>(args.end() - static_cast<long>(tail.size()), args.end()), tail);
}

TEST(TrainerLaunchTest, WorkerProcessesThatCannotStartLeaveNoneBehind) {
  WorkerProcesses workers;
  WorkerProcessOptions o;
  o.dw_path = "no-such-goldminer-dw-on-path";  // not found: the first spawn fails
  o.trainer = "ucx://127.0.0.1:1";
  Status s = workers.start(o, 2);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(workers.started().empty());
  EXPECT_TRUE(workers.running().empty());
}

}  // namespace
}  // namespace goldminer
