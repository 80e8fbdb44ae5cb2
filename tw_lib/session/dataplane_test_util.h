// Helpers shared by the data plane's tests (tests/dataplane_test): temp
// folders, input files, child processes with their output captured, and
// the per-epoch lines goldminer-consume --json prints.
#ifndef GOLDMINER_TW_LIB_DATAPLANE_TEST_UTIL_H_
#define GOLDMINER_TW_LIB_DATAPLANE_TEST_UTIL_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "goldminer/session.h"

namespace goldminer::testing {

namespace fs = std::filesystem;

inline std::string builddir() {
  const char* b = std::getenv("GOLDMINER_BUILDDIR");
  return b != nullptr ? b : ".";
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gm-dataplane-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
inline int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
    port = ntohs(sa.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

inline void write_text(const std::string& path, int lines) {
  std::ofstream out(path);
  for (int i = 0; i < lines; ++i) out << "sample " << i << " " << std::string(i % 37, 'x') << "\n";
}

// Options of a session over `records` lines written to `d`/t.txt, in
// batches of 64, with the secret "x".
inline SessionOptions text_session(const TempDir& d, int records, const std::string& listen) {
  write_text(d / "t.txt", records);
  SessionOptions o;
  o.listen = listen;
  o.secret = "x";
  o.input = "text:" + (d / "t.txt");
  o.batch_size = 64;
  return o;
}

// Criteo raw TSV: label, 13 ints, 26 hex hashes; some fields empty.
inline void write_criteo(const std::string& path, int rows, int bad_row = -1) {
  std::mt19937 rng(7);
  std::ofstream out(path);
  for (int r = 0; r < rows; ++r) {
    if (r == bad_row) {
      out << "1\tnot-a-number\n";
      continue;
    }
    out << (rng() % 2);
    for (int i = 0; i < 13; ++i) {
      out << '\t';
      if (rng() % 10) out << (rng() % 1000);
    }
    for (int i = 0; i < 26; ++i) {
      out << '\t';
      if (rng() % 10) {
        char h[9];
        std::snprintf(h, sizeof h, "%08x", static_cast<unsigned>(rng()));
        out << h;
      }
    }
    out << '\n';
  }
}

struct Epoch {
  std::map<std::string, double> v;
  std::map<std::string, std::string> text;  // string values (order_digest)
};

inline std::vector<Epoch> parse_json_lines(const std::string& out) {
  std::vector<Epoch> epochs;
  std::istringstream in(out);
  std::string line;
  const std::regex kv("\"([a-z_]+)\": ([0-9.eE+-]+)");
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    Epoch e;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), kv); it != std::sregex_iterator(); ++it)
      e.v[(*it)[1]] = std::stod((*it)[2]);
    const std::regex ks("\"([a-z_]+)\": \"([^\"]*)\"");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), ks); it != std::sregex_iterator(); ++it)
      e.text[(*it)[1]] = (*it)[2];
    epochs.push_back(e);
  }
  return epochs;
}

// A child process with its stdout and stderr captured by reader threads.
class Process {
 public:
  Process(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
    // argv and the environment are built before the fork: the child of a
    // threaded process may not allocate (another thread may have held the
    // allocator's lock at the fork; under ASan the child then waited for
    // good in setenv's malloc).
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<std::string> vars;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string var = *e;
      if (env.count(var.substr(0, var.find('='))) == 0) vars.push_back(var);
    }
    for (auto& [k, v] : env) vars.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& v : vars) envp.push_back(const_cast<char*>(v.c_str()));
    envp.push_back(nullptr);
    int out[2], err[2];
    EXPECT_EQ(pipe(out), 0);
    EXPECT_EQ(pipe(err), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      dup2(err[1], 2);
      close(out[0]);
      close(err[0]);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    out_reader_ = std::thread([this, fd = out[0]] { drain(fd, &out_); });
    err_reader_ = std::thread([this, fd = err[0]] { drain(fd, &err_); });
  }
  ~Process() {
    if (!waited_) {
      kill(pid_, SIGKILL);
      wait();
    }
  }
  pid_t pid() const { return pid_; }
  // Waits for the exit; returns the exit status (128+signal if killed).
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    waited_ = true;
    out_reader_.join();
    err_reader_.join();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string out() {
    std::lock_guard<std::mutex> l(mu_);
    return out_;
  }
  std::string err() {
    std::lock_guard<std::mutex> l(mu_);
    return err_;
  }

 private:
  void drain(int fd, std::string* to) {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
      std::lock_guard<std::mutex> l(mu_);
      to->append(buf, static_cast<size_t>(n));
    }
    close(fd);
  }
  pid_t pid_;
  bool waited_ = false;
  std::mutex mu_;
  std::string out_, err_;
  std::thread out_reader_, err_reader_;
};

inline const std::map<std::string, std::string> kEnv = {{"UCX_NET_DEVICES", "lo"},
                                                        {"GOLDMINER_SECRET", "s3cret-for-tests"}};

// Runs `args` with `env` and expects it to be refused: exit 2, `part` in
// what it printed on stderr.
inline void expect_refused(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                           const std::string& part) {
  Process p(args, env);
  EXPECT_EQ(p.wait(), 2) << args[0] << " " << (args.size() > 1 ? args[1] : "") << ": " << p.err();
  EXPECT_NE(p.err().find(part), std::string::npos) << p.err();
}

inline std::vector<std::string> consume_args(const std::vector<std::string>& extra) {
  std::vector<std::string> a = {builddir() + "/goldminer-consume", "--json"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// The pids of the workers a goldminer-consume started (it prints them).
inline std::vector<pid_t> worker_pids(Process* p) {
  std::vector<pid_t> pids;
  const std::regex re("worker pid ([0-9]+)");
  const std::string err = p->err();
  for (auto it = std::sregex_iterator(err.begin(), err.end(), re); it != std::sregex_iterator(); ++it)
    pids.push_back(std::stoi((*it)[1]));
  return pids;
}

inline void expect_clean(const std::vector<Epoch>& epochs, size_t n, double samples) {
  ASSERT_EQ(epochs.size(), n);
  for (const Epoch& e : epochs) {
    EXPECT_EQ(e.v.at("duplicates"), 0) << "epoch " << e.v.at("epoch");
    EXPECT_EQ(e.v.at("missing"), 0) << "epoch " << e.v.at("epoch");
    EXPECT_EQ(e.v.at("samples"), samples) << "epoch " << e.v.at("epoch");
    EXPECT_EQ(e.v.at("unique_samples"), samples);
  }
}

}  // namespace goldminer::testing

#endif  // GOLDMINER_TW_LIB_DATAPLANE_TEST_UTIL_H_
