#include "tw_lib/session/session_option_docs.h"

#include <sstream>
#include <stdexcept>

#include "goldminer/session.h"

namespace goldminer {
namespace {

SharedSessionOption row(std::string option, std::string value_doc, std::string default_value, std::string help) {
  std::string keyword = option;
  for (char& c : keyword)
    if (c == '-') c = '_';
  return {std::move(option), std::move(keyword), std::move(value_doc), std::move(default_value), std::move(help)};
}

std::vector<SharedSessionOption> make_rows() {
  const SessionOptions d;
  return {
      row("batch-size", "N", std::to_string(d.batch_size), "samples per batch (the last batch of a split may be smaller)"),
      row("shuffle-buffer", "N", std::to_string(d.shuffle_buffer),
          "samples of the streaming shuffle buffer within each split; 0 keeps record order"),
      row("records-per-split", "N", std::to_string(d.records_per_split),
          "consecutive records per split, the unit a worker leases; 0: 16 batches"),
      row("max-bad-records", "N", std::to_string(d.max_bad_records),
          "corrupt records skipped (and counted) per epoch before it is an error"),
      row("queue-batches", "N", std::to_string(d.queue_batches),
          "bound of the queue of received batches (workers get credits while it has room)"),
      row("split-retries", "N", std::to_string(d.split_retries),
          "times a split that failed on a worker through its environment (its Python process killed, a read "
          "error) is re-leased in an epoch before the run fails"),
      row("drop-last", "", "",
          "with ranks: every rank takes as many batches as the one with the fewest and leaves out the rest; "
          "without it, ranks short of batches take some smaller ones"),
      row("pad", "", "",
          "with ranks: a rank with a record fewer than the others reads another rank's first record again (so "
          "every rank has as many)"),
  };
}

}  // namespace

const std::vector<SharedSessionOption>& shared_session_options() {
  static const std::vector<SharedSessionOption> rows = make_rows();
  return rows;
}

const SharedSessionOption& shared_session_option(const std::string& option) {
  for (const SharedSessionOption& r : shared_session_options())
    if (r.option == option) return r;
  throw std::out_of_range("no shared session option '" + option + "'");
}

std::string session_keyword_docs(size_t column, size_t width) {
  std::string out;
  for (const SharedSessionOption& r : shared_session_options()) {
    const std::string python_default = r.value_doc.empty() ? "False" : r.default_value;
    std::string text = r.help + " (default " + python_default + ").";
    std::string line = "  " + r.keyword;
    line += line.size() < column ? std::string(column - line.size(), ' ') : "\n" + std::string(column, ' ');
    size_t room = width - column;
    std::istringstream words(text);
    std::string word;
    size_t used = 0;
    while (words >> word) {
      if (used > 0 && used + 1 + word.size() > room) {
        out += line + "\n";
        line = std::string(column, ' ');
        used = 0;
      }
      if (used > 0) {
        line += ' ';
        ++used;
      }
      line += word;
      used += word.size();
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace goldminer
