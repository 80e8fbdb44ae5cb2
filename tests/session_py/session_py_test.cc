// The Python goldminer.Session (tw_lib/python/python_session.cc) end to end: each
// case runs one check of tests/session_py/session_check.py with the staged
// package ($PYTHONPATH) and the built goldminer-dw, and asserts its exit
// status and the facts it prints.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

#ifndef GOLDMINER_TEST_PYTHON
#define GOLDMINER_TEST_PYTHON "python3"
#endif
#ifndef GOLDMINER_TEST_BUILDDIR
#define GOLDMINER_TEST_BUILDDIR "."
#endif
#ifndef GOLDMINER_TEST_SRCDIR
#define GOLDMINER_TEST_SRCDIR "."
#endif

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v ? v : fallback;
}

struct Result {
  int status = -1;
  std::string out;  // stdout (stderr goes to the test log as it comes)
};

Result run_script(const std::string& name, const std::string& args) {
  const std::string builddir = env_or("GOLDMINER_BUILDDIR", GOLDMINER_TEST_BUILDDIR);
  // The environment of every case: the staged package, the built worker,
  // UCX on loopback; nothing from an enclosing goldminer-run.
  setenv("PYTHONPATH", env_or("PYTHONPATH", builddir + "/python").c_str(), 1);
  setenv("GOLDMINER_DW_PROGRAM", (builddir + "/goldminer-dw").c_str(), 1);
  setenv("UCX_NET_DEVICES", "lo", 1);
  for (const char* v : {"GOLDMINER_LISTEN", "GOLDMINER_SECRET", "GOLDMINER_SECRET_FILE", "GOLDMINER_LOCAL_WORKERS",
                        "RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS"})
    unsetenv(v);
  const std::string script = env_or("GOLDMINER_SESSION_PY_TESTS", std::string(GOLDMINER_TEST_SRCDIR) +
                                    "/tests/session_py") + "/" + name;
  const std::string command =
      "timeout 300 " + env_or("PYTHON", GOLDMINER_TEST_PYTHON) + " " + script + " " + args;
  Result r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

Result check(const std::string& args) { return run_script("session_check.py", args); }

bool has(const Result& r, const std::string& line) { return r.out.find(line) != std::string::npos; }

#define EXPECT_PRINTS(r, text) EXPECT_TRUE(has(r, text)) << "expected \"" << (text) << "\" in:\n" << (r).out

void expect_exactly_once(const Result& r, const std::string& total) {
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "total_records " + total);
  for (const char* e : {"epoch 0: ", "epoch 1: "})
    EXPECT_PRINTS(r, e + ("samples " + total + " unique " + total + " duplicates 0 missing 0"));
  EXPECT_PRINTS(r, "\nOK");
}

TEST(SessionPy, TextUcxTwoWorkersEveryLineOncePerEpoch) {
  Result r = check("epochs text ucx 2 2");
  expect_exactly_once(r, "1537");
  EXPECT_PRINTS(r, "dtypes uint8 int64");
}

TEST(SessionPy, TextLocalTwoWorkersEveryLineOncePerEpoch) {
  Result r = check("epochs text local 2 2");
  expect_exactly_once(r, "1537");
  EXPECT_PRINTS(r, "dtypes uint8 int64");
}

TEST(SessionPy, CriteoUcxTwoWorkersTensorsAndValues) {
  Result r = check("epochs criteo ucx 2 2");
  expect_exactly_once(r, "1011");
  EXPECT_PRINTS(r, "dtypes float32 float32 int64");
}

TEST(SessionPy, CriteoLocalTwoWorkersTensorsAndValues) {
  Result r = check("epochs criteo local 2 2");
  expect_exactly_once(r, "1011");
  EXPECT_PRINTS(r, "dtypes float32 float32 int64");
}

void expect_zero_copy(const Result& r) {
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "batches 62");  // 2 epochs x 31 batches (splits of 100, batches of 64)
  EXPECT_PRINTS(r, "one storage per batch: yes");
  EXPECT_PRINTS(r, "64-byte aligned: yes");
  EXPECT_PRINTS(r, "held batch intact after 2 epochs: yes");
  EXPECT_PRINTS(r, "held batch intact after close: yes");
}

