#include "launch/job_firewall.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>
#include <tuple>

namespace goldminer {

namespace {

constexpr char kTablePrefix[] = "goldminer_j";

// Clears the bits of `bytes` past the first `prefix`.
void mask(unsigned char* bytes, size_t size, int prefix) {
  for (size_t i = 0; i < size; ++i) {
    const int keep = std::clamp(prefix - static_cast<int>(i) * 8, 0, 8);
    bytes[i] &= static_cast<unsigned char>(0xff00 >> keep);
  }
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 19 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

}  // namespace

std::string firewall_table_name(uint32_t job, pid_t pid, uint64_t start) {
  return kTablePrefix + std::to_string(job) + "_p" + std::to_string(pid) + "_s" + std::to_string(start);
}

Expected<AdmittedNet> parse_admitted_net(const std::string& text) {
  const std::string what = "'" + text + "'";
  const size_t slash = text.find('/');
  const std::string address = text.substr(0, slash);
  unsigned char bytes[16] = {};
  AdmittedNet net;
  if (inet_pton(AF_INET, address.c_str(), bytes) == 1) {
    net.v6 = false;
  } else if (inet_pton(AF_INET6, address.c_str(), bytes) == 1) {
    net.v6 = true;
  } else {
    return Status::error(what + ": not an IPv4 or IPv6 address or ADDRESS/PREFIX");
  }
  const int bits = net.v6 ? 128 : 32;
  int prefix = bits;
  if (slash != std::string::npos) {
    const std::string p = text.substr(slash + 1);
    if (!all_digits(p) || p.size() > 3 || std::stoi(p) > bits)
      return Status::error(what + ": the prefix length must be 0 to " + std::to_string(bits));
    prefix = std::stoi(p);
  }
  mask(bytes, net.v6 ? 16 : 4, prefix);
  char out[INET6_ADDRSTRLEN] = "";
  inet_ntop(net.v6 ? AF_INET6 : AF_INET, bytes, out, sizeof out);
  net.text = out;
  if (prefix != bits) net.text += "/" + std::to_string(prefix);
  return net;
}

Expected<std::vector<AdmittedNet>> parse_admitted_list(const std::string& text) {
  std::vector<AdmittedNet> nets;
  if (text.empty()) return nets;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto net = parse_admitted_net(item);
    if (!net.ok()) return net.status();
    nets.push_back(*net);
  }
  if (text.back() == ',') return Status::error("'" + text + "': an empty entry after the last comma");
  return nets;
}

Expected<std::string> firewall_script(const JobFirewall& f) {
  if (f.ports.empty()) return Status::error("firewall: no port to guard");
  std::set<int> ports;
  for (int p : f.ports) {
    if (p < 1 || p > 65535) return Status::error("firewall: port " + std::to_string(p) + " is not 1 to 65535");
    ports.insert(p);
  }
  std::vector<std::string> v4{"127.0.0.0/8"}, v6{"::1"};
  std::set<std::string> seen{"127.0.0.0/8", "::1"};
  for (const std::string& a : f.admitted) {
    auto net = parse_admitted_net(a);
    if (!net.ok()) return Status::error("firewall: admitted source " + net.status().message());
    if (seen.insert(net->text).second) (net->v6 ? v6 : v4).push_back(net->text);
  }
  std::vector<std::string> port_texts;
  for (int p : ports) port_texts.push_back(std::to_string(p));
  const std::string table = "inet " + firewall_table_name(f.job, f.pid, f.start);
  const std::string dports = "tcp dport { " + join(port_texts) + " }";
  std::ostringstream s;
  // Creating it first makes the delete valid when it does not exist yet.
  s << "table " << table << "\n"
    << "delete table " << table << "\n"
    << "table " << table << " {\n";
  for (const auto& [name, type, elements] :
       {std::tuple{"admitted_v4", "ipv4_addr", &v4}, std::tuple{"admitted_v6", "ipv6_addr", &v6}}) {
    s << "  set " << name << " {\n"
      << "    type " << type << "\n"
      << "    flags interval\n"
      << "    auto-merge\n"
      << "    elements = { " << join(*elements) << " }\n"
      << "  }\n";
  }
  s << "  chain input {\n"
    << "    type filter hook input priority -10; policy accept;\n"
    << "    " << dports << " ip saddr != @admitted_v4 counter drop\n"
    << "    " << dports << " ip6 saddr != @admitted_v6 counter drop\n"
    << "  }\n"
    << "}\n";
  return s.str();
}

std::vector<FirewallTable> firewall_tables(const std::string& nft_list_tables) {
  std::vector<FirewallTable> tables;
  std::istringstream in(nft_list_tables);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string keyword, family, name, rest;
    if (!(words >> keyword >> family >> name) || (words >> rest)) continue;
    if (keyword != "table" || family != "inet" || name.rfind(kTablePrefix, 0) != 0) continue;
    // goldminer_jJOB_pPID_sSTART
    const std::string fields = name.substr(std::strlen(kTablePrefix));
    const size_t p = fields.find("_p"), s = fields.find("_s");
    if (p == std::string::npos || s == std::string::npos || s < p) continue;
    const std::string job = fields.substr(0, p), pid = fields.substr(p + 2, s - p - 2), start = fields.substr(s + 2);
    if (!all_digits(job) || !all_digits(pid) || !all_digits(start) || job.size() > 10 || pid.size() > 10) continue;
    FirewallTable t;
    t.name = name;
    t.job = static_cast<uint32_t>(std::stoull(job));
    t.pid = static_cast<pid_t>(std::stoll(pid));
    t.start = std::stoull(start);
    if (firewall_table_name(t.job, t.pid, t.start) == name) tables.push_back(t);
  }
  return tables;
}

std::vector<std::string> job_nodelists(const std::vector<std::string>& env) {
  std::string job, plain;
  std::vector<std::string> lists;
  auto add = [&](const std::string& l) {
    if (!l.empty() && std::find(lists.begin(), lists.end(), l) == lists.end()) lists.push_back(l);
  };
  for (const std::string& e : env) {
    const size_t eq = e.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = e.substr(0, eq), value = e.substr(eq + 1);
    if (name == "SLURM_JOB_NODELIST") job = value;
    if (name == "SLURM_NODELIST") plain = value;
  }
  add(job.empty() ? plain : job);
  for (const std::string& e : env)
    if (e.rfind("SLURM_JOB_NODELIST_HET_GROUP_", 0) == 0 && e.find('=') != std::string::npos)
      add(e.substr(e.find('=') + 1));
  return lists;
}

std::vector<std::string> getent_addresses(const std::string& output) {
  std::vector<std::string> addresses;
  std::set<std::string> seen;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string address;
    if (!(words >> address)) continue;
    unsigned char bytes[16];
    if (inet_pton(AF_INET, address.c_str(), bytes) != 1 && inet_pton(AF_INET6, address.c_str(), bytes) != 1) continue;
    if (seen.insert(address).second) addresses.push_back(address);
  }
  return addresses;
}

}  // namespace goldminer
