#include "sim/trace.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>

namespace goldminer::sim {
namespace {

// One open CSV file: header columns by name, then records with their line.
class CsvReader {
 public:
  static Expected<CsvReader> open(const std::string& path, const std::vector<std::string>& required) {
    CsvReader r;
    r.path_ = path;
    r.in_.open(path);
    if (!r.in_) return Status::error(path + ": cannot open: " + std::strerror(errno));
    std::string header;
    if (!std::getline(r.in_, header)) return Status::error(path + ":1: empty file (expected a header)");
    r.line_ = 1;
    strip_cr(&header);
    auto names = split_csv_line(header);
    for (size_t i = 0; i < names.size(); ++i) r.columns_[names[i]] = i;
    for (const auto& name : required)
      if (!r.columns_.count(name))
        return Status::error(path + ":1: missing column '" + name + "'");
    return r;
  }

  // False at end of file. Blank lines are skipped.
  bool next() {
    std::string text;
    while (std::getline(in_, text)) {
      ++line_;
      strip_cr(&text);
      if (text.empty()) continue;
      fields_ = split_csv_line(text);
      return true;
    }
    return false;
  }

  int line() const { return line_; }

  Expected<std::string> text(const std::string& column) const {
    size_t i = columns_.at(column);
    if (i >= fields_.size())
      return Status::error(where(column) + "missing field (the row has " +
                           std::to_string(fields_.size()) + " fields)");
    return fields_[i];
  }

  // An integer; `optional` allows an empty field (returned as nullopt-like
  // via *present = false).
  Expected<int64_t> integer(const std::string& column, bool optional = false,
                            bool* present = nullptr) const {
    auto t = text(column);
    if (!t.ok()) return t.status();
    if (t->empty()) {
      if (present) *present = false;
      if (optional) return int64_t{0};
      return Status::error(where(column) + "empty (expected an integer)");
    }
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(t->c_str(), &end, 10);
    if (errno != 0 || *end != '\0')
      return Status::error(where(column) + "invalid number '" + *t + "'");
    if (v < 0) return Status::error(where(column) + "negative value '" + *t + "'");
    if (present) *present = true;
    return static_cast<int64_t>(v);
  }

 private:
  static void strip_cr(std::string* s) {
    if (!s->empty() && s->back() == '\r') s->pop_back();
  }
  std::string where(const std::string& column) const {
    return path_ + ":" + std::to_string(line_) + ": column '" + column + "': ";
  }

  std::string path_;
  std::ifstream in_;
  int line_ = 0;
  std::map<std::string, size_t> columns_;
  std::vector<std::string> fields_;
};

#define GM_ASSIGN_OR_RETURN(lhs, expr) \
  do {                                 \
    auto gm_value_ = (expr);           \
    if (!gm_value_.ok()) return gm_value_.status(); \
    lhs = *gm_value_;                  \
  } while (0)

// The columns a pod and a node share: the name (in `name_column`), CPUs
// in milli-cores, memory and whole GPUs (in `gpu_column`).
Status read_resources(const CsvReader& r, const char* name_column, const char* gpu_column, std::string* name,
                      int64_t* cpu_milli, int64_t* memory_mib, int* gpus) {
  int64_t v = 0;
  GM_ASSIGN_OR_RETURN(*name, r.text(name_column));
  GM_ASSIGN_OR_RETURN(*cpu_milli, r.integer("cpu_milli"));
  GM_ASSIGN_OR_RETURN(*memory_mib, r.integer("memory_mib"));
  GM_ASSIGN_OR_RETURN(v, r.integer(gpu_column));
  *gpus = static_cast<int>(v);
  return Status();
}

}  // namespace

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(field);
      field.clear();
    } else {
      field += c;
    }
  }
  out.push_back(field);
  return out;
}

Expected<std::vector<TracePod>> read_pods(const std::string& path) {
  auto reader = CsvReader::open(path, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli",
                                       "qos", "pod_phase", "creation_time", "deletion_time",
                                       "scheduled_time"});
  if (!reader.ok()) return reader.status();
  CsvReader& r = *reader;
  std::vector<TracePod> pods;
  while (r.next()) {
    TracePod p;
    p.line = r.line();
    if (Status s = read_resources(r, "name", "num_gpu", &p.name, &p.cpu_milli, &p.memory_mib, &p.num_gpu); !s.ok())
      return s;
    GM_ASSIGN_OR_RETURN(p.gpu_milli, r.integer("gpu_milli"));
    GM_ASSIGN_OR_RETURN(p.qos, r.text("qos"));
    GM_ASSIGN_OR_RETURN(p.phase, r.text("pod_phase"));
    GM_ASSIGN_OR_RETURN(p.creation_time, r.integer("creation_time"));
    GM_ASSIGN_OR_RETURN(p.scheduled_time, r.integer("scheduled_time", true, &p.scheduled));
    bool has_deletion = false;
    GM_ASSIGN_OR_RETURN(p.deletion_time, r.integer("deletion_time", true, &has_deletion));
    if (p.scheduled && !has_deletion)
      return Status::error(path + ":" + std::to_string(p.line) +
                           ": column 'deletion_time': empty for a scheduled pod");
    if (p.scheduled && p.deletion_time < p.scheduled_time)
      return Status::error(path + ":" + std::to_string(p.line) +
                           ": column 'deletion_time': " + std::to_string(p.deletion_time) +
                           " is before scheduled_time " + std::to_string(p.scheduled_time));
    pods.push_back(std::move(p));
  }
  return pods;
}

Expected<std::vector<TraceNode>> read_nodes(const std::string& path) {
  auto reader = CsvReader::open(path, {"sn", "cpu_milli", "memory_mib", "gpu"});
  if (!reader.ok()) return reader.status();
  CsvReader& r = *reader;
  std::vector<TraceNode> nodes;
  while (r.next()) {
    TraceNode n;
    if (Status s = read_resources(r, "sn", "gpu", &n.name, &n.cpu_milli, &n.memory_mib, &n.gpus); !s.ok()) return s;
    nodes.push_back(std::move(n));
  }
  if (nodes.empty()) return Status::error(path + ": no nodes");
  return nodes;
}

}  // namespace goldminer::sim
