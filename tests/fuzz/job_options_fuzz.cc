// libFuzzer target: the --goldminer option parser (what a user types after
// sbatch --goldminer=) must refuse any malformed text with an error naming
// what was wrong, never crash or read outside the text (ASan/UBSan).
#include <cstddef>
#include <cstdint>
#include <string>

#include "launch/admin_config.h"
#include "launch/job_options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  goldminer::AdminConfig admin;
  auto o = goldminer::parse_job_options(text, admin);
  if (!o.ok() && o.status().message().empty()) __builtin_trap();  // every refusal says why
  return 0;
}
