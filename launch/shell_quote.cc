#include "launch/shell_quote.h"

namespace goldminer {

std::string quote_words(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    const bool plain = !w.empty() && w.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                         "0123456789-_=./,:%+@") == std::string::npos;
    if (plain) {
      out += w;
      continue;
    }
    out += '\'';
    for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

Expected<std::vector<std::string>> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const size_t close = text.find('\'', i + 1);
      if (close == std::string::npos)
        return Status::error("unterminated ' at offset " + std::to_string(i));
      word.append(text, i + 1, close - i - 1);
      i = close;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() && std::string("\"\\$`").find(text[j + 1]) != std::string::npos)
          ++j;
        word += text[j];
      }
      if (j >= text.size()) return Status::error("unterminated \" at offset " + std::to_string(i));
      i = j;
    } else if (c == '\\') {
      if (i + 1 >= text.size()) return Status::error("a lone \\ at the end");
      word += text[++i];
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

}  // namespace goldminer
