// Text that came from outside (a report, a peer, an answer) made safe to
// print on an operator's terminal: no byte of it can move the cursor,
// change colours or set the window title.
#ifndef GOLDMINER_GMCORE_PRINTABLE_H_
#define GOLDMINER_GMCORE_PRINTABLE_H_

#include <string>
#include <string_view>

namespace goldminer {

// `s` with every byte outside printable ASCII (0x20-0x7e) and every
// backslash written as \xNN (a backslash as \x5c), so the result shows
// what was sent and holds only printable ASCII. With `keep_newlines`,
// '\n' stays as it is (a multi-line table).
std::string printable(std::string_view s, bool keep_newlines = false);

// Whether `s` is a host name or address as Slurm's node names and the
// data workers' reports carry them: 1 to 255 characters of letters,
// digits, '.', '-', '_', ':' (IPv6) and '[' ']' (a bracketed address).
bool is_host_name(std::string_view s);

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_PRINTABLE_H_
