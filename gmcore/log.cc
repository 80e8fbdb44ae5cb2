#include "gmcore/log.h"

#include <cstdio>
#include <utility>

namespace goldminer::log {
namespace {

Sink& current_sink() {
  static Sink sink;
  return sink;
}

}  // namespace

Sink set_sink(Sink sink) { return std::exchange(current_sink(), std::move(sink)); }

void write(Level level, const std::string& line) {
  const Sink& sink = current_sink();
  if (sink) {
    sink(level, line);
  } else if (level == Level::kError || level == Level::kInfo) {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

}  // namespace goldminer::log
