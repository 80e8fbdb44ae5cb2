#include "launch/job_options.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

std::string refusal(const std::string& text, const AdminConfig& admin = AdminConfig()) {
  auto o = parse_job_options(text, admin);
  return o.ok() ? "accepted" : o.status().message();
}

TEST(JobOptionsTest, EmptyValueTakesDefaults) {
  auto o = parse_job_options("", AdminConfig());
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->canonical(), "dw=1,dw-max=8,cpus-per-dw=2,transport=ucx,mode=elastic");
}

TEST(JobOptionsTest, AValueLongerThanTheLimitIsRefusedUnread) {
  // Every key at its longest form fits with room to spare.
  const std::string longest = "dw=0000000000000001,dw-max=0000000000000008,cpus-per-dw=0000000000000002,"
                              "transport=ucx,mode=elastic";
  EXPECT_EQ(refusal(longest), "accepted");
  EXPECT_EQ(refusal(std::string(kMaxJobOptionsLength, ',')), "accepted");
  const std::string huge = "dw=1," + std::string(64 << 20, 'x');
  EXPECT_EQ(refusal(huge), "goldminer: the option's value is " + std::to_string(huge.size()) +
                               " bytes long, more than the limit of 1024 (keys: dw, dw-max, cpus-per-dw, "
                               "transport, mode)");
  EXPECT_EQ(refusal(std::string(kMaxJobOptionsLength + 1, ',')).substr(0, 42),
            "goldminer: the option's value is 1025 byte");
}

TEST(JobOptionsTest, AllKeys) {
  auto o = parse_job_options("dw=3,dw-max=6,cpus-per-dw=4,transport=ucx,mode=static",
                             AdminConfig());
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->dw, 3);
  EXPECT_EQ(o->dw_max, 6);
  EXPECT_EQ(o->cpus_per_dw, 4);
  EXPECT_EQ(o->transport, Transport::kUcx);
  EXPECT_EQ(o->mode, ScalingMode::kStatic);
}

TEST(JobOptionsTest, CanonicalFormParsesBackToItself) {
  auto o = parse_job_options("dw=2,transport=mpi", AdminConfig());
  ASSERT_TRUE(o.ok()) << o.status().message();
  auto again = parse_job_options(o->canonical(), AdminConfig());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->canonical(), o->canonical());
}

TEST(JobOptionsTest, EachBadValueIsRefusedWithItsReason) {
  EXPECT_EQ(refusal("dw-max=0"), "goldminer: dw-max: invalid value '0': expected an integer >= 1");
  EXPECT_EQ(refusal("dw=-1"), "goldminer: dw: invalid value '-1': expected an integer >= 0");
  EXPECT_EQ(refusal("cpus-per-dw=two"),
            "goldminer: cpus-per-dw: invalid value 'two': expected an integer from 1 to 1024");
  EXPECT_EQ(refusal("transport=tcp"),
            "goldminer: transport: invalid value 'tcp': expected one of ucx, mpi");
  EXPECT_EQ(refusal("mode=auto"),
            "goldminer: mode: invalid value 'auto': expected one of elastic, static");
  EXPECT_EQ(refusal("workers=3"),
            "goldminer: workers: unknown key (known: dw, dw-max, cpus-per-dw, transport, mode)");
}

TEST(JobOptionsTest, CrossFieldRules) {
  EXPECT_EQ(refusal("dw=5,dw-max=4"), "goldminer: dw: invalid value '5': more than dw-max (4)");
  EXPECT_EQ(refusal("transport=mpi,mode=elastic"),
            "goldminer: mode: invalid value 'elastic': transport=mpi runs a fixed set of workers; "
            "use mode=static or transport=ucx");
  auto mpi = parse_job_options("transport=mpi", AdminConfig());
  ASSERT_TRUE(mpi.ok());
  EXPECT_EQ(mpi->mode, ScalingMode::kStatic);
}

