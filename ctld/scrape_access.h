// Who may scrape goldminer-ctld's per-job /metrics without a munge
// credential (Prometheus cannot make one per request): a site's bearer
// token (--metrics-token-file; Prometheus's `authorization:
// credentials_file:`) or a list of scraper addresses (--metrics-allow).
// Either gives GET /metrics every job's series in full, as an operator
// sees them; /jobs and /top still take a munge credential. Thread-safe
// once made (read only).
#ifndef GOLDMINER_CTLD_SCRAPE_ACCESS_H_
#define GOLDMINER_CTLD_SCRAPE_ACCESS_H_

#include <string>
#include <vector>

#include "ctld/client/http.h"
#include "gmcore/status.h"

namespace goldminer {

class ScrapeAccess {
 public:
  ScrapeAccess() = default;  // admits no scraper

  // The token is the first line of `token_file` ("" = none): at least 16
  // characters, the file readable by neither group nor others. `allow`:
  // addresses and prefixes, comma-separated (A.B.C.D[/N], IPv6[/N]).
  // Errors name the option and what is wrong.
  static Expected<ScrapeAccess> make(const std::string& token_file, const std::string& allow);

  // Whether `request` comes from a configured scraper: its
  // "Authorization: Bearer TOKEN" is the token (compared in constant
  // time), or its peer address is in the list.
  bool admits(const HttpRequest& request) const;

  bool any() const { return !token_.empty() || !nets_.empty(); }

 private:
  struct Net {
    bool v6 = false;
    unsigned char bytes[16] = {};
    int prefix = 0;
  };
  std::string token_;
  std::vector<Net> nets_;
};

}  // namespace goldminer

#endif  // GOLDMINER_CTLD_SCRAPE_ACCESS_H_