TEST(SessionPy, UcxBatchesAreViewsOfTheReceivedBuffer) { expect_zero_copy(check("zerocopy ucx")); }
TEST(SessionPy, LocalBatchesAreViewsOfTheReceivedBuffer) { expect_zero_copy(check("zerocopy local")); }

void expect_program(const Result& r) {
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "epoch 0: samples 1011 unique 1011 duplicates 0 missing 0");
  EXPECT_PRINTS(r, "program outputs match: ");
  EXPECT_PRINTS(r, "output dtypes float32 float32 int64 int64");
  EXPECT_PRINTS(r, "\nOK");
}

TEST(SessionPy, ScriptModuleProgramRunsOnUcxWorkers) { expect_program(check("program ucx module")); }
TEST(SessionPy, ProgramFileRunsOnLocalWorkers) { expect_program(check("program local path")); }
TEST(SessionPy, ProgramBytesRunOnUcxWorkers) { expect_program(check("program ucx bytes")); }

void expect_resume(const Result& r) {
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "state after 7 batches: epoch 0, 3 done, 1 partial");
  EXPECT_PRINTS(r, "= 1537, overlap 0, duplicates 0, missing 0");
  EXPECT_PRINTS(r, "next epoch: 1537 samples, 1537 unique");
  EXPECT_PRINTS(r, "resume with another seed: RuntimeError");
  EXPECT_PRINTS(r, "resume with another batch size: RuntimeError");
}

TEST(SessionPy, UcxResumeGivesExactlyTheRest) { expect_resume(check("resume ucx")); }
TEST(SessionPy, LocalResumeGivesExactlyTheRest) { expect_resume(check("resume local")); }

void expect_deterministic(const Result& r) {
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "deterministic: 1537 and 1537 samples; 3 workers x 2 threads give the 1-worker order: True");
  EXPECT_PRINTS(r, "deterministic resume: first 264 + rest 1273 continue the order: True");
}

TEST(SessionPy, UcxDeterministicOrderWhateverTheWorkers) { expect_deterministic(check("deterministic ucx")); }
TEST(SessionPy, LocalDeterministicOrderWhateverTheWorkers) { expect_deterministic(check("deterministic local")); }

void expect_ranks(const Result& r) {
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "from RANK and WORLD_SIZE: rank 1 of 3");
  EXPECT_PRINTS(r, "rank out of range: ValueError: goldminer.Session: rank 3 is not a rank of world_size 3");
  EXPECT_PRINTS(r, "OK");
}
TEST(SessionPy, UcxRanksReadEverySampleOnceWithEqualLengths) { expect_ranks(check("ranks ucx")); }
TEST(SessionPy, LocalRanksReadEverySampleOnceWithEqualLengths) { expect_ranks(check("ranks local")); }

TEST(SessionPy, DdpExampleTrainsTwoRanksInStepOnEverySampleOnce) {
  Result r = check("ddp");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* e : {"ddp epoch 0: ", "ddp epoch 1: "}) EXPECT_PRINTS(r, e);
  EXPECT_PRINTS(r, "id sums add up: True, parameters equal: True");
  EXPECT_PRINTS(r, "\nOK");
}

TEST(SessionPy, ErrorsNameTheFileAndTheCause) {
  Result r = check("errors");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "missing file: RuntimeError: ");
  EXPECT_PRINTS(r, "no_such_file.txt");
  EXPECT_PRINTS(r, "corrupt record: RuntimeError: ");
  EXPECT_PRINTS(r, "day_1.tsv");
  EXPECT_PRINTS(r, "workers exited: RuntimeError: ");
  EXPECT_PRINTS(r, "exit status 3");
  EXPECT_PRINTS(r, "missing goldminer-dw: RuntimeError: ");
  EXPECT_PRINTS(r, "Ctrl-C while waiting: KeyboardInterrupt");
  EXPECT_PRINTS(r, "timeout: RuntimeError: goldminer.Session: no batch within 0.5 s (0 workers connected, 0 lost");
  EXPECT_PRINTS(r, "timeout: ValueError");
  EXPECT_PRINTS(r, "transport: ValueError");
  EXPECT_PRINTS(r, "program: TypeError");
  EXPECT_PRINTS(r, "batch_size: ValueError");
  EXPECT_PRINTS(r, "resume: ValueError");
  EXPECT_PRINTS(r, "program: FileNotFoundError");
  EXPECT_PRINTS(r, "program b'not a zip' (local): RuntimeError");
  EXPECT_PRINTS(r, "program b'not a zip' (ucx): RuntimeError");
  EXPECT_PRINTS(r, "\nOK");
}

