// The link of a data-parallel rank other than 0 to rank 0
// (SessionOptions::rank0; docs/ARCHITECTURE-dataplane.md, "Data-parallel
// ranks"): it joins rank 0 as a peer of role kRank (authenticating as a
// worker would), says where this rank listens (RankJoin) and, every
// second, how many workers it has (RankStatus), so that rank 0 sends it
// its share of the job's workers.
//
// Runs on a thread of its own, with an endpoint of its own (no batches go
// to rank 0; the session's loop thread never sees it). The thread reads
// the session only through `status`, which takes the session's lock. The
// session starts it once it listens and stops it (joined) before its
// loop thread ends.
#ifndef GOLDMINER_TW_LIB_SESSION_RANK_LINK_H_
#define GOLDMINER_TW_LIB_SESSION_RANK_LINK_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "gmcore/auth.h"
#include "goldminer/session.h"
#include "mpi_transport/transport.h"

namespace goldminer {

class RankLink {
 public:
  // This rank's figures for its RankStatus, as of now.
  using StatusSource = std::function<wire::RankStatus()>;

  // `o` and `peer_auth` outlive the link; `address`: where this rank's
  // session listens.
  RankLink(const SessionOptions& o, const auth::PeerAuth& peer_auth, std::string address, StatusSource status);
  ~RankLink() { stop(); }
  RankLink(const RankLink&) = delete;
  RankLink& operator=(const RankLink&) = delete;

  void start();
  // Ends the link (closing it) and joins its thread.
  void stop();

 private:
  // Joins rank 0, trying until it reaches it (the ranks start together;
  // rank 0 may listen later) for as long as a worker may take to come.
  // False when it gave up (logged) or the session stops.
  bool reach_rank0();
  // The handshake on a connected endpoint: hello, challenge, answer, join.
  Status join();
  // Tells rank 0, every second, how many workers this rank has, until
  // the session stops, rank 0 ends or the link fails.
  void report();
  // The next message from rank 0 (none: timed out, or stopping).
  Expected<std::optional<wire::Message>> receive(double timeout_s);
  Status send(const wire::Message& m);
  void run();
  // A lost link is logged: this rank keeps its workers, and gets no new
  // ones.
  void fail_link(const std::string& why) const;

  const SessionOptions& o_;
  const auth::PeerAuth& peer_auth_;
  const std::string address_;
  const std::string me_;  // "rank N", for messages
  const StatusSource status_;
  std::string rank0_;  // o_.rank0, or where rank 0 published it listens instead
  std::unique_ptr<transport::Endpoint> ep_;  // the link's thread's
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace goldminer

#endif  // GOLDMINER_TW_LIB_SESSION_RANK_LINK_H_