TEST(JobOptionsTest, SiteLimitsCapDefaultsAndRefuseLargerRequests) {
  AdminConfig admin;
  admin.max_dw_per_job = 4;
  admin.max_cpus_per_dw = 8;
  auto o = parse_job_options("", admin);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->dw_max, 4);  // default 8 capped
  EXPECT_EQ(refusal("dw-max=5", admin),
            "goldminer: dw-max: invalid value '5': exceeds this cluster's limit of 4 "
            "(plugstack.conf max_dw_per_job)");
  EXPECT_EQ(refusal("dw=6", admin),
            "goldminer: dw: invalid value '6': more than dw-max (4) (plugstack.conf max_dw_per_job)");
  EXPECT_EQ(refusal("cpus-per-dw=9", admin),
            "goldminer: cpus-per-dw: invalid value '9': exceeds this cluster's limit of 8 "
            "(plugstack.conf max_cpus_per_dw)");
}

TEST(JobOptionsTest, ExplicitDwRaisesTheDefaultCeiling) {
  auto o = parse_job_options("dw=12", AdminConfig());
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->dw_max, 12);
}

TEST(JobOptionsTest, EnvironmentCarriesEverySettingOnce) {
  AdminConfig admin;
  auto o = parse_job_options("dw=2", admin);
  ASSERT_TRUE(o.ok());
  auto env = job_environment(*o, admin);
  std::vector<std::pair<std::string, std::string>> expected = {
      {"GOLDMINER_DW", "2"},         {"GOLDMINER_DW_MAX", "8"},
      {"GOLDMINER_CPUS_PER_DW", "2"}, {"GOLDMINER_TRANSPORT", "ucx"},
      {"GOLDMINER_MODE", "elastic"},
      {"GOLDMINER_OPTIONS", "dw=2,dw-max=8,cpus-per-dw=2,transport=ucx,mode=elastic"}};
  EXPECT_EQ(env, expected);

  admin.dw_partition = "cpu";
  admin.dw_qos = "dw";
  env = job_environment(*o, admin);
  EXPECT_EQ(env[5], (std::pair<std::string, std::string>{"GOLDMINER_DW_PARTITION", "cpu"}));
  EXPECT_EQ(env[6], (std::pair<std::string, std::string>{"GOLDMINER_DW_QOS", "dw"}));
  EXPECT_EQ(env.size(), 8u) << "no ctld: neither its user nor munge's socket";

  admin.ctld = "ctl1:6830";
  admin.ctld_user = "slurm";
  admin.munge_socket = "/run/munge/munge.socket.2";
  env = job_environment(*o, admin);
  EXPECT_EQ(env[7], (std::pair<std::string, std::string>{"GOLDMINER_CTLD", "ctl1:6830"}));
  EXPECT_EQ(env[8], (std::pair<std::string, std::string>{"GOLDMINER_CTLD_USER", "slurm"}));
  EXPECT_EQ(env[9], (std::pair<std::string, std::string>{"GOLDMINER_MUNGE_SOCKET", "/run/munge/munge.socket.2"}));
}

TEST(JobOptionsTest, UsageNamesEveryKey) {
  std::string usage = job_option_usage();
  EXPECT_EQ(usage.rfind("[goldminer]", 0), 0u) << usage;
  for (const auto& row : job_option_table())
    EXPECT_NE(usage.find(row.key), std::string::npos) << row.key;
}

