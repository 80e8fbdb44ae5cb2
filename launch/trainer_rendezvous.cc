#include "launch/trainer_rendezvous.h"

#include <sstream>
#include <vector>

#include "gmcore/host_port.h"
#include "launch/subprocess.h"

namespace goldminer {

const char kTrainerToken[] = "goldminer-trainer=";

namespace {

// slurmctld refuses a Comment longer than this (job_mgr.c _test_strlen).
constexpr size_t kMaxComment = 1024;

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

bool is_token(const std::string& word) { return word.rfind(kTrainerToken, 0) == 0; }

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

Expected<std::string> comment_with_trainer(const std::string& comment, const std::string& address) {
  if (trainer_in_comment(kTrainerToken + address) != address)
    return Status::error("trainer address '" + address + "': expected ucx://HOST:PORT of at most " +
                         std::to_string(kMaxPublishedAddress) + " printable characters");
  // The user's words, in their order, one space apart;
  // only goldminer's token is replaced.
  std::string kept;
  if (comment != "(null)")
    for (const std::string& w : words(comment))
      if (!is_token(w)) kept += (kept.empty() ? "" : " ") + w;
  std::string out = kept + (kept.empty() ? "" : " ") + kTrainerToken + address;
  if (out.size() > kMaxComment)
    return Status::error("the job's Comment would have " + std::to_string(out.size()) + " bytes with the trainer's address (" +
                         "Slurm takes at most " + std::to_string(kMaxComment) + ")");
  return out;
}

std::string trainer_in_comment(const std::string& comment) {
  std::string found;
  for (const std::string& w : words(comment))
    if (is_token(w)) found = w.substr(sizeof kTrainerToken - 1);  // the last one, as written last
  if (found.empty() || found.size() > kMaxPublishedAddress || found.rfind("ucx://", 0) != 0) return "";
  for (char c : found)
    if (c <= ' ' || c > '~') return "";
  auto hp = parse_host_port(found.substr(6), "trainer address");
  if (!hp.ok() || hp->host.empty() || hp->port == "0") return "";
  return found;
}

// squeue's answer with job `job`'s Comment (%k).
static Expected<CommandResult> read_comment(const SlurmCommand& run, uint32_t job) {
  return run("squeue", {"--noheader", "--states=all", "--jobs=" + std::to_string(job), "--format=%k"});
}

Status publish_trainer(const SlurmCommand& run, uint32_t job, const std::string& address) {
  const std::string id = std::to_string(job);
  auto read = read_comment(run, job);
  if (!read.ok()) return Status::error("squeue (reading job " + id + "'s Comment): " + read.status().message());
  if (read->exit_code != 0 || read->timed_out)
    return Status::error("squeue (reading job " + id + "'s Comment): " + describe(*read));
  auto comment = comment_with_trainer(trim(read->output), address);
  if (!comment.ok()) return Status::error("job " + id + ": " + comment.status().message());
  auto wrote = run("scontrol", {"update", "JobId=" + id, "Comment=" + *comment});
  if (!wrote.ok()) return Status::error("scontrol update JobId=" + id + ": " + wrote.status().message());
  if (wrote->exit_code != 0 || wrote->timed_out)
    return Status::error("scontrol update JobId=" + id + " Comment=...: " + describe(*wrote));
  return Status();
}

std::string published_trainer(const SlurmCommand& run, uint32_t job) {
  auto read = read_comment(run, job);
  if (!read.ok() || read->exit_code != 0 || read->timed_out) return "";
  return trainer_in_comment(trim(read->output));
}

}  // namespace goldminer
