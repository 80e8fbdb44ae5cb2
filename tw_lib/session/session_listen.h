// Where a session listens: the address it was given or, when another
// process took that port first (the port spank_goldminer.so reserved was
// free when reserved, not held until the trainer bound it), any free port
// of the same address, published for the job's workers and ranks
// (launch/trainer_rendezvous.h).
#ifndef GOLDMINER_TW_LIB_SESSION_SESSION_LISTEN_H_
#define GOLDMINER_TW_LIB_SESSION_SESSION_LISTEN_H_

#include <memory>

#include "gmcore/status.h"
#include "goldminer/session.h"
#include "launch/job_environment.h"
#include "mpi_transport/transport.h"

namespace goldminer {

// transport::listen at o.listen; a port in use there is replaced as the
// header says when o.publish_listen is set (then published through it) or
// the session is a rank other than 0 sharing rank 0's workers (which
// tells rank 0 its address itself). The log names the port, who listens
// on it (uid, from /proc/net/tcp{,6}) and the new address.
Expected<std::unique_ptr<transport::Endpoint>> listen_or_fall_back(const SessionOptions& o,
                                                                   const transport::Options& to);

// The publish_listen and published_rank0 of a task of --goldminer job J
// (SLURM_JOB_ID = GOLDMINER_AUTH_JOB = J, GOLDMINER_LISTEN set, as ENV
// read them): J's Comment, through squeue and scontrol on the job's PATH.
// Elsewhere nothing is set.
void rendezvous_from_environment(SessionOptions* o, const JobEnvironment& env);

// The port UCX's TCP transport takes for a session listening at o.listen:
// the one reserved beside that address, else 0 (an ephemeral one).
int ucx_data_port(const SessionOptions& o);

}  // namespace goldminer

#endif  // GOLDMINER_TW_LIB_SESSION_SESSION_LISTEN_H_