TEST(AdminConfigTest, ParsesAndRejectsStrictly) {
  auto a = parse_admin_config({"dw_partition=cpu", "max_dw_per_job=16"});
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->dw_partition, "cpu");
  EXPECT_EQ(a->max_dw_per_job, 16);
  EXPECT_EQ(a->max_cpus_per_dw, 16);
  EXPECT_EQ(a->dw_command.rfind('/', 0), 0u) << "the installed goldminer-dw by default";
  EXPECT_NE(a->dw_command.find("/goldminer-dw"), std::string::npos) << a->dw_command;
  auto dw = parse_admin_config({"dw_command=/opt/gm/bin/goldminer-dw"});
  ASSERT_TRUE(dw.ok()) << dw.status().message();
  EXPECT_EQ(dw->dw_command, "/opt/gm/bin/goldminer-dw");
  for (const char* arg : {"dw_command=goldminer-dw", "dw_command=/opt/gm bin/goldminer-dw",
                          "dw_command=/opt/$(id)/goldminer-dw"}) {
    auto refused = parse_admin_config({arg});
    ASSERT_FALSE(refused.ok()) << arg;
    EXPECT_NE(refused.status().message().find("goldminer: plugstack.conf: dw_command: invalid value"),
              std::string::npos)
        << refused.status().message();
  }

  auto bad = parse_admin_config({"dw_partion=cpu"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "goldminer: plugstack.conf: dw_partion: unknown key (known: dw_partition, dw_qos, "
            "max_dw_per_job, max_cpus_per_dw, dw_command, dw_network, dw_ports, port_registry, firewall, "
            "firewall_admit, nft, ctld, ctld_user, munge_socket, slurm_bindir, slurm_command_timeout)");
  auto firewall = parse_admin_config({"firewall=nftables", "firewall_admit=10.1.0.0/16,fd00::/64"});
  ASSERT_TRUE(firewall.ok()) << firewall.status().message();
  EXPECT_TRUE(firewall->firewall);
  EXPECT_EQ(firewall->firewall_admit, "10.1.0.0/16,fd00::/64");
  EXPECT_EQ(firewall->nft, "/usr/sbin/nft");
  EXPECT_FALSE(parse_admin_config({}).value().firewall) << "off unless the site turns it on";
  EXPECT_EQ(parse_admin_config({"firewall=iptables"}).status().message(),
            "goldminer: plugstack.conf: firewall: invalid value 'iptables': expected one of none, nftables");
  EXPECT_EQ(parse_admin_config({"firewall_admit=cpu-nodes"}).status().message(),
            "goldminer: plugstack.conf: firewall_admit: invalid value 'cpu-nodes': 'cpu-nodes': not an IPv4 or IPv6 "
            "address or ADDRESS/PREFIX");
  auto ports = parse_admin_config({"dw_ports=41000-41099", "port_registry=/run/gm/ports"});
  ASSERT_TRUE(ports.ok()) << ports.status().message();
  EXPECT_EQ(ports->dw_ports.low, 41000);
  EXPECT_EQ(ports->dw_ports.size(), 100);
  EXPECT_EQ(ports->port_registry, "/run/gm/ports");
  EXPECT_EQ(parse_admin_config({}).value().dw_ports.low, 20000) << "the default range";
  EXPECT_EQ(parse_admin_config({"dw_ports=41000"}).status().message(),
            "goldminer: plugstack.conf: dw_ports: invalid value '41000': expected LOW-HIGH, for example 20000-39999");
  auto ctld = parse_admin_config({"ctld=ctl1:6830", "ctld_user=slurm", "munge_socket=/run/munge/munge.socket.2"});
  ASSERT_TRUE(ctld.ok()) << ctld.status().message();
  EXPECT_EQ(ctld->ctld, "ctl1:6830");
  EXPECT_TRUE(parse_admin_config({"ctld=[::1]:6830"}).ok());
  EXPECT_EQ(parse_admin_config({"ctld=ctl1"}).status().message(),
            "goldminer: plugstack.conf: ctld: invalid value 'ctl1': expected HOST:PORT");
  EXPECT_EQ(parse_admin_config({"ctld=ctl1:70000"}).status().message(),
            "goldminer: plugstack.conf: ctld: invalid value 'ctl1:70000': expected 0 to 65535");
  auto zero = parse_admin_config({"max_dw_per_job=0"});
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message(),
            "goldminer: plugstack.conf: max_dw_per_job: invalid value '0': expected an integer "
            "from 1 to 100000");
}

}  // namespace
}  // namespace goldminer
