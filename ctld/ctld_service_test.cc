#include "ctld/ctld_service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "ctld/client/ctld_client.h"
#include "ctld/http_server.h"
#include "gmcore/fake_credentials.h"

namespace goldminer {
namespace {

SessionReport report(uint32_t job, int workers, double per_worker) {
  SessionReport r;
  r.job_id = job;
  r.workers = workers;
  r.dw_max = 8;
  r.cpus_per_dw = 1;
  r.trainer_wait_fraction = 0.5;
  r.consumption_rate = 50;  // would take 100 batches/s
  r.per_worker_rate = per_worker;
  r.samples_per_s = 50 * 32;
  r.worker_hosts = {"c1"};
  return r;
}

// What Slurm says of the companion jobs: jobs 10 to 13 have theirs (they
// are --goldminer jobs) for uids 0, 1000 and 1001; job 14 has none.
SlurmCpus goldminer_jobs(SlurmCpus c = {}) {
  for (uint32_t job : {10u, 11u, 12u, 13u})
    for (uid_t uid : {0u, 1000u, 1001u}) c.companions.emplace(job, uid);
  return c;
}

// What Slurm says: `spare` CPUs and the companion jobs' CPUs by job and uid.
SlurmCpus with_held(double spare, SlurmCpus::Held held) {
  SlurmCpus c;
  c.spare = spare;
  c.workers = std::move(held);
  return goldminer_jobs(c);
}

// A ctld on a real loopback port; jobs 10 and 11 are uid 1000's, 12 is
// pending, 13 is uid 1001's; the service signs as uid 64030 (SlurmUser,
// who sees every job). `private_jobs`: Slurm's PrivateData has "jobs".
struct Ctld {
  FakeCredentials signer{64030};
  double clock = 0;
  std::atomic<int> squeue_runs{0};
  std::atomic<bool> job10_ended{false};  // squeue then says COMPLETED
  std::atomic<bool> squeue_fails{false};  // every lookup then fails (timed out)
  std::atomic<bool> companions_fail{false};  // the companion jobs' squeue then fails
  CtldService service;
  std::unique_ptr<HttpServer> server;
  std::thread serving;
  std::string address;
  explicit Ctld(double worker_cpus, bool private_jobs = true)
      : service(
            [&] {
              CtldSettings s;
              s.worker_cpus = worker_cpus;
              s.privileged_uids = {64030};
              s.private_jobs = private_jobs;
              return s;
            }(),
            &signer,
            [this](uint32_t job) -> Expected<JobOwner> {
              ++squeue_runs;
              if (squeue_fails) return Status::error("squeue: timed out after 10 s");
              if (job == 10 && job10_ended) return JobOwner{1000, "COMPLETED"};
              if (job == 10 || job == 11) return JobOwner{1000, "RUNNING", "gpu"};
              if (job == 12) return JobOwner{1000, "PENDING"};
              if (job == 13) return JobOwner{1001, "RUNNING"};
              if (job == 14) return JobOwner{1000, "RUNNING"};  // a plain job: no companion
              return Status::error("not known to Slurm");
            },
            [this]() -> Expected<SlurmCpus> {
              if (companions_fail) return Status::error("squeue: timed out after 10 s");
              return goldminer_jobs();
            },
            [this] { return clock; }) {
    server = std::move(HttpServer::listen("127.0.0.1:0")).value();
    address = "127.0.0.1:" + std::to_string(server->port());
    serving = std::thread([this] { server->serve([this](const HttpRequest& r) { return service.handle(r); }); });
  }
  ~Ctld() {
    server->stop();
    serving.join();
  }
  // GET `path` with a credential of `uid` (none when uid < 0).
  HttpResponse get(const std::string& path, long uid) {
    HttpRequest r{"GET", path, ""};
    if (uid >= 0) r.authorization = "Munge " + *FakeCredentials(static_cast<uid_t>(uid)).encode(view_credential_payload(path), nullptr);
    return std::move(http_call(address, r, 2)).value();
  }
};

TEST(CtldServiceTest, JobsShareWorkerCpusThroughReportsAndAnswers) {
  Ctld ctld(5);
  CtldClient client(ctld.address, std::make_shared<FakeCredentials>(1000), 64030);
  // Job 10 makes 25 batches/s per worker (4 saturate it), job 11 12.5 (8).
  auto a = client.report(report(10, 4, 25));
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(*a, 4) << "alone, it gets what saturates it";
  auto b = client.report(report(11, 1, 12.5));
  ASSERT_TRUE(b.ok()) << b.status().message();
  // 5 CPUs by marginal value: one each first, then 11, 10, 11 (the
  // registry test works the values out).
  EXPECT_EQ(*b, 3);
  auto a2 = client.report(report(10, 4, 25));
  ASSERT_TRUE(a2.ok());
  EXPECT_EQ(*a2, 2) << "job 10 now shares: it drains to 2";

  HttpResponse jobs = ctld.get("/jobs", 1000);
  EXPECT_EQ(jobs.content_type, "application/json");
  EXPECT_NE(jobs.body.find("\"job\": 10, \"uid\": 1000, \"workers\": 4, \"target\": 2"), std::string::npos) << jobs.body;
  EXPECT_NE(jobs.body.find("\"job\": 11, \"uid\": 1000, \"workers\": 1, \"target\": 3"), std::string::npos) << jobs.body;
  HttpResponse metrics = ctld.get("/metrics", 1000);
  EXPECT_NE(metrics.body.find("goldminer_job_worker_target{job_id=\"11\",partition=\"gpu\",user=\""), std::string::npos)
      << metrics.body;
  HttpResponse top = ctld.get("/top", 1000);
  EXPECT_EQ(top.body.rfind("worker CPUs: 5, held by 2 jobs' workers: 5\n", 0), 0u) << top.body;

  // Silent for stale_after_s: dropped, and the other gets the CPUs.
  ctld.clock = 31;
  auto alone = client.report(report(11, 3, 12.5));
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(*alone, 5);
}

TEST(CtldServiceTest, AReportForAnotherUsersJobIsRefused) {
  Ctld ctld(8);
  CtldClient mallory(ctld.address, std::make_shared<FakeCredentials>(1001), 64030);
  auto r = mallory.report(report(10, 1, 10));
  ASSERT_FALSE(r.ok());
  // Neither the owner nor the state is told: the same words for another
  // user's job, a pending one and one Slurm does not know.
  EXPECT_EQ(r.status().message(), ctld.address + " answered 403: report refused: job 10 is not a running job of uid 1001");
  CtldClient owner(ctld.address, std::make_shared<FakeCredentials>(1000), 64030);
  auto pending = owner.report(report(12, 0, 0));
  ASSERT_FALSE(pending.ok());
  EXPECT_EQ(pending.status().message(), ctld.address + " answered 403: report refused: job 12 is not a running job of uid 1000");
  auto unknown = owner.report(report(99, 0, 0));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), ctld.address + " answered 403: report refused: job 99 is not a running job of uid 1000");
  // Nothing was registered by any of them.
  EXPECT_NE(ctld.get("/jobs", 64030).body.find("\"jobs\": []"), std::string::npos);
}

