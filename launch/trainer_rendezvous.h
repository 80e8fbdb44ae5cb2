// Where a --goldminer job's trainer listens when the port its node's
// registry reserved (launch/port_registry.h) was taken before the trainer
// bound it: the trainer listens on another port and writes its address
// into its own job's Comment, as a token beside whatever the user wrote
// there:
//
//   Comment=... goldminer-trainer=ucx://ADDR:PORT ...
//
// Only the job's owner, Slurm operators and administrators may change a
// job's Comment (slurmctld's job update), so the token says where the
// job's own user put it; the workers and the other ranks still make the
// trainer prove the job (gmcore/peer_auth.h) before they take anything
// from it. A worker or rank that finds its trainer's address held by a
// process that does not prove the job reads the token (squeue -o %k)
// and goes there. Slurm-free: the Comment is read and written by
// launch/slurm_cli.h's job_comment and set_job_comment.
#ifndef GOLDMINER_LAUNCH_TRAINER_RENDEZVOUS_H_
#define GOLDMINER_LAUNCH_TRAINER_RENDEZVOUS_H_

#include <cstdint>
#include <string>

#include "launch/slurm_cli.h"
#include "gmcore/status.h"

namespace goldminer {

// The token's name, "goldminer-trainer=".
extern const char kTrainerToken[];

// The longest address the token carries: what a Comment (1,024 bytes at
// most in slurmctld) leaves beside the user's text.
constexpr size_t kMaxPublishedAddress = 160;

// `comment` with its token (if any) replaced by one naming `address`,
// the user's text kept; "(null)" (squeue's empty Comment) counts as none.
// An error when the result would exceed Slurm's 1,024 bytes.
Expected<std::string> comment_with_trainer(const std::string& comment, const std::string& address);

// The address in `comment`'s token, or "" when it has none, or one that
// is not ucx://HOST:PORT of at most kMaxPublishedAddress printable bytes
// (nothing else is ever dialed from a Comment).
std::string trainer_in_comment(const std::string& comment);

// Writes `address` into job `job`'s Comment (squeue reads the Comment,
// scontrol update writes it back with the token): an error names the
// command that failed and what it said.
Status publish_trainer(const SlurmCommand& run, uint32_t job, const std::string& address);

// The address job `job` published, or "" (none, or squeue failed: the
// caller asks again later).
std::string published_trainer(const SlurmCommand& run, uint32_t job);

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_TRAINER_RENDEZVOUS_H_
