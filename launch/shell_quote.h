// Shell words: how a list of arguments travels as one environment
// variable (GOLDMINER_DW_SBATCH, the elastic workers' sbatch arguments)
// and is read back. Slurm-free.
#ifndef GOLDMINER_LAUNCH_SHELL_QUOTE_H_
#define GOLDMINER_LAUNCH_SHELL_QUOTE_H_

#include <string>
#include <vector>

#include "gmcore/status.h"

namespace goldminer {

// `quote_words` joins them so that `split_words` gives them back (single
// quotes where needed); split_words takes plain words, '...' and "..."
// (with \" \\ \$ \` inside) and backslash escapes, and refuses an
// unterminated quote.
std::string quote_words(const std::vector<std::string>& words);
Expected<std::vector<std::string>> split_words(const std::string& text);

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_SHELL_QUOTE_H_