TEST(CtldServiceTest, ForgedOrReplayedCredentialsAndBadRequestsAreRefused) {
  Ctld ctld(8);
  FakeCredentials user(1000);
  auto post = [&](const std::string& body) {
    return std::move(http_call(ctld.address, HttpRequest{"POST", "/report", body}, 2)).value();
  };
  HttpResponse forged = post("not a credential");
  EXPECT_EQ(forged.status, 403);
  EXPECT_EQ(forged.body, "report refused: munge: credential refused: Invalid credential format\n");
  std::string cred = *user.encode(encode_report(report(10, 1, 10)), nullptr);
  EXPECT_EQ(post(cred).status, 200);
  HttpResponse replay = post(cred);
  EXPECT_EQ(replay.status, 403);
  EXPECT_NE(replay.body.find("Replayed"), std::string::npos);
  HttpResponse bad = post(*user.encode("job=10\n", nullptr));
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body, "report: nonce: missing\n");
  EXPECT_EQ(std::move(http_call(ctld.address, HttpRequest{"GET", "/report", ""}, 2)).value().status, 405);
  EXPECT_EQ(std::move(http_call(ctld.address, HttpRequest{"GET", "/nope", ""}, 2)).value().status, 404);
}

TEST(CtldServiceTest, TheClientTakesAnswersOnlyFromTheCtld) {
  // A "ctld" run by uid 1001 (a user's own server on the port): its
  // answers are refused.
  FakeCredentials impostor(1001);
  CtldSettings s;
  s.worker_cpus = 8;
  CtldService fake(s, &impostor, [](uint32_t) { return Expected<JobOwner>(JobOwner{1000, "RUNNING"}); },
                   [] { return Expected<SlurmCpus>(goldminer_jobs()); }, [] { return 0.0; });
  auto server = std::move(HttpServer::listen("127.0.0.1:0")).value();
  std::thread serving([&] { server->serve([&](const HttpRequest& r) { return fake.handle(r); }); });
  CtldClient client("127.0.0.1:" + std::to_string(server->port()), std::make_shared<FakeCredentials>(1000), 64030);
  auto r = client.report(report(10, 1, 10));
  server->stop();
  serving.join();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("answer refused: made by uid 1001, not goldminer-ctld's (uid 64030)"),
            std::string::npos)
      << r.status().message();
}

