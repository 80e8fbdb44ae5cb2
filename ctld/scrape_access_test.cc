// Tests of the scrapers a site lets read /metrics in full
// (ctld/scrape_access.h) and of /healthz (ctld/ctld_service.h): the token
// file and address list checked, a token or a listed address sees every
// job's series, anything else what an anonymous GET sees.
#include "ctld/scrape_access.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "ctld/ctld_service.h"
#include "gmcore/fake_credentials.h"

namespace goldminer {
namespace {

constexpr char kToken[] = "s3cr3t-scrape-token-0123456789";

std::string token_file(const std::string& text, mode_t mode) {
  char path[] = "/tmp/goldminer-token-XXXXXX";
  int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << text;
  ::chmod(path, mode);
  return path;
}

HttpRequest get(const std::string& path, const std::string& authorization, const std::string& peer) {
  HttpRequest r{"GET", path, "", authorization};
  r.peer = peer;
  return r;
}

TEST(ScrapeAccessTest, ATokenFileMustBePrivateAndHoldALongToken) {
  const std::string good = token_file(std::string(kToken) + "\n", 0600);
  auto s = ScrapeAccess::make(good, "");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->admits(get("/metrics", std::string("Bearer ") + kToken, "192.0.2.1")));
  EXPECT_FALSE(s->admits(get("/metrics", std::string("Bearer ") + kToken + "x", "192.0.2.1")));
  EXPECT_FALSE(s->admits(get("/metrics", "Bearer s3cr3t", "192.0.2.1")));
  EXPECT_FALSE(s->admits(get("/metrics", "", "192.0.2.1")));
  ::chmod(good.c_str(), 0644);
  EXPECT_EQ(ScrapeAccess::make(good, "").status().message(),
            "--metrics-token-file " + good + ": readable or writable by group or others (mode 644): chmod 600 it");
  const std::string short_token = token_file("short\n", 0600);
  EXPECT_EQ(ScrapeAccess::make(short_token, "").status().message(),
            "--metrics-token-file " + short_token +
                ": its first line must be a token of at least 16 characters without blanks");
  EXPECT_EQ(ScrapeAccess::make("/nonexistent/token", "").status().message(),
            "--metrics-token-file /nonexistent/token: No such file or directory");
  ::unlink(good.c_str());
  ::unlink(short_token.c_str());
}

TEST(ScrapeAccessTest, AnAddressListAdmitsItsPeersIPv4MappedToo) {
  auto s = ScrapeAccess::make("", "10.1.0.0/16,2001:db8::/32,192.0.2.7");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->admits(get("/metrics", "", "10.1.200.3")));
  EXPECT_TRUE(s->admits(get("/metrics", "", "::ffff:10.1.0.9")));
  EXPECT_TRUE(s->admits(get("/metrics", "", "2001:db8:5::1")));
  EXPECT_TRUE(s->admits(get("/metrics", "", "192.0.2.7")));
  EXPECT_FALSE(s->admits(get("/metrics", "", "10.2.0.1")));
  EXPECT_FALSE(s->admits(get("/metrics", "", "192.0.2.8")));
  EXPECT_FALSE(s->admits(get("/metrics", "", "2001:db9::1")));
  EXPECT_FALSE(s->admits(get("/metrics", "", "")));
  for (const char* bad : {"10.0.0.0/33", "ctld-host", "10.0.0.0/", "::1/129"})
    EXPECT_EQ(ScrapeAccess::make("", bad).status().message(),
              std::string("--metrics-allow: invalid value '") + bad +
                  "': expected an address or prefix (A.B.C.D[/N] or an IPv6 address[/N])");
}

