#include "launch/job_firewall_nft.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "launch/slurm_cli.h"
#include "launch/subprocess.h"

namespace goldminer {

namespace {

Expected<CommandResult> run(const FirewallTools& tools, std::vector<std::string> argv) {
  CommandSpec spec;
  spec.argv = std::move(argv);
  spec.env = tools.env;
  spec.timeout_s = tools.timeout_s;
  spec.daemon_limits = true;
  return run_command_within(spec, tools.timeout_source);
}

std::string command_text(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

// Runs argv; an error names the command and its last line when it fails.
Expected<std::string> output_of(const FirewallTools& tools, const std::vector<std::string>& argv) {
  auto r = run(tools, argv);
  if (!r.ok()) return Status::error(command_text(argv) + ": " + r.status().message());
  if (r->exit_code != 0) return Status::error(command_text(argv) + ": " + describe(*r));
  return r->output;
}

// Slurm's commands (launch/slurm_cli.h) as this file runs its others:
// from tools' paths, with tools' environment and limits. Only scontrol is
// asked.
SlurmCommand slurm_commands(const FirewallTools& tools) {
  return [&tools](const std::string& name, const std::vector<std::string>& args) -> Expected<CommandResult> {
    if (name != "scontrol") return Status::error(name + ": not a command the job's firewall runs");
    std::vector<std::string> argv{tools.scontrol};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(tools, argv);
  };
}

Status write_file(const std::string& path, const std::string& text) {
  ::unlink(path.c_str());  // a crash's leftover
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::error("cannot create " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(path.c_str());
      return Status::error("cannot write " + path + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status();
}

}  // namespace

Expected<std::vector<std::string>> node_addresses(const FirewallTools& tools, const std::vector<std::string>& nodelists) {
  std::string joined;
  for (const std::string& l : nodelists)
    if (!l.empty()) joined += (joined.empty() ? "" : ",") + l;
  if (joined.empty()) return std::vector<std::string>();
  auto listed = host_names(slurm_commands(tools), joined);
  if (!listed.ok()) return listed.status();
  const std::vector<std::string>& hosts = *listed;
  std::vector<std::string> argv{tools.getent, "ahosts"};
  argv.insert(argv.end(), hosts.begin(), hosts.end());
  auto r = run(tools, argv);
  if (!r.ok()) return Status::error(command_text(argv) + ": " + r.status().message());
  if (r->exit_code != 0) {
    // getent says only that some key was not found: name it.
    for (const std::string& h : hosts) {
      auto one = run(tools, {tools.getent, "ahosts", h});
      if (!one.ok()) return Status::error("getent ahosts " + h + ": " + one.status().message());
      if (one->exit_code != 0 || getent_addresses(one->output).empty())
        return Status::error("the job's node " + h + " has no address (getent ahosts " + h + ": " + describe(*one) + ")");
    }
    return Status::error(command_text(argv) + ": " + describe(*r));
  }
  std::vector<std::string> addresses = getent_addresses(r->output);
  if (addresses.empty()) return Status::error(command_text(argv) + ": no addresses");
  return addresses;
}

Expected<std::string> open_job_firewall(const FirewallTools& tools, const JobFirewall& f,
                                        const std::function<bool(pid_t, uint64_t)>& alive) {
  auto script = firewall_script(f);
  if (!script.ok()) return script.status();
  auto listed = output_of(tools, {tools.nft, "list", "tables"});
  if (!listed.ok()) return Status::error(listed.status().message() + " (" + tools.nft_source + ")");
  for (const FirewallTable& t : firewall_tables(*listed)) {
    if (alive(t.pid, t.start)) continue;
    Status st = close_job_firewall(tools, t.name);
    if (!st.ok()) return Status::error("removing the table of a step that is gone: " + st.message());
  }
  const std::string name = firewall_table_name(f.job, f.pid, f.start);
  const std::string path = tools.script_dir + "/." + name + ".nft";
  Status st = write_file(path, *script);
  if (!st.ok()) return st;
  auto applied = output_of(tools, {tools.nft, "-f", path});
  ::unlink(path.c_str());
  if (!applied.ok()) return applied.status();
  return name;
}

Status close_job_firewall(const FirewallTools& tools, const std::string& name) {
  const std::vector<std::string> argv{tools.nft, "delete", "table", "inet", name};
  auto r = run(tools, argv);
  if (!r.ok()) return Status::error(command_text(argv) + ": " + r.status().message());
  if (r->exit_code == 0 || r->output.find("No such file or directory") != std::string::npos) return Status();
  return Status::error(command_text(argv) + ": " + describe(*r));
}

}  // namespace goldminer