TEST(CtldServiceTest, TheSpareCpusComeFromTheNodesPlusThoseWorkersHold) {
  FakeCredentials signer(0);
  double spare = 3;
  CtldSettings s;  // worker_cpus < 0: from the nodes
  s.pool_refresh_s = 0;
  // Slurm: job 10's companion job holds 2 CPUs.
  CtldService service(s, &signer, [](uint32_t) { return Expected<JobOwner>(JobOwner{0, "RUNNING"}); },
                      [&] { return Expected<SlurmCpus>(with_held(spare, {{10, {{0, 2}}}})); }, [] { return 0.0; });
  FakeCredentials user(0);
  HttpResponse r = service.handle(HttpRequest{"POST", "/report", *user.encode(encode_report(report(10, 2, 10)), nullptr)});
  ASSERT_EQ(r.status, 200) << r.body;
  auto jobs = service.handle(HttpRequest{"GET", "/jobs", ""});  // the totals: no credential needed
  EXPECT_EQ(jobs.body.rfind("{\"worker_cpus\": 5, \"worker_cpus_held\": 2,", 0), 0u) << jobs.body;
}

// Injected: job 11 of the same uid, whose companion job Slurm says holds
// no CPUs, reports a million workers, then a million workers of 65536
// CPUs each, beside job 10 (2 CPUs held, by Slurm and by its report).
// Checked: the pool stays Slurm's (spare + 2) and job 10's target never
// falls below what it was when job 11 reported honestly.
TEST(CtldServiceTest, AReportClaimingAMillionWorkersOrCpusChangesNoOtherJobsTarget) {
  FakeCredentials signer(0);
  CtldSettings s;
  s.pool_refresh_s = 0;
  // Slurm: job 10's companion job holds 2 CPUs; a job named goldminer-dw.11
  // of another uid holds 50 (anyone may name a job so: not job 11's).
  CtldService service(s, &signer, [](uint32_t) { return Expected<JobOwner>(JobOwner{0, "RUNNING"}); },
                      [] { return Expected<SlurmCpus>(with_held(6, {{10, {{0, 2}}}, {11, {{1001, 50}}}})); },
                      [] { return 0.0; });
  FakeCredentials user(0);
  uint64_t nonce = 1;
  auto post = [&](SessionReport r) {
    r.nonce = nonce++;
    HttpResponse a = service.handle(HttpRequest{"POST", "/report", *user.encode(encode_report(r), nullptr)});
    EXPECT_EQ(a.status, 200) << a.body;
    auto jobs = service.handle(HttpRequest{"GET", "/jobs", ""});
    return jobs.body.substr(0, jobs.body.find(", \"jobs\""));
  };
  auto target_of_10 = [&] {
    SessionReport r = report(10, 2, 10);
    r.nonce = nonce++;
    HttpResponse a = service.handle(HttpRequest{"POST", "/report", *user.encode(encode_report(r), nullptr)});
    auto sealed = signer.decode(a.body);
    if (!sealed.ok()) return -1;
    auto answer = decode_answer(sealed->payload);
    return answer.ok() ? answer->target : -1;
  };
  post(report(10, 2, 10));
  const std::string totals = post(report(11, 0, 0));
  EXPECT_EQ(totals.rfind("{\"worker_cpus\": 8,", 0), 0u) << totals;
  const int honest = target_of_10();
  ASSERT_GT(honest, 0);
  SessionReport millions = report(11, 1000000, 0);
  EXPECT_EQ(post(millions).rfind("{\"worker_cpus\": 8,", 0), 0u) << "no CPUs from a claim of workers";
  EXPECT_EQ(target_of_10(), honest);
  millions.cpus_per_dw = 65536;
  EXPECT_EQ(post(millions).rfind("{\"worker_cpus\": 8,", 0), 0u) << "nor from a claim of CPUs";
  EXPECT_GE(target_of_10(), honest);
  SessionReport cheap = report(11, 1, 0);
  cheap.cpus_per_dw = 0.001;
  HttpResponse refused = service.handle(HttpRequest{"POST", "/report", *user.encode(encode_report(cheap), nullptr)});
  EXPECT_EQ(refused.status, 400) << "workers cheaper than a CPU: " << refused.body;
}

