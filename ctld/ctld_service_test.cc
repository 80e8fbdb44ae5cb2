#include "ctld/ctld_service.h"

#include <gtest/gtest.h>

#include <thread>

#include "ctld/ctld_client.h"
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

// A ctld on a real loopback port; jobs 10 and 11 are uid 1000's, 12 is
// pending; the service signs as uid 64030 (SlurmUser).
struct Ctld {
  FakeCredentials signer{64030};
  double clock = 0;
  CtldService service;
  std::unique_ptr<HttpServer> server;
  std::thread serving;
  std::string address;
  explicit Ctld(double worker_cpus)
      : service(
            [&] {
              CtldSettings s;
              s.worker_cpus = worker_cpus;
              return s;
            }(),
            &signer,
            [](uint32_t job) -> Expected<JobOwner> {
              if (job == 10 || job == 11) return JobOwner{1000, "RUNNING"};
              if (job == 12) return JobOwner{1000, "PENDING"};
              return Status::error("not known to Slurm");
            },
            [] { return Expected<double>(0.0); }, [this] { return clock; }) {
    server = std::move(HttpServer::listen("127.0.0.1:0")).value();
    address = "127.0.0.1:" + std::to_string(server->port());
    serving = std::thread([this] { server->serve([this](const HttpRequest& r) { return service.handle(r); }); });
  }
  ~Ctld() {
    server->stop();
    serving.join();
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

  auto jobs = http_call(ctld.address, HttpRequest{"GET", "/jobs", ""}, 2);
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ(jobs->content_type, "application/json");
  EXPECT_NE(jobs->body.find("\"job\": 10, \"uid\": 1000, \"workers\": 4, \"target\": 2"), std::string::npos) << jobs->body;
  EXPECT_NE(jobs->body.find("\"job\": 11, \"uid\": 1000, \"workers\": 1, \"target\": 3"), std::string::npos) << jobs->body;
  auto metrics = http_call(ctld.address, HttpRequest{"GET", "/metrics", ""}, 2);
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("goldminer_job_worker_target{job=\"11\"} 3\n"), std::string::npos) << metrics->body;
  auto top = http_call(ctld.address, HttpRequest{"GET", "/top", ""}, 2);
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->body.rfind("worker CPUs: 5, held by 2 jobs' workers: 5\n", 0), 0u) << top->body;

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
  EXPECT_EQ(r.status().message(), ctld.address +
                                       " answered 403: report refused: job 10: report from uid 1001 refused: the "
                                       "job is uid 1000's");
  CtldClient owner(ctld.address, std::make_shared<FakeCredentials>(1000), 64030);
  auto pending = owner.report(report(12, 0, 0));
  ASSERT_FALSE(pending.ok());
  EXPECT_NE(pending.status().message().find("job 12 is PENDING, not running"), std::string::npos);
  auto unknown = owner.report(report(99, 0, 0));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("job 99: not known to Slurm"), std::string::npos);
  // Nothing was registered by any of them.
  auto jobs = http_call(ctld.address, HttpRequest{"GET", "/jobs", ""}, 2);
  ASSERT_TRUE(jobs.ok());
  EXPECT_NE(jobs->body.find("\"jobs\": []"), std::string::npos) << jobs->body;
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
                   [] { return Expected<double>(0.0); }, [] { return 0.0; });
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
  CtldService service(s, &signer, [](uint32_t) { return Expected<JobOwner>(JobOwner{0, "RUNNING"}); },
                      [&] { return Expected<double>(spare); }, [] { return 0.0; });
  FakeCredentials user(0);
  HttpResponse r = service.handle(HttpRequest{"POST", "/report", *user.encode(encode_report(report(10, 2, 10)), nullptr)});
  ASSERT_EQ(r.status, 200) << r.body;
  auto jobs = service.handle(HttpRequest{"GET", "/jobs", ""});
  EXPECT_EQ(jobs.body.rfind("{\"worker_cpus\": 5, \"worker_cpus_held\": 2,", 0), 0u) << jobs.body;
}

}  // namespace
}  // namespace goldminer
