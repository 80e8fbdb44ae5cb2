// The options goldminer-consume (--records-per-split) and goldminer.Session
// (records_per_split=) share: one name, one default and one help text for
// both. goldminer-consume's option table (its --help and the OPTIONS of
// goldminer-consume(1)) takes its rows' text from here, and
// goldminer._session's docstring lists these keywords from here.
#ifndef GOLDMINER_TW_LIB_SESSION_SESSION_OPTION_DOCS_H_
#define GOLDMINER_TW_LIB_SESSION_SESSION_OPTION_DOCS_H_

#include <string>
#include <vector>

namespace goldminer {

struct SharedSessionOption {
  std::string option;         // goldminer-consume's, e.g. "records-per-split"
  std::string keyword;        // goldminer.Session's, e.g. "records_per_split"
  std::string value_doc;      // e.g. "N"; "" for a switch
  std::string default_value;  // SessionOptions{}'s, as text ("" for a switch)
  std::string help;           // one sentence, no trailing period
};

// Every shared option, in the order goldminer.Session documents them.
const std::vector<SharedSessionOption>& shared_session_options();

// The row of goldminer-consume's `option`; a name that is not one is a
// programming error (std::out_of_range).
const SharedSessionOption& shared_session_option(const std::string& option);

// The keywords' part of goldminer.Session's docstring: per option its
// keyword in a column of `column` characters, then its help and default,
// wrapped at `width` characters.
std::string session_keyword_docs(size_t column = 19, size_t width = 92);

}  // namespace goldminer

#endif  // GOLDMINER_TW_LIB_SESSION_SESSION_OPTION_DOCS_H_