// Injected: job 10 of uid 1000 registered (worker host c1), job 13 of uid
// 1001 (host c7); GETs of /jobs, /top and /metrics by uid 1001, by nobody
// (no credential), with a bad credential and by SlurmUser. Checked: 1001
// sees no uid, user name or host of 1000's job (not the job at all when
// PrivateData has jobs), nobody sees only the totals.
TEST(CtldServiceTest, ANonOwnerSeesNoOtherUsersUidNameOrHost) {
  for (bool private_jobs : {true, false}) {
    SCOPED_TRACE(private_jobs ? "PrivateData=jobs" : "PrivateData=none");
    Ctld ctld(8, private_jobs);
    ASSERT_TRUE(CtldClient(ctld.address, std::make_shared<FakeCredentials>(1000), 64030).report(report(10, 2, 10)).ok());
    SessionReport other = report(13, 1, 10);
    other.worker_hosts = {"c7"};
    ASSERT_TRUE(CtldClient(ctld.address, std::make_shared<FakeCredentials>(1001), 64030).report(other).ok());

    HttpResponse jobs = ctld.get("/jobs", 1001);
    ASSERT_EQ(jobs.status, 200) << jobs.body;
    EXPECT_NE(jobs.body.find("{\"job\": 13, \"uid\": 1001,"), std::string::npos) << "its own job in full: " << jobs.body;
    EXPECT_NE(jobs.body.find("\"hosts\": [\"c7\"]"), std::string::npos) << jobs.body;
    EXPECT_EQ(jobs.body.find("1000"), std::string::npos) << jobs.body;
    EXPECT_EQ(jobs.body.find("c1"), std::string::npos) << jobs.body;
    if (private_jobs) {
      EXPECT_EQ(jobs.body.find("\"job\": 10"), std::string::npos) << jobs.body;
    } else {
      EXPECT_NE(jobs.body.find("{\"job\": 10, \"uid\": null, \"workers\": 2,"), std::string::npos) << jobs.body;
      EXPECT_NE(jobs.body.find("\"hosts\": null}"), std::string::npos) << jobs.body;
    }
    HttpResponse top = ctld.get("/top", 1001);
    EXPECT_EQ(top.body.find("c1"), std::string::npos) << top.body;
    EXPECT_EQ(top.body.find("1000"), std::string::npos) << top.body;
    EXPECT_EQ(top.body.find("\n10 ") == std::string::npos, private_jobs) << top.body;
    HttpResponse metrics = ctld.get("/metrics", 1001);
    EXPECT_EQ(metrics.body.find("{job_id=\"10\"") == std::string::npos, private_jobs) << metrics.body;

    // Nobody: the totals, no job.
    HttpResponse anonymous = ctld.get("/jobs", -1);
    EXPECT_EQ(anonymous.body, "{\"worker_cpus\": 8, \"worker_cpus_held\": 3, \"jobs\": []}\n");
    HttpResponse anonymous_top = ctld.get("/top", -1);
    EXPECT_EQ(anonymous_top.body.find("\n10 "), std::string::npos) << anonymous_top.body;
    EXPECT_EQ(anonymous_top.body.find("\n13 "), std::string::npos) << anonymous_top.body;
    HttpResponse anonymous_metrics = ctld.get("/metrics", -1);
    EXPECT_NE(anonymous_metrics.body.find("goldminer_jobs 2\n"), std::string::npos) << anonymous_metrics.body;
    EXPECT_EQ(anonymous_metrics.body.find("{job_id="), std::string::npos) << anonymous_metrics.body;

    // SlurmUser sees both in full.
    HttpResponse admin = ctld.get("/jobs", 64030);
    EXPECT_NE(admin.body.find("{\"job\": 10, \"uid\": 1000,"), std::string::npos) << admin.body;
    EXPECT_NE(admin.body.find("\"hosts\": [\"c1\"]"), std::string::npos) << admin.body;
  }
}

