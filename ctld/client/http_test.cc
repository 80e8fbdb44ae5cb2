// The messages and the client's call; the server is tested in
// ctld/http_server_test.cc.
#include "ctld/client/http.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

TEST(HttpTest, AddressesAreHostAndPort) {
  auto a = parse_host_port("ctl1:6830", "--ctld");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "ctl1");
  EXPECT_EQ(a->port, "6830");
  auto v6 = parse_host_port("[::1]:80", "--ctld");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(parse_host_port("ctl1", "--ctld").status().message(), "--ctld: invalid address 'ctl1': expected HOST:PORT");
  EXPECT_EQ(parse_host_port("::1:80", "--ctld").status().message(), "--ctld: invalid address '::1:80': expected HOST:PORT");
  EXPECT_EQ(parse_host_port("a:99999", "--ctld").status().message(),
            "--ctld: invalid port '99999' in 'a:99999': expected 0 to 65535");
}

// The source address of packets to a host (a data-parallel rank listens
// there for its workers): the loopback's for the loopback, v4 or v6.
TEST(HttpTest, TheLocalAddressTowardAHostIsTheRoutesSource) {
  EXPECT_EQ(*local_address_toward("127.0.0.1"), "127.0.0.1");
  auto v6 = local_address_toward("::1");
  if (v6.ok()) {
    EXPECT_EQ(*v6, "::1");
  }
  auto bad = local_address_toward("no-such-host.invalid");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("cannot resolve 'no-such-host.invalid': ", 0), 0u) << bad.status().message();
}

TEST(HttpTest, RequestsAreWholeOnlyWithTheirBody) {
  std::string req = format_http_request(HttpRequest{"POST", "/report", "hello"}, "h:1");
  EXPECT_EQ(*http_request_size(req.substr(0, req.size() - 1)), 0u);
  EXPECT_EQ(*http_request_size(req + "extra"), req.size());
  auto r = parse_http_request(req);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->method, "POST");
  EXPECT_EQ(r->path, "/report");
  EXPECT_EQ(r->body, "hello");
  EXPECT_EQ(http_request_size("POST / HTTP/1.0\r\nContent-Length: 12x\r\n\r\n").status().message(),
            "http: bad Content-Length '12x'");
  EXPECT_EQ(http_request_size("POST / HTTP/1.0\r\nContent-Length: 70000\r\n\r\n").status().message(),
            "http: body of 70000 bytes is over 65536");
  EXPECT_EQ(parse_http_request("GARBAGE\r\n\r\n").status().message(), "http: bad request line 'GARBAGE' (bad method)");
  EXPECT_FALSE(http_request_size(std::string(9000, 'x')).ok()) << "a head that never ends";
}

TEST(HttpTest, TheAuthorizationHeaderTravelsWithTheRequest) {
  HttpRequest request{"GET", "/jobs", "", "Munge MUNGE:AbC+/=:"};
  auto r = parse_http_request(format_http_request(request, "h:1"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->authorization, "Munge MUNGE:AbC+/=:");
  auto none = parse_http_request(format_http_request(HttpRequest{"GET", "/jobs", ""}, "h:1"));
  EXPECT_EQ(none->authorization, "");
  auto spaced = parse_http_request("GET /jobs HTTP/1.0\r\nauthorization:   Munge X  \r\n\r\n");
  EXPECT_EQ(spaced->authorization, "Munge X");
}

}  // namespace
}  // namespace goldminer