// A ctld with one job of uid 1000 (job 10), and `scrape` as its scrapers.
struct Service {
  FakeCredentials signer{64030};
  bool slurm_fails = false;
  CtldService service;
  explicit Service(ScrapeAccess scrape)
      : service(
            [&] {
              CtldSettings s;
              s.worker_cpus = 4;
              s.pool_refresh_s = 0;  // Slurm asked at each GET
              s.scrape = std::move(scrape);
              return s;
            }(),
            &signer, [](uint32_t) { return Expected<JobOwner>(JobOwner{1000, "RUNNING", "gpu"}); },
            [this]() -> Expected<SlurmCpus> {
              if (slurm_fails) return Status::error("squeue: timed out after 10 s");
              SlurmCpus c;
              c.companions.emplace(10, 1000);
              return c;
            },
            [] { return 0.0; }) {
    SessionReport r;
    r.job_id = 10;
    r.workers = 1;
    r.dw_max = 4;
    r.cpus_per_dw = 1;
    r.samples_per_s = 100;
    FakeCredentials user(1000);
    EXPECT_EQ(service.handle(HttpRequest{"POST", "/report", *user.encode(encode_report(r), nullptr)}).status, 200);
  }
};

TEST(ScrapeAccessTest, AConfiguredScraperSeesEveryJobsSeriesAndNothingElse) {
  const std::string file = token_file(std::string(kToken) + "\n", 0600);
  Service by_token(std::move(ScrapeAccess::make(file, "")).value());
  const std::string series = "goldminer_job_workers{job_id=\"10\",partition=\"gpu\",user=\"";
  HttpResponse scraped = by_token.service.handle(get("/metrics", std::string("Bearer ") + kToken, "192.0.2.1"));
  EXPECT_EQ(scraped.status, 200);
  EXPECT_NE(scraped.body.find(series), std::string::npos) << scraped.body;
  HttpResponse anonymous = by_token.service.handle(get("/metrics", "", "192.0.2.1"));
  EXPECT_EQ(anonymous.status, 200);
  EXPECT_EQ(anonymous.body.find("job_id="), std::string::npos) << anonymous.body;
  EXPECT_NE(anonymous.body.find("goldminer_jobs 1\n"), std::string::npos) << anonymous.body;
  HttpResponse wrong = by_token.service.handle(get("/metrics", "Bearer not-the-token-at-all", "192.0.2.1"));
  EXPECT_EQ(wrong.status, 403);
  HttpResponse jobs = by_token.service.handle(get("/jobs", std::string("Bearer ") + kToken, "192.0.2.1"));
  EXPECT_EQ(jobs.status, 403);
  EXPECT_EQ(jobs.body, "not authenticated: the bearer token is not goldminer-ctld's (--metrics-token-file), or not "
                       "for /jobs (a token reads /metrics only)\n");
  ::unlink(file.c_str());

  Service by_address(std::move(ScrapeAccess::make("", "192.0.2.0/24")).value());
  EXPECT_NE(by_address.service.handle(get("/metrics", "", "192.0.2.9")).body.find(series), std::string::npos);
  EXPECT_EQ(by_address.service.handle(get("/metrics", "", "198.51.100.1")).body.find("job_id="), std::string::npos);
  EXPECT_EQ(by_address.service.handle(get("/jobs", "", "192.0.2.9")).body.find("\"job\": 10"), std::string::npos);
}

TEST(ScrapeAccessTest, HealthzSaysOkOrWhySlurmsCpusAreUnknown) {
  Service s{ScrapeAccess()};
  HttpResponse ok = s.service.handle(get("/healthz", "", "192.0.2.1"));
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "ok\n");
  EXPECT_EQ(s.service.handle(HttpRequest{"POST", "/healthz", ""}).status, 405);
  s.slurm_fails = true;
  s.service.handle(get("/jobs", "", "192.0.2.1"));  // asks Slurm again
  HttpResponse down = s.service.handle(get("/healthz", "", "192.0.2.1"));
  EXPECT_EQ(down.status, 503);
  EXPECT_EQ(down.body, "cannot find the spare CPUs in Slurm: squeue: timed out after 10 s\n");
  s.slurm_fails = false;
  s.service.handle(get("/jobs", "", "192.0.2.1"));
  EXPECT_EQ(s.service.handle(get("/healthz", "", "192.0.2.1")).status, 200);
}

}  // namespace
}  // namespace goldminer
