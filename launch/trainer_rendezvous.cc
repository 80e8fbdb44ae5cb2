#include "launch/trainer_rendezvous.h"

#include <sstream>
#include <vector>

#include "gmcore/host_port.h"

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

Status publish_trainer(const SlurmCommand& run, uint32_t job, const std::string& address) {
  auto comment = job_comment(run, job);
  if (!comment.ok()) return comment.status();
  auto with_token = comment_with_trainer(*comment, address);
  if (!with_token.ok()) return Status::error("job " + std::to_string(job) + ": " + with_token.status().message());
  return set_job_comment(run, job, *with_token);
}

std::string published_trainer(const SlurmCommand& run, uint32_t job) {
  auto comment = job_comment(run, job);
  return comment.ok() ? trainer_in_comment(*comment) : "";
}

}  // namespace goldminer
