// JSON text for the reports the tools print (goldminer-split's, goldminer-
// ctld's): one quoted, escaped string.
#ifndef GOLDMINER_GMCORE_JSON_H_
#define GOLDMINER_GMCORE_JSON_H_

#include <string>

namespace goldminer {

// `s` as a JSON string literal: quotes, backslashes and control
// characters escaped.
std::string json_string(const std::string& s);

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_JSON_H_