TEST(SessionPy, MetricsDrainAndWorkerLifetime) {
  Result r = check("metrics");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "metrics keys: arrival_rate bad_records consumption_rate duplicates_dropped epoch held_batches "
                   "per_worker queue_batches queue_bytes queue_fill splits_failed trainer_wait_fraction workers "
                   "workers_lost workers_rejected");
  EXPECT_PRINTS(r, "workers 2");
  EXPECT_PRINTS(r, "wait_for_workers(2) -> 2");
  EXPECT_PRINTS(r, "wait_for_workers(3): RuntimeError: goldminer.Session: only 2 of 3 workers joined within 0.2 s");
  EXPECT_PRINTS(r, "drain_workers(1) -> 1");
  EXPECT_PRINTS(r, "after drain: epoch 0: samples 1537 unique 1537 duplicates 0 missing 0");
  EXPECT_PRINTS(r, "workers after drain 1");
  EXPECT_PRINTS(r, "workers stopped on close: yes");
  EXPECT_PRINTS(r, "closed session: RuntimeError");
}

TEST(SessionPy, EnvironmentSecretAndExternalWorkers) {
  Result r = check("environment");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "environment local workers: address local://env-");
  EXPECT_PRINTS(r, ", 1537 samples, 1537 unique");
  EXPECT_PRINTS(r, "explicit listen overrides: yes");
  EXPECT_PRINTS(r, "wrong secret rejected: 1");
  EXPECT_PRINTS(r, "external worker with the secret: 1537 samples, 1537 unique");
  EXPECT_PRINTS(r, "\nOK");
}

// goldminer.DataLoader: tests/session_py/dataloader_check.py, a dataset
// class defined in that script (loaded as __mp_main__ on the workers).
Result dataloader(const std::string& c) { return run_script("dataloader_check.py", c); }

TEST(DataLoaderPy, EveryItemOncePerEpochInANewOrderCollatedAsTorchDoes) {
  Result r = dataloader("epochs");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "len 32, torch's 32");
  EXPECT_PRINTS(r, "epoch 1: 1000 items, 1000 distinct of 1000, shuffled: True");
  EXPECT_PRINTS(r, "a new order each epoch: True");
  EXPECT_PRINTS(r, "drop_last: len 15, torch's 15, 960 items in order: True");
  EXPECT_PRINTS(r, "\nOK");
}

// Injects batches of namedtuples, OrderedDicts, bytes and float16 tensors
// through real workers, then hostile descriptions (a pickle that would
// create a file, os.system as a namedtuple class, eval as a dict class, a
// module not imported, a dunder path). Checks: the batches equal torch's
// collate; each hostile one is refused, no file created, nothing imported.
TEST(DataLoaderPy, BatchStructuresTravelAsStrictJsonNeverAsAPickle) {
  Result r = dataloader("wire");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "varied batches: 100 items, each as torch collates it: True");
  EXPECT_PRINTS(r, "a pickle: refused (batch description is not JSON");
  EXPECT_PRINTS(r, "os.system as a namedtuple: refused (namedtuple class 'os:system': not a tuple class)");
  EXPECT_PRINTS(r, "eval as a dict class: refused (dict class 'builtins:eval': not a dict class)");
  EXPECT_PRINTS(r, "a module not imported: refused (namedtuple class 'antigravity:x': not a class of a mod");
  EXPECT_PRINTS(r, "a dunder path: refused (namedtuple class 'collections:OrderedDict.__init__.__glob");
  EXPECT_PRINTS(r, "the hostile descriptions ran code: False");
  EXPECT_PRINTS(r, "\nOK");
}

TEST(DataLoaderPy, AWorkerKilledMidEpochLosesAndRepeatsNothing) {
  Result r = dataloader("kill");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "600 items, 600 distinct of 600");
  EXPECT_PRINTS(r, "\nOK");
}

