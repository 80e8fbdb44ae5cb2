// Injectable log sink (STYLE.md §5). The core never writes to stderr or
// syslog itself: each host (a Slurm plugin, a daemon, a test) installs a sink
// that maps the level to its own facility. Without a sink, messages at
// Level::kInfo and more severe go to stderr.
#ifndef GOLDMINER_GMCORE_LOG_H_
#define GOLDMINER_GMCORE_LOG_H_

#include <functional>
#include <string>

namespace goldminer::log {

enum class Level { kError, kInfo, kVerbose, kDebug };

// Receives one complete line, already prefixed with its component.
using Sink = std::function<void(Level, const std::string&)>;

// Replaces the process-wide sink; returns the previous one. Not thread-safe:
// call it while the host is single-threaded (plugin init, daemon start).
Sink set_sink(Sink sink);

// Thread-safe if the installed sink is.
void write(Level level, const std::string& line);

inline void error(const std::string& line) { write(Level::kError, line); }
inline void info(const std::string& line) { write(Level::kInfo, line); }
inline void verbose(const std::string& line) { write(Level::kVerbose, line); }
inline void debug(const std::string& line) { write(Level::kDebug, line); }

}  // namespace goldminer::log

#endif  // GOLDMINER_GMCORE_LOG_H_
