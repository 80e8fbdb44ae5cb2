// goldminer-top: goldminer-ctld's view of the cluster's data workers, per
// job: workers and where they run, target, trainer wait, queue fill,
// samples/s, its measured scaling curve and knee (goldminer-ctld renders
// them: WorkerRegistry::table, json); refreshed like top, or once (--once;
// --json for scripts).
// Each request carries a munge credential of the user: goldminer-ctld
// shows the user's own jobs in full (every job to root, SlurmUser and
// operators), and without a credential only the totals.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "ctld/client/ctld_client.h"
#include "ctld/client/http.h"
#include "gmcore/credential.h"
#include "gmcore/printable.h"
#include "launch/job_environment.h"
#include "tools/goldminer_top_options.h"

using namespace goldminer;

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "goldminer-top: error: %s\n", message.c_str());
  return code;
}

// GETs `path`, authenticated by a fresh credential (each decodes once);
// without one when munge cannot make it (said once on stderr).
Expected<std::string> fetch(const std::string& ctld, const std::string& path, CredentialService* munge) {
  static bool warned = false;
  HttpRequest request{"GET", path, ""};
  auto cred = munge->encode(view_credential_payload(path), nullptr);
  if (cred.ok()) {
    request.authorization = "Munge " + *cred;
  } else if (!warned) {
    warned = true;
    std::fprintf(stderr, "goldminer-top: not authenticated (%s): goldminer-ctld shows totals only\n",
                 cred.status().message().c_str());
  }
  auto r = http_call(ctld, request, 5);
  if (!r.ok()) return r.status();
  if (r->status != 200)
    return Status::error(ctld + path + " answered " + std::to_string(r->status) + ": " + printable(r->body));
  return r->body;
}

// goldminer-ctld's HOST:PORT: --ctld, else GOLDMINER_CTLD, else
// localhost:6830.
Expected<std::string> ctld_address(const TopArgs& a) {
  std::string ctld = a.ctld;
  if (ctld.empty()) {
    auto job = process_job_environment(kReadByTop);
    if (!job.ok()) return job.status();
    ctld = job->ctld.empty() ? "localhost:6830" : job->ctld;
  }
  if (auto hp = parse_host_port(ctld, "--ctld"); !hp.ok()) return hp.status();
  return ctld;
}

// The table, refreshed every `interval` seconds until SIGINT or SIGTERM.
void watch(const std::string& ctld, double interval, CredentialService* munge) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  while (!g_stop) {
    auto body = fetch(ctld, "/top", munge);
    char when[32];
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    std::strftime(when, sizeof when, "%H:%M:%S", &tm);
    std::printf("\033[H\033[2Jgoldminer-top  %s  %s\n\n%s", ctld.c_str(), when,
                body.ok() ? printable(*body, true).c_str()
                          : ("cannot reach goldminer-ctld: " + body.status().message() + "\n").c_str());
    std::fflush(stdout);
    for (double waited = 0; waited < interval && !g_stop; waited += 0.1)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

int main(int argc, char** argv) {
  TopArgs a;
  CommandLine command_line;
  if (int rc = parse_main_command_line(top_command(&a), argc, argv, &command_line); rc >= 0) return rc;
  std::unique_ptr<CredentialService> munge = munge_credentials(a.munge_socket);
  auto ctld = ctld_address(a);
  if (!ctld.ok()) return fail(ctld.status().message(), 2);
  if (!a.json && !a.once) {
    watch(*ctld, a.interval, munge.get());
    return 0;
  }
  auto body = fetch(*ctld, a.json ? "/jobs" : "/top", munge.get());
  if (!body.ok()) return fail(body.status().message(), 1);
  // The table goes to a terminal: nothing in it may be a control
  // sequence. JSON escapes its own (for scripts, byte for byte).
  std::fputs(a.json ? body->c_str() : printable(*body, true).c_str(), stdout);
  return 0;
}
