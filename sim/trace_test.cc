#include "sim/trace.h"

#include <gtest/gtest.h>

#include "sim/test_util.h"

namespace goldminer::sim {
namespace {

using testing::kNodeHeader;
using testing::kPodHeader;
using testing::TempFile;

// The error `read` gives for the file `f`, its path written "FILE"; "read
// without an error" if there was none.
template <typename Read>
std::string error_of(Read read, const TempFile& f) {
  const auto result = read(f.path());
  if (result.ok()) return "read without an error";
  std::string message = result.status().message();
  if (message.rfind(f.path(), 0) == 0) message.replace(0, f.path().size(), "FILE");
  return message;
}

TEST(TraceTest, ReadsPodsIncludingNeverScheduledOnes) {
  TempFile f(std::string(kPodHeader) +
             "p1,8000,1024,1,1000,,LS,Running,100,700,110\r\n"
             "p2,1000,512,1,320,,BE,Pending,120,,\n"
             "\n"
             "p3,4000,512,0,0,,BE,Succeeded,130,230,130\n");
  auto pods = read_pods(f.path());
  ASSERT_TRUE(pods.ok()) << pods.status().message();
  ASSERT_EQ(pods->size(), 3u);
  EXPECT_EQ((*pods)[0].run_time(), 590);
  EXPECT_EQ((*pods)[0].gpu_total_milli(), 1000);
  EXPECT_FALSE((*pods)[1].scheduled);
  EXPECT_EQ((*pods)[1].gpu_total_milli(), 320);
  EXPECT_EQ((*pods)[2].line, 5) << "blank line counted";
}

TEST(TraceTest, ColumnsAreFoundByName) {
  TempFile f("scheduled_time,name,extra,num_gpu,gpu_milli,cpu_milli,memory_mib,qos,pod_phase,"
             "creation_time,deletion_time\n"
             "10,p1,x,2,1000,16000,1,LS,Running,5,20\n");
  auto pods = read_pods(f.path());
  ASSERT_TRUE(pods.ok()) << pods.status().message();
  EXPECT_EQ((*pods)[0].num_gpu, 2);
  EXPECT_EQ((*pods)[0].run_time(), 10);
}

TEST(TraceTest, MissingColumnNamesFileLineAndColumn) {
  TempFile f("name,cpu_milli,memory_mib,gpu_milli,qos,pod_phase,creation_time,deletion_time,"
             "scheduled_time\np1,1,1,1,LS,Running,1,2,1\n");
  EXPECT_EQ(error_of(read_pods, f), "FILE:1: missing column 'num_gpu'");
}

TEST(TraceTest, BadNumberNamesFileLineAndColumn) {
  TempFile f(std::string(kPodHeader) + "p1,8000,1024,1,1000,,LS,Running,100,700,110\n"
                                       "p2,8k,1024,1,1000,,LS,Running,100,700,110\n");
  EXPECT_EQ(error_of(read_pods, f), "FILE:3: column 'cpu_milli': invalid number '8k'");
}

TEST(TraceTest, ShortRowAndInconsistentTimesAreErrors) {
  TempFile short_row(std::string(kPodHeader) + "p1,8000,1024,1\n");
  EXPECT_EQ(error_of(read_pods, short_row), "FILE:2: column 'gpu_milli': missing field (the row has 4 fields)");
  TempFile backwards(std::string(kPodHeader) + "p1,8000,1024,1,1000,,LS,Running,100,50,110\n");
  EXPECT_EQ(error_of(read_pods, backwards), "FILE:2: column 'deletion_time': 50 is before scheduled_time 110");
  TempFile negative(std::string(kPodHeader) + "p1,-5,1024,1,1000,,LS,Running,100,150,110\n");
  EXPECT_EQ(error_of(read_pods, negative), "FILE:2: column 'cpu_milli': negative value '-5'");
}

TEST(TraceTest, NodesAndUnreadableFiles) {
  TempFile f(std::string(kNodeHeader) + "n1,96000,786432,8,V100M16\nn2,32000,262144,0,\n");
  auto nodes = read_nodes(f.path());
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_EQ((*nodes)[0].gpus, 8);
  EXPECT_EQ((*nodes)[1].cpu_milli, 32000);
  auto missing = read_nodes("/nonexistent/nodes.csv");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "/nonexistent/nodes.csv: cannot open: No such file or directory");
  TempFile empty("");
  EXPECT_EQ(error_of(read_nodes, empty), "FILE:1: empty file (expected a header)");
}

TEST(TraceTest, CsvQuoting) {
  EXPECT_EQ(split_csv_line("a,\"b,c\",\"d\"\"e\","),
            (std::vector<std::string>{"a", "b,c", "d\"e", ""}));
}

TEST(TraceTest, ReadsTheRealAlibabaSlice) {
  std::string dir = testing::shared_data_dir();
  if (dir.empty()) GTEST_SKIP() << "../shared/data is absent: the real trace is not read";
  auto pods = read_pods(dir + "/traces/alibaba-gpu-v2023/dev_slice.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().message();
  EXPECT_EQ(pods->size(), 3094u);
  auto nodes = read_nodes(dir + "/traces/alibaba-gpu-v2023/nodes.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_EQ(nodes->size(), 1523u);
  int gpus = 0;
  for (const auto& n : *nodes) gpus += n.gpus;
  EXPECT_EQ(gpus, 6212);
}

}  // namespace
}  // namespace goldminer::sim