TEST(CtldServiceTest, AGetWithABadReplayedOrMisdirectedCredentialIsRefused) {
  Ctld ctld(8);
  auto get = [&](const std::string& path, const std::string& authorization) {
    return std::move(http_call(ctld.address, HttpRequest{"GET", path, "", authorization}, 2)).value();
  };
  HttpResponse forged = get("/jobs", "Munge not a credential");
  EXPECT_EQ(forged.status, 403);
  EXPECT_EQ(forged.body, "not authenticated: munge: credential refused: Invalid credential format\n");
  EXPECT_EQ(get("/jobs", "Basic dXNlcjpwYXNz").body, "not authenticated: Authorization must be 'Munge CREDENTIAL'\n");
  const std::string for_top = "Munge " + *FakeCredentials(1000).encode(view_credential_payload("/top"), nullptr);
  EXPECT_EQ(get("/jobs", for_top).body, "not authenticated: the credential is not for GET /jobs\n");
  const std::string cred = "Munge " + *FakeCredentials(1000).encode(view_credential_payload("/jobs"), nullptr);
  EXPECT_EQ(get("/jobs", cred).status, 200);
  HttpResponse replay = get("/jobs", cred);
  EXPECT_EQ(replay.status, 403);
  EXPECT_EQ(replay.body, "not authenticated: munge: credential refused: Replayed credential\n");
  // One made 60 s ago (taken by whoever held the port meanwhile, say) and
  // used for the first time now.
  ctld.signer.encoded = std::time(nullptr) - 60;
  const std::string old = "Munge " + *FakeCredentials(1001).encode(view_credential_payload("/jobs"), nullptr);
  HttpResponse late = get("/jobs", old);
  EXPECT_EQ(late.status, 403);
  EXPECT_EQ(late.body.rfind("not authenticated: the credential was made 6", 0), 0u) << late.body;
  EXPECT_NE(late.body.find(" s ago (a GET takes one made within 10 s)"), std::string::npos) << late.body;
}

