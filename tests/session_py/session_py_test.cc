// The Python goldminer.Session and DataLoader (tw_lib/python/python_session.cc)
// end to end: each case runs one check of a script in tests/session_py/ with
// the staged package ($PYTHONPATH) and the built goldminer-dw, and asserts its
// exit status and the facts it prints. The cases are one table (all_cases),
// each registered as a test of its own.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/test_util.h"

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

using Result = goldminer::testing::CommandResult;  // out: stdout (stderr goes to the test log as it comes)

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
  return goldminer::testing::run_command(command);
}

bool has(const Result& r, const std::string& line) { return r.out.find(line) != std::string::npos; }

// Every case of the three scripts: the suite and test name it is registered
// under, the script and its arguments, the lines its output must hold (in
// order of the checks) and, for the GPU checks, the line that says the check
// could not run here (the case then skips with the script's output).
struct Case {
  std::string suite;
  std::string name;
  const char* script;
  std::string args;
  std::vector<std::string> prints;
  const char* skipped = nullptr;
};

constexpr const char* kSession = "session_check.py";
// goldminer.DataLoader: a dataset class defined in that script (loaded as
// __mp_main__ on the workers).
constexpr const char* kDataLoader = "dataloader_check.py";
// The GPU hand-over (goldminer/_staging.py): pin_memory= and device=.
constexpr const char* kStaging = "staging_check.py";

// Both epochs read every one of `total` records exactly once, then `more`.
std::vector<std::string> exactly_once(const std::string& total, std::vector<std::string> more) {
  std::vector<std::string> lines = {"total_records " + total};
  for (const char* e : {"epoch 0: ", "epoch 1: "})
    lines.push_back(e + ("samples " + total + " unique " + total + " duplicates 0 missing 0"));
  lines.push_back("\nOK");
  lines.insert(lines.end(), more.begin(), more.end());
  return lines;
}

// The same check on both transports: "<before><Ucx|Local><after>" runs
// "<check> <ucx|local><rest>".
void on_both_transports(std::vector<Case>& cases, const std::string& before, const std::string& after,
                        const std::string& check, const std::string& rest, const std::vector<std::string>& prints) {
  for (const std::string t : {"ucx", "local"})
    cases.push_back({"SessionPy", before + (t == "ucx" ? "Ucx" : "Local") + after, kSession, check + " " + t + rest,
                     prints});
}

