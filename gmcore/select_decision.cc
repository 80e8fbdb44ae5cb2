#include "gmcore/select_decision.h"

#include <cstring>
#include <string>

namespace {

const char* mode_name(int mode) {
  switch (mode) {
    case GM_MODE_RUN_NOW: return "run_now";
    case GM_MODE_TEST_ONLY: return "test_only";
    case GM_MODE_WILL_RUN: return "will_run";
    default: return "unknown_mode";
  }
}

std::string describe(const gm_job_test_record& r) {
  std::string out = "job_test job " + std::to_string(r.job_id);
  if (r.het_job_id != 0)
    out += " (het " + std::to_string(r.het_job_id) + "+" + std::to_string(r.het_job_offset) + ")";
  out += std::string(" mode ") + mode_name(r.mode);
  out += " nodes " + std::to_string(r.min_nodes) + "-" + std::to_string(r.max_nodes);
  if (r.req_nodes != r.min_nodes) out += " req " + std::to_string(r.req_nodes);
  if (r.gres && *r.gres) out += std::string(" gres ") + r.gres;
  out += " candidates " + std::to_string(r.candidate_nodes);
  if (r.rc == 0)
    out += std::string(" -> selected ") + (r.selected && *r.selected ? r.selected : "(none)");
  else
    out += " -> refused rc " + std::to_string(r.rc);
  return out;
}

}  // namespace

extern "C" size_t gm_format_job_test(const gm_job_test_record* record, char* buf, size_t len) {
  try {
    std::string line = record ? describe(*record) : std::string("job_test (no record)");
    if (len > 0) {
      size_t n = line.size() < len - 1 ? line.size() : len - 1;
      std::memcpy(buf, line.data(), n);
      buf[n] = '\0';
    }
    return line.size();
  } catch (...) {  // the caller is slurmctld: nothing may escape
    if (len > 0) buf[0] = '\0';
    return 0;
  }
}