// Injected: 1,000 reports by uid 1000 for 1,000 jobs Slurm does not know,
// then 1,000 for one such job, the clock still. Checked: squeue ran at most
// the burst (10) times, the rest answered 429; uid 1001's report for its
// own job is taken meanwhile.
TEST(CtldServiceTest, AThousandReportsForUnknownJobsCostABoundedNumberOfSqueueRuns) {
  Ctld ctld(8);
  FakeCredentials user(1000);
  int refused = 0, throttled = 0;
  for (uint32_t job = 100000; job < 101000; ++job) {
    HttpResponse r = ctld.service.handle(HttpRequest{"POST", "/report", *user.encode(encode_report(report(job, 0, 0)), nullptr)});
    refused += r.status == 403;
    throttled += r.status == 429;
  }
  EXPECT_EQ(ctld.squeue_runs, 10);
  EXPECT_EQ(ctld.service.owner_lookups(), 10u);
  EXPECT_EQ(refused, 10);
  EXPECT_EQ(throttled, 990);
  SessionReport again = report(100000, 0, 0);
  again.nonce = 1;  // a fresh credential
  HttpResponse last = ctld.service.handle(HttpRequest{"POST", "/report", *user.encode(encode_report(again), nullptr)});
  EXPECT_EQ(last.body, "report refused: job 100000 is not a running job of uid 1000\n") << "cached: no squeue, no token";
  EXPECT_EQ(ctld.squeue_runs, 10);
  HttpResponse spent = ctld.service.handle(HttpRequest{"POST", "/report", *user.encode(encode_report(report(200000, 0, 0)), nullptr)});
  EXPECT_EQ(spent.status, 429);
  EXPECT_EQ(spent.body, "report refused: too many reports for jobs goldminer-ctld does not know from uid 1000; try again in 2 s\n");
  FakeCredentials other(1001);
  HttpResponse own = ctld.service.handle(HttpRequest{"POST", "/report", *other.encode(encode_report(report(13, 1, 10)), nullptr)});
  EXPECT_EQ(own.status, 200) << own.body;
  EXPECT_EQ(ctld.squeue_runs, 11);
}

// Injected: its owner's reports for job 14, a running plain job (a
// `sleep`: Slurm shows no goldminer-dw.14), and for job 10 once Slurm says
// it ended; then, for job 11 (a --goldminer job), while the companion
// jobs' squeue fails. Checked: neither 14 nor the ended 10 is registered
// (403 with the reason), 11 is refused with 503 until Slurm answers, then
// registered.
TEST(CtldServiceTest, OnlyRunningGoldminerJobsOfTheirOwnerAreRegistered) {
  Ctld ctld(8);
  FakeCredentials user(1000);
  uint64_t nonce = 1;
  auto post = [&](uint32_t job) {
    SessionReport r = report(job, 1, 10);
    r.nonce = nonce++;
    return ctld.service.handle(HttpRequest{"POST", "/report", *user.encode(encode_report(r), nullptr)});
  };
  HttpResponse plain = post(14);
  EXPECT_EQ(plain.status, 403);
  EXPECT_EQ(plain.body, "report refused: job 14 is not a --goldminer job (Slurm shows no job goldminer-dw.14 of its owner)\n");
  ctld.job10_ended = true;
  HttpResponse ended = post(10);
  EXPECT_EQ(ended.status, 403) << ended.body;
  EXPECT_NE(ctld.get("/jobs", 64030).body.find("\"jobs\": []"), std::string::npos) << "SlurmUser sees no job";

  Ctld fresh(8);
  fresh.companions_fail = true;
  HttpResponse unsure = fresh.service.handle(
      HttpRequest{"POST", "/report", *user.encode(encode_report(report(11, 1, 10)), nullptr)});
  EXPECT_EQ(unsure.status, 503);
  EXPECT_EQ(unsure.body, "report refused: cannot tell from Slurm whether job 11 is a --goldminer job (squeue: timed "
                         "out after 10 s); try again\n");
  fresh.companions_fail = false;
  fresh.clock += 5;  // the next pool refresh
  SessionReport again = report(11, 1, 10);
  again.nonce = 2;
  HttpResponse ok = fresh.service.handle(HttpRequest{"POST", "/report", *user.encode(encode_report(again), nullptr)});
  EXPECT_EQ(ok.status, 200) << ok.body;
}