std::vector<Case> all_cases() {
  std::vector<Case> c;
  on_both_transports(c, "Text", "TwoWorkersEveryLineOncePerEpoch", "epochs text", " 2 2",
                     exactly_once("1537", {"dtypes uint8 int64"}));
  on_both_transports(c, "Criteo", "TwoWorkersTensorsAndValues", "epochs criteo", " 2 2",
                     exactly_once("1011", {"dtypes float32 float32 int64"}));
  on_both_transports(c, "", "BatchesAreViewsOfTheReceivedBuffer", "zerocopy", "",
                     {"batches 62",  // 2 epochs x 31 batches (splits of 100, batches of 64)
                      "back to back in the received buffer: yes", "64-byte aligned: yes",
                      "held batch intact after 2 epochs: yes", "held batch intact after close: yes"});
  const std::vector<std::string> program = {"epoch 0: samples 1011 unique 1011 duplicates 0 missing 0",
                                            "program outputs match: ", "output dtypes float32 float32 int64 int64",
                                            "\nOK"};
  c.push_back({"SessionPy", "ScriptModuleProgramRunsOnUcxWorkers", kSession, "program ucx module", program});
  c.push_back({"SessionPy", "ProgramFileRunsOnLocalWorkers", kSession, "program local path", program});
  c.push_back({"SessionPy", "ProgramBytesRunOnUcxWorkers", kSession, "program ucx bytes", program});
  on_both_transports(c, "", "ResumeGivesExactlyTheRest", "resume", "",
                     {"state after 7 batches: epoch 0, 3 done, 1 partial", "= 1537, overlap 0, duplicates 0, missing 0",
                      "next epoch: 1537 samples, 1537 unique", "resume with another seed: RuntimeError",
                      "resume with another batch size: RuntimeError"});
  on_both_transports(
      c, "", "DeterministicOrderWhateverTheWorkers", "deterministic", "",
      {"deterministic: 1537 and 1537 samples; 3 workers x 2 threads give the 1-worker order: True",
       "deterministic resume: first 264 + rest 1273 continue the order: True"});
  on_both_transports(
      c, "", "RanksReadEverySampleOnceWithEqualLengths", "ranks", "",
      {"from RANK and WORLD_SIZE: rank 1 of 3",
       "rank out of range: ValueError: goldminer.Session: rank 3 is not a rank of world_size 3", "OK"});
  c.push_back({"SessionPy", "DdpExampleTrainsTwoRanksInStepOnEverySampleOnce", kSession, "ddp",
               {"ddp epoch 0: ", "ddp epoch 1: ", "id sums add up: True, parameters in step: True", "\nOK"}});
  c.push_back({"SessionPy", "ErrorsNameTheFileAndTheCause", kSession, "errors",
               {"missing file: RuntimeError: ", "no_such_file.txt", "corrupt record: RuntimeError: ", "day_1.tsv",
                "workers exited: RuntimeError: ", "exit status 3", "missing goldminer-dw: RuntimeError: ",
                "Ctrl-C while waiting: KeyboardInterrupt",
                "timeout: RuntimeError: goldminer.Session: no batch within 0.5 s (0 workers connected, 0 lost",
                "timeout: ValueError", "transport: ValueError", "program: TypeError", "batch_size: ValueError",
                "resume: ValueError", "program: FileNotFoundError", "program b'not a zip' (local): RuntimeError",
                "program b'not a zip' (ucx): RuntimeError", "\nOK"}});
  c.push_back({"SessionPy", "MetricsDrainAndWorkerLifetime", kSession, "metrics",
               {"metrics keys: arrival_rate bad_records consumption_rate duplicates_dropped epoch held_batches "
                "per_worker queue_batches queue_bytes queue_fill scaling_window_batches scaling_window_s "
                "splits_failed trainer_wait_fraction workers workers_lost workers_rejected",
                "workers 2", "wait_for_workers(2) -> 2",
                "wait_for_workers(3): RuntimeError: goldminer.Session: only 2 of 3 workers joined within 0.2 s",
                "drain_workers(1) -> 1", "after drain: epoch 0: samples 1537 unique 1537 duplicates 0 missing 0",
                "workers after drain 1", "workers stopped on close: yes", "closed session: RuntimeError"}});
  c.push_back({"SessionPy", "EnvironmentSecretAndExternalWorkers", kSession, "environment",
               {"environment local workers: address local://env-", ", 1537 samples, 1537 unique",
                "explicit listen overrides: yes", "wrong secret rejected: 1",
                "external worker with the secret: 1537 samples, 1537 unique", "\nOK"}});

  c.push_back({"DataLoaderPy", "EveryItemOncePerEpochInANewOrderCollatedAsTorchDoes", kDataLoader, "epochs",
               {"len 32, torch's 32", "epoch 1: 1000 items, 1000 distinct of 1000, shuffled: True",
                "a new order each epoch: True", "drop_last: len 15, torch's 15, 960 items in order: True", "\nOK"}});
  // Injects batches of namedtuples, OrderedDicts, bytes and float16 tensors
  // through real workers, batches of one item each larger than the last (16,
  // 2^20, 2^22 floats: the worker maps its child's memory again), then
  // hostile descriptions (a pickle that would create a file, os.system as a
  // namedtuple class, eval as a dict class, a module not imported, a dunder
  // path). Checks: the batches equal torch's collate; each hostile one is
  // refused, no file created, nothing imported.
  c.push_back({"DataLoaderPy", "BatchStructuresTravelAsStrictJsonNeverAsAPickle", kDataLoader, "wire",
               {"varied batches: 100 items, each as torch collates it: True",
                "growing batches: [0, 1, 2], each as torch collates it: True",
                "a pickle: refused (batch description is not JSON",
                "os.system as a namedtuple: refused (namedtuple class 'os:system': not a tuple class)",
                "eval as a dict class: refused (dict class 'builtins:eval': not a dict class)",
                "a module not imported: refused (namedtuple class 'antigravity:x': not a class of a mod",
                "a dunder path: refused (namedtuple class 'collections:OrderedDict.__init__.__glob",
                "the hostile descriptions ran code: False", "\nOK"}});
  c.push_back({"DataLoaderPy", "AWorkerKilledMidEpochLosesAndRepeatsNothing", kDataLoader, "kill",
               {"600 items, 600 distinct of 600", "\nOK"}});
  c.push_back({"DataLoaderPy", "StateDictResumesWithExactlyTheRest", kDataLoader, "resume",
               {"resumed: 100 + 200 items, 300 distinct of 300"}});
  c.push_back({"DataLoaderPy", "ADatasetErrorNamesTheIndexWithItsTraceback", kDataLoader, "errors",
               {"dataset[37] (position 37 of epoch 0) raised ValueError: item 37 is broken",
                "['dataset', 'shuffle']: ValueError: goldminer.DataLoader: an IterableDataset takes no sampler",
                "\nOK"}});
  c.push_back({"DataLoaderPy", "ModelSplitMovesItsStatelessHeadToTheWorkers", kDataLoader, "model",
               {"worst difference 0.00e+00", "trained one epoch on the workers' outputs: 8 steps", "\nOK"}});
  c.push_back({"DataLoaderPy", "AnIterableDatasetsShardsGiveEveryItemOnceThroughAKill", kDataLoader, "iterable",
               {"iterable: len 32, torch's 32", "iterable epoch 1: 32 batches, 1000 items, 1000 distinct of 1000",
                "400 items, 400 distinct of 400", "iterable in process: 100 items, 100 distinct", "\nOK"}});
  c.push_back({"DataLoaderPy", "RanksShareEveryItemOnceWithEqualBatches", kDataLoader, "ranks",
               {"ranks epoch 1: batches 17 17 (len 17 17), items 250 + 250, 500 distinct of 500"}});
  c.push_back({"DataLoaderPy", "NoWorkersLoadsInThisProcessAsTorchDoes", kDataLoader, "inprocess",
               {"in process: len 4, 100 items, 100 distinct",
                "in process, 3 ranks: [34, 34, 34] items, 100 distinct"}});

  c.push_back({"StagingPy", "WithoutCudaDeviceAndPinMemoryWarnAndStayOnTheCpu", kStaging, "fallback",
               {"device='cuda' warns: [\"goldminer.Session: device='cuda': ",
                "device='cuda' without CUDA: 1537 samples, CPU tensors",
                "pin_memory warns: ['goldminer.Session: pin_memory: ",
                "device='tpu': goldminer.Session: device 'tpu': ",
                "DataLoader(device='cuda') without CUDA: 3 CPU batches", "\nOK"},
               "fallback: skipped"});
  c.push_back({"StagingPy", "ThePositionLessTheBatchesTakenAheadResumesExactly", kStaging, "held",
               {"had 364 + rest 1173 = 1537, unique 1537; taken ahead given again: True",
                "without_held: {'epoch': 0, 'seed': 1, 'plan': 2, 'bad_records': 0, 'done': [4], ", "\nOK"}});
  // Runs where torch has CUDA and a GPU (bench/device/cuda_checks.sh runs it
  // on the device machine); skips saying so elsewhere.
  c.push_back({"StagingPy", "BatchesAreHandedOverOnTheGpuCopiedAhead", kStaging, "cuda",
               {"epoch 1: 9 batches in order on cuda:0, then the source's error: source error at batch 5 (after 5 "
                "batches)",
                "Session(device='cuda'): 6 batches in order on cuda:0, state less the batches taken ahead", "\nOK"},
               "cuda: skipped"});
  // python -m goldminer --version names this package, torch, Python and
  // goldminer-dw (the one run_script points GOLDMINER_DW_PROGRAM at).
  c.push_back({"VersionPy", "NamesThePackageTorchPythonWorkerAndSplit", "version_check.py", "",
               {"line 1 as expected: True", "line 2 as expected: True", "line 3 as expected: True",
                "line 4 as expected: True", "split line: True", "\nOK"}});
  // A shared split cache: a .so another user planted, a folder anyone may
  // write; each refused before anything loads.
  c.push_back({"SplitCachePy", "RefusesASplitAnotherUserCouldHavePlanted", "split_cache_check.py", "",
               {"another user's split refused: True", "a cache anyone may write refused: True",
                "a private cache passes: True", "\nOK"},
               "another user's split refused: skipped"});
  return c;
}

class ScriptCheck : public testing::Test {
 public:
  explicit ScriptCheck(const Case& c) : c_(c) {}
  void TestBody() override {
    const Result r = run_script(c_.script, c_.args);
    ASSERT_EQ(r.status, 0) << r.out;
    if (c_.skipped != nullptr && has(r, c_.skipped)) GTEST_SKIP() << r.out;
    for (const std::string& line : c_.prints)
      EXPECT_TRUE(has(r, line)) << "expected \"" << line << "\" in:\n" << r.out;
  }

 private:
  const Case c_;
};

// Registered under the names each case had as a TEST (docs and filters name them).
const bool registered = [] {
  for (const Case& c : all_cases())
    testing::RegisterTest(c.suite.c_str(), c.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                          [c]() -> testing::Test* { return new ScriptCheck(c); });
  return true;
}();

}  // namespace
