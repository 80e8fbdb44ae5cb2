// The public headers (include/README.md) stand alone and include only the
// standard library, other public headers and gmcore/'s core types: never
// dw_daemon/, sched/, ctld/ or anything else of the tree's internals.
#include <dirent.h>

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

// Each compiles alone, first in its translation unit but for these.
#include "goldminer/elastic.h"
#include "goldminer/program_loader.h"
#include "goldminer/session.h"
#include "goldminer/split.h"

namespace {

const std::string kDir = std::string(GOLDMINER_TEST_SRCDIR) + "/include/goldminer";

std::vector<std::string> public_headers() {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(kDir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 2 && name.compare(name.size() - 2, 2, ".h") == 0) names.push_back(name);
    }
    ::closedir(d);
  }
  return names;
}

TEST(PublicHeadersTest, IncludeOnlyTheStandardLibraryOtherPublicHeadersAndGmcore) {
  const std::vector<std::string> headers = public_headers();
  ASSERT_GE(headers.size(), 4u) << "no public headers found in " << kDir;
  const std::regex quoted(R"(^\s*#\s*include\s*"([^"]+)\")");
  for (const std::string& name : headers) {
    std::ifstream in(kDir + "/" + name);
    ASSERT_TRUE(in) << kDir << "/" << name;
    std::string line;
    int includes = 0;
    for (int n = 1; std::getline(in, line); ++n) {
      std::smatch m;
      if (!std::regex_search(line, m, quoted)) continue;
      ++includes;
      const std::string path = m[1];
      EXPECT_TRUE(path.rfind("goldminer/", 0) == 0 || path.rfind("gmcore/", 0) == 0)
          << "include/goldminer/" << name << ":" << n << " includes \"" << path
          << "\": a public header includes only other public headers and gmcore/";
    }
    EXPECT_GT(includes, 0) << name << ": no quoted include read (at least gmcore/status.h is expected)";
  }
}

}  // namespace