// A registered job is asked about again once the cache's answer expires
// (10 s), at goldminer-ctld's cost, not the reporter's lookups: after
// Slurm says it ended, its next report is refused and it is dropped at
// once, its CPUs back in the pool; before, reports reached the registry
// on the owner cached at registration.
TEST(CtldServiceTest, AJobThatEndedIsDroppedAtItsNextReportAndItsRechecksAreFree) {
  Ctld ctld(8);
  FakeCredentials user(1000);
  auto post = [&](uint32_t job, uint64_t nonce) {
    SessionReport r = report(job, 2, 25);
    r.nonce = nonce;
    return ctld.service.handle(HttpRequest{"POST", "/report", *user.encode(encode_report(r), nullptr)});
  };
  ASSERT_EQ(post(10, 1).status, 200);
  ASSERT_EQ(post(11, 2).status, 200);
  EXPECT_EQ(ctld.squeue_runs, 2);
  // Within the TTL the cached answer serves; past it, re-checks, free.
  uint64_t nonce = 3;
  for (int i = 0; i < 30; ++i) {
    ctld.clock += 11;
    ASSERT_EQ(post(10, nonce++).status, 200) << i;
    ASSERT_EQ(post(11, nonce++).status, 200) << i;
  }
  EXPECT_EQ(ctld.squeue_runs, 62) << "one re-check per job per TTL";
  HttpResponse unknown = post(100000, nonce++);
  EXPECT_EQ(unknown.status, 403) << "the uid's own lookups are untouched by the re-checks: " << unknown.body;
  ctld.job10_ended = true;
  EXPECT_EQ(post(10, nonce++).status, 200) << "the cached answer still says RUNNING";
  ctld.clock += 11;
  HttpResponse ended = post(10, nonce++);
  EXPECT_EQ(ended.status, 403);
  EXPECT_EQ(ended.body, "report refused: job 10 is not a running job of uid 1000\n");
  const std::string jobs = ctld.get("/jobs", 64030).body;
  EXPECT_EQ(jobs.find("\"job\": 10,"), std::string::npos) << "dropped at once: " << jobs;
  EXPECT_NE(jobs.find("\"job\": 11,"), std::string::npos) << jobs;
  // A squeue that fails says nothing of the job: this report is refused,
  // the job stays registered.
  ctld.squeue_fails = true;
  ctld.clock += 11;
  EXPECT_EQ(post(11, nonce++).status, 403);
  const std::string after = ctld.get("/jobs", 1000).body;  // its owner (a second GET of SlurmUser's would be a replay)
  EXPECT_NE(after.find("\"job\": 11,"), std::string::npos) << "kept: " << after;
}

// Injected: a spare-CPU lookup (scontrol show node) that hangs until
// released. Checked: while it hangs, a report is answered and so is another
// GET (with the CPUs known before): no subprocess runs under the lock.
TEST(CtldServiceTest, AHangingScontrolHoldsUpNoReportAndNoOtherView) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> scontrol_runs{0};
  FakeCredentials signer(64030);
  CtldSettings s;  // worker_cpus < 0: from the nodes
  s.pool_refresh_s = 0;
  CtldService service(s, &signer, [](uint32_t) { return Expected<JobOwner>(JobOwner{1000, "RUNNING"}); },
                      [&]() -> Expected<SlurmCpus> {
                        if (scontrol_runs++ > 0) released.wait();
                        return with_held(4, {{10, {{1000, 1}}}});
                      },
                      [] { return 0.0; });
  FakeCredentials user(1000);
  ASSERT_EQ(service.handle(HttpRequest{"POST", "/report", *user.encode(encode_report(report(10, 1, 10)), nullptr)}).status, 200);
  auto hanging = std::async(std::launch::async, [&] { return service.handle(HttpRequest{"GET", "/jobs", ""}); });
  while (scontrol_runs < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto start = std::chrono::steady_clock::now();
  SessionReport second = report(10, 1, 10);
  second.nonce = 2;
  HttpResponse r = service.handle(HttpRequest{"POST", "/report", *user.encode(encode_report(second), nullptr)});
  HttpResponse view = service.handle(HttpRequest{"GET", "/jobs", ""});
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(view.body.rfind("{\"worker_cpus\": 5, ", 0), 0u) << "the spare CPUs found before, plus 1 held: " << view.body;
  EXPECT_LT(took, 1.0);
  EXPECT_EQ(hanging.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout) << "scontrol still hangs";
  release.set_value();
  EXPECT_EQ(hanging.get().status, 200);
  EXPECT_EQ(scontrol_runs, 2) << "one lookup at a time";
}

}  // namespace
}  // namespace goldminer