TEST(DataLoaderPy, StateDictResumesWithExactlyTheRest) {
  Result r = dataloader("resume");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "resumed: 100 + 200 items, 300 distinct of 300");
}

TEST(DataLoaderPy, ADatasetErrorNamesTheIndexWithItsTraceback) {
  Result r = dataloader("errors");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "dataset[37] (position 37 of epoch 0) raised ValueError: item 37 is broken");
  EXPECT_PRINTS(r, "['dataset', 'shuffle']: ValueError: goldminer.DataLoader: an IterableDataset takes no sampler");
  EXPECT_PRINTS(r, "\nOK");
}

TEST(DataLoaderPy, ModelSplitMovesItsStatelessHeadToTheWorkers) {
  Result r = dataloader("model");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "worst difference 0.00e+00");
  EXPECT_PRINTS(r, "trained one epoch on the workers' outputs: 8 steps");
  EXPECT_PRINTS(r, "\nOK");
}

TEST(DataLoaderPy, AnIterableDatasetsShardsGiveEveryItemOnceThroughAKill) {
  Result r = dataloader("iterable");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "iterable: len 32, torch's 32");
  EXPECT_PRINTS(r, "iterable epoch 1: 32 batches, 1000 items, 1000 distinct of 1000");
  EXPECT_PRINTS(r, "400 items, 400 distinct of 400");
  EXPECT_PRINTS(r, "iterable in process: 100 items, 100 distinct");
  EXPECT_PRINTS(r, "\nOK");
}

TEST(DataLoaderPy, RanksShareEveryItemOnceWithEqualBatches) {
  Result r = dataloader("ranks");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "ranks epoch 1: batches 17 17 (len 17 17), items 250 + 250, 500 distinct of 500");
}

TEST(DataLoaderPy, NoWorkersLoadsInThisProcessAsTorchDoes) {
  Result r = dataloader("inprocess");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "in process: len 4, 100 items, 100 distinct");
  EXPECT_PRINTS(r, "in process, 3 ranks: [34, 34, 34] items, 100 distinct");
}

// The GPU hand-over (goldminer/_staging.py): pin_memory= and device=.
Result staging(const std::string& args) { return run_script("staging_check.py", args); }

TEST(StagingPy, WithoutCudaDeviceAndPinMemoryWarnAndStayOnTheCpu) {
  Result r = staging("fallback");
  ASSERT_EQ(r.status, 0) << r.out;
  if (has(r, "fallback: skipped")) GTEST_SKIP() << r.out;
  EXPECT_PRINTS(r, "device='cuda' warns: [\"goldminer.Session: device='cuda': ");
  EXPECT_PRINTS(r, "device='cuda' without CUDA: 1537 samples, CPU tensors");
  EXPECT_PRINTS(r, "pin_memory warns: ['goldminer.Session: pin_memory: ");
  EXPECT_PRINTS(r, "device='tpu': goldminer.Session: device 'tpu': ");
  EXPECT_PRINTS(r, "DataLoader(device='cuda') without CUDA: 3 CPU batches");
  EXPECT_PRINTS(r, "\nOK");
}

TEST(StagingPy, ThePositionLessTheBatchesTakenAheadResumesExactly) {
  Result r = staging("held");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_PRINTS(r, "had 364 + rest 1173 = 1537, unique 1537; taken ahead given again: True");
  EXPECT_PRINTS(r, "without_held: {'epoch': 0, 'seed': 1, 'plan': 2, 'bad_records': 0, 'done': [4], ");
  EXPECT_PRINTS(r, "\nOK");
}

// Runs where torch has CUDA and a GPU (bench/device/cuda_checks.sh runs it
// on the device machine); skips saying so elsewhere.
TEST(StagingPy, BatchesAreHandedOverOnTheGpuCopiedAhead) {
  Result r = staging("cuda");
  ASSERT_EQ(r.status, 0) << r.out;
  if (has(r, "cuda: skipped")) GTEST_SKIP() << r.out;
  EXPECT_PRINTS(r, "epoch 1: 9 batches in order on cuda:0, then the source's error: source error at batch 5 (after 5 batches)");
  EXPECT_PRINTS(r, "Session(device='cuda'): 6 batches in order on cuda:0, state less the batches taken ahead");
  EXPECT_PRINTS(r, "\nOK");
}

}  // namespace
