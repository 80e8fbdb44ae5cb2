// SessionOptions from the job's environment (include/goldminer/session.h:
// from_environment, ranks_from_environment): what spank_goldminer.so,
// torchrun and srun set for the trainer, and the goldminer-ctld client an
// elastic session reports to.
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "ctld/client/ctld_client.h"
#include "dw_daemon/python_program.h"
#include "dw_daemon/python_program_header.h"
#include "gmcore/auth.h"
#include "gmcore/host_port.h"
#include "launch/container_image.h"
#include "launch/elastic_setup.h"
#include "launch/job_environment.h"
#include "launch/subprocess.h"
#include "tw_lib/session/session_impl.h"
#include "tw_lib/session/session_listen.h"

namespace goldminer {

namespace {

// Sends the session's reports to goldminer-ctld (ElasticSetup::ctld).
Status connect_ctld(ElasticSetup* e) {
  auto address = parse_host_port(e->ctld, "GOLDMINER_CTLD");
  if (!address.ok()) return address.status();
  uid_t ctld_uid = 0;
  if (!e->ctld_user.empty()) {
    std::vector<char> buf(16384);
    passwd pw{}, *found = nullptr;
    if (::getpwnam_r(e->ctld_user.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr)
      return Status::error("GOLDMINER_CTLD_USER: no user '" + e->ctld_user + "' on this node");
    ctld_uid = pw.pw_uid;
  }
  auto client = std::make_shared<CtldClient>(e->ctld, munge_credentials(e->munge_socket), ctld_uid);
  e->report = [client](const SessionReport& r) { return client->report(r); };
  return Status();
}

}  // namespace

Status SessionOptions::from_environment() {
  auto job = process_job_environment(kReadBySession);
  if (!job.ok()) return job.status();
  if (!job->listen.empty()) listen = rank0 = job->listen;
  rendezvous_from_environment(this, *job);
  auto a = auth::peer_auth_of(job->auth, job->auth_job, job->munge_socket, job->secret, job->secret_file);
  if (!a.ok()) return a.status();
  if (!a->secret.empty()) secret = a->secret;
  if (a->munge) munge = a->munge;
  if (job->local_workers) local_workers = *job->local_workers;
  Status ranks = ranks_from_environment();
  if (!ranks.ok()) return ranks;
  // The port the SPANK plugin reserved for this srun task, when the rank is
  // the task's (torchrun's processes of one task share its environment).
  const char* task = std::getenv("SLURM_PROCID");
  if (!job->rank_listen.empty() && std::getenv("RANK") == nullptr && task != nullptr && std::to_string(rank) == task)
    rank_listen = job->rank_listen;
  if (job->ucx_port != 0) listen_ucx_port = job->ucx_port;
  if (job->rank_ucx_port != 0) rank_listen_ucx_port = job->rank_ucx_port;
  if (job->dw_job != 0) companion_job = job->dw_job;
  if (!job->dw_error.empty()) companion_job_error = job->dw_error;
  if (!job->dw_program.empty()) dw_program = job->dw_program;
  // A trainer in a container image: its workers' Python processes enter it.
  if (!job->container_image.empty() && dw::is_python_program(program)) {
    auto image = container_image_for_workers(job->container_runtime, job->container_image, job->container_mounts);
    if (!image.ok()) return image.status();
    program = dw::with_container(program, *image);
  }
  auto e = elastic_from_environment(*job, process_environment());
  if (!e.ok()) return e.status();
  if (!e->launcher) return Status();
  if (!e->ctld.empty()) {
    Status st = connect_ctld(&*e);
    if (!st.ok()) return st;
  }
  elastic = std::move(e).value();
  return Status();
}

namespace {

// An unsigned decimal environment variable, or nothing when unset.
Expected<std::optional<uint32_t>> env_count(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::optional<uint32_t>();
  char* end = nullptr;
  errno = 0;
  const unsigned long n = std::strtoul(v, &end, 10);
  if (*end != '\0' || errno != 0 || n > UINT32_MAX || *v == '-')
    return Status::error(std::string(name) + ": invalid value '" + v + "': expected a count");
  return std::optional<uint32_t>(static_cast<uint32_t>(n));
}

}  // namespace

Status SessionOptions::ranks_from_environment() {
  // torchrun's first; then a task of srun (SLURM_STEP_NUM_TASKS is the
  // step's: a batch script has SLURM_NTASKS of the job but is one process),
  // but not in a heterogeneous job: a step over its components (`srun
  // TRAINER : -p cpu goldminer-dw`) numbers the tasks of all of them, the
  // trainer's and its workers' alike (Slurm 22.05: SLURM_STEP_NUM_TASKS is
  // their sum), so there only RANK/WORLD_SIZE or the options say.
  const bool het = std::getenv("SLURM_HET_SIZE") != nullptr;
  for (auto [r, w] : {std::pair{"RANK", "WORLD_SIZE"}, std::pair{"SLURM_PROCID", "SLURM_STEP_NUM_TASKS"}}) {
    if (het && std::string(r) == "SLURM_PROCID") break;
    auto rank_v = env_count(r);
    if (!rank_v.ok()) return rank_v.status();
    auto world_v = env_count(w);
    if (!world_v.ok()) return world_v.status();
    if (!*rank_v || !*world_v) continue;
    if (**world_v == 0 || **rank_v >= **world_v)
      return Status::error(std::string(r) + "=" + std::to_string(**rank_v) + " is not a rank of " + w + "=" +
                           std::to_string(**world_v));
    rank = **rank_v;
    world_size = **world_v;
    return Status();
  }
  return Status();
}

}  // namespace goldminer
