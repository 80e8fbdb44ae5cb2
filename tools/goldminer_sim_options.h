// goldminer-sim's options: one table for its parse, --help and the OPTIONS
// of goldminer-sim(1) (gmcore/command_line.h; man/gen_man.cc).
#ifndef GOLDMINER_TOOLS_GOLDMINER_SIM_OPTIONS_H_
#define GOLDMINER_TOOLS_GOLDMINER_SIM_OPTIONS_H_

#include <cstdint>
#include <string>

#include "gmcore/command_line.h"
#include "sim/job_scenario.h"
#include "sim/simulator.h"

namespace goldminer {

struct SimArgs {
  std::string trace, nodes_path, policy_text, plot, demand_text, jobs_csv, speed_curve_text = "linear";
  int gpus = 0;
  uint64_t seed = 1;
  sim::SimOptions options;
};

// What goldminer-sim replays, on which cluster, under which policy.
inline OptionTable sim_replay_rows(SimArgs* a) {
  return {
        help_flag(),
        required_option("trace", "PODS.csv",
                        "pods CSV (name, cpu_milli, num_gpu, gpu_milli, creation_time, scheduled_time, "
                        "deletion_time, ...)",
                        &a->trace, "The pods of the trace."),
        required_option("nodes", "NODES.csv", "nodes CSV (sn, cpu_milli, memory_mib, gpu)", &a->nodes_path,
                        "The node table."),
        required_option("policy", "POLICY",
                        "bundled | goldminer | goldminer-joblevel | goldminer-measured | oracle | cachew",
                        &a->policy_text,
                        R"(\fBbundled\fR, \fBgoldminer\fR (the shipped allocation on the model alone),
\fBgoldminer\-joblevel\fR, \fBgoldminer\-measured\fR (the shipped policy: measured
claims, each job's ScalingPolicy), \fBoracle\fR (the allocation on each job's true
speed curve: a bound) or \fBcachew\fR (each job scales its own workers as Cachew
does: one more while it raises the rate by over 7 %, fewer while a removal costs
under 3 %, re\-scaling on a 10 % shift of its rate; granted first come, first
served; a settled job's rate is checked every 60 s).)"),
        option("gpus", "N", "",
               "sample about N GPUs of the node table and thin the trace in proportion (default: full scale)",
               &a->gpus, R"(Simulate a sample of about \fIN\fR GPUs instead of the full node table. GPU
nodes are shuffled (Fisher\-Yates over mt19937_64 seeded with \fB\-\-seed\fR)
and taken until they hold at least \fIN\fR GPUs; the fraction f = sampled
GPUs / all GPUs. CPU\-only nodes are shuffled and round(f x their number)
taken. Each pod is kept, in file order, when a uniform draw is below f.)"),
        option("seed", "S", "1", "seed of the --gpus sample and of --load", &a->seed,
               R"(Seed of the sample and of \fB\-\-load\fR.)"),
        checked(option("load", "U", "0",
               "offered GPU load to replay at, by overlaying time-shifted copies of the trace; 0 = the trace "
               "as it is",
               &a->options.load, R"(Replay at an offered GPU load of \fIU\fR: GPU work offered / (GPUs x arrival
span). A sample of a trace holds too few jobs to ever fill its GPUs however
its arrivals are compressed, so copies of the (sampled) trace are overlaid,
each shifted by a seeded uniform offset and wrapped into the trace's
arrival span, the last copy partial. 0 replays the trace as it is.)"),
                number_at_least(0)),
  };
}

// The job model: CPUs per GPU, data workers and their start, and the output.
inline OptionTable sim_model_rows(SimArgs* a) {
  sim::JobModel& m = a->options.model;
  return {
        option("trainer-cpus-per-gpu", "C", "1",
               "goldminer: CPUs a GPU job keeps per GPU on its node; also the reserve per free GPU",
               &m.trainer_cpus_per_gpu, R"(CPUs a GPU job keeps per GPU on its node under the goldminer policies, and
the CPU reserve per free GPU.)"),
        checked(option("remote-efficiency", "E", "0.9",
               "goldminer: pre-processing of one data-worker CPU relative to one local CPU",
               &m.remote_efficiency, R"(Pre\-processing done by one data\-worker CPU relative to one CPU next to the
GPU, in (0, 1].)"),
                number_above_at_most(0, 1)),
        checked(option("cpus-per-dw", "W", "1", "goldminer: CPUs of one data worker", &m.cpus_per_dw,
               "CPUs of one data worker."),
                number_above(0)),
        checked(option("dw-floor", "K", "1", "goldminer: data workers every running job gets before any job gets more",
               &m.dw_floor, "Data workers each running job gets before any job gets more."),
                integer_at_least(0)),
        checked(option("dw-max", "K", "256", "goldminer: data workers per job at most", &m.dw_max,
               "Data workers per job at most."),
                integer_at_least(1)),
        checked(option("worker-start-s", "S", "2",
               "goldminer: seconds from a data worker's allocation to its first batch (P7 on the devcluster)",
               &m.worker_start_s, R"(Seconds from a data worker's allocation to its first batch (measured on
the development cluster, where a replacement worker's first
batch came 1.2\-1.6 s after the loss at the median and 1.8\-3.2 s at the
95th percentile, see docs/SIMULATION\-live.md, P7).)"),
                number_at_least(0)),
        checked(option("job-start-s", "S", "0",
               "seconds from a job's start to its first progress (0: the trace's run times include it)",
               &m.job_start_s, R"(Seconds from a job's start to its first progress: its launch and its
program's start\-up (0 because a trace's run times include them;
the live replay measures and passes it).)"),
                number_at_least(0)),
        checked(option("dispatch-s", "S", "0",
               "seconds from a job's arrival to its start at the earliest: scheduling cycle and launch",
               &m.dispatch_s, R"(Seconds from a job's arrival to its start at the earliest: the
scheduler's cycle and the launch (the live replay measures it,
from a job's submission to its script's start).)"),
                number_at_least(0)),
        option("demand-model", "calibrated|request", "calibrated",
               "calibrated: each GPU job needs D CPUs per GPU for full speed, D log-normal (below); request: "
               "the job's request (less its trainer's) times --cpu-demand-factor",
               &a->demand_text, R"(How a GPU job's pre\-processing demand is set (see \fBJOB MODEL\fR).)"),
        checked(option("demand-median", "D", "12", "calibrated: median of D (CPUs per GPU)",
               &m.calibrated.median_cpus_per_gpu,
               R"(The calibrated model's median CPUs per GPU; with \fB\-\-demand\-sigma\fR and
\fB\-\-demand\-max\fR for sensitivity studies, not tuning.)"),
                number_above(0)),
        checked(option("demand-sigma", "S", "0.75", "calibrated: sigma of ln D", &m.calibrated.sigma,
               "The calibrated model's sigma of the logarithm of its CPUs per GPU."),
                number_at_least(0)),
        checked(option("demand-max", "M", "64", "calibrated: D at most (CPUs per GPU)", &m.calibrated.max_cpus_per_gpu,
               "The calibrated model's cap on CPUs per GPU."),
                number_above(0)),
        checked(option("cpu-demand-factor", "F", "1",
               "request: CPUs a GPU job needs for full speed / CPUs it asked for (1: the request was right)",
               &m.cpu_demand_factor, R"(With \fB\-\-demand\-model request\fR only: how many times the CPUs its request
left for pre\-processing a GPU job needs for full speed, >= 1.
Above 1 models jobs that were CPU\-starved in the trace; see
docs/SIMULATION.md for the results with 1 and 2.)"),
                number_at_least(1)),
        option("speed-curve", "linear|concave", "linear",
               "how a GPU job's speed rises with its data workers: linear to saturation, or concave with a knee "
               "drawn per job",
               &a->speed_curve_text, R"(How a GPU job's speed rises with its data workers (see \fBJOB MODEL\fR):
\fBlinear\fR to saturation (what the \fBgoldminer\fR policy's allocation
assumes), or \fBconcave\fR with diminishing returns and a knee drawn per
job.)"),
        checked(option("measure-noise", "N", "0",
               "relative standard deviation of one window's measured rate (the policies that measure see only "
               "that)",
               &m.measure_noise, R"(Relative standard deviation of one observation window's measured rate:
each window reads the true rate x (1 + \fIN\fR x Z), Z standard normal,
seeded per job from \fB\-\-seed\fR (the same on every machine).
\fBgoldminer\-joblevel\fR's autosizer and \fBgoldminer\-measured\fR's
policy see only these readings; 0 reads exactly.)"),
                number_at_least_below(0, 1)),
        checked(option("window-s", "S", "5", "goldminer-measured: seconds of one observation window", &m.window_s,
               R"(Seconds of one observation window of \fBgoldminer\-measured\fR: a probe
costs its settle and measure windows at the probed count.)"),
                number_above(0)),
        option("plot", "OUT.svg", "", "write GPU allocation over time of bundled, goldminer-joblevel and goldminer (and the --policy) to this SVG",
               &a->plot, R"(Also replay \fBbundled\fR, \fBgoldminer\-joblevel\fR and \fBgoldminer\fR
on the same sample (those that are not \fB\-\-policy\fR) and write GPU
allocation over time of each, and of \fB\-\-policy\fR, to \fIOUT.svg\fR.)"),
        option("jobs-csv", "OUT.csv", "",
               "write every replayed job (its model: GPUs, CPUs requested and needed, work; and its arrival, "
               "start and finish) to this CSV",
               &a->jobs_csv, R"(Also write every replayed job, in arrival order, to \fIOUT.csv\fR: name,
gpus, cpus_requested, cpus_needed (for full speed, the trainer's included;
the request for a CPU\-only job), cpus_trainer, work_s (seconds at full
speed), bundled_speed (the speed its request gives it), arrival_s, start_s
and finish_s. The live replay (bench/replay) runs real jobs from these rows.)"),
        flag("json", "print one JSON object instead of the human summary", nullptr,
             "Print one JSON object instead of the human summary."),
  };
}

inline CommandOptions sim_command(SimArgs* a) {
  OptionTable rows = joined_rows({sim_replay_rows(a), sim_model_rows(a)});
  return {"goldminer-sim",
          "goldminer-sim --trace PODS.csv --nodes NODES.csv --policy POLICY [options]",
          "Replays an Alibaba cluster-trace-gpu-v2023 pod trace; see goldminer-sim(1).",
          std::move(rows),
          {}};
}


// goldminer-sim job: one job's workers under the shipped job-level policy.
struct SimJobArgs {
  std::string scenario;
  sim::JobRunOptions options;
};

inline CommandOptions sim_job_command(SimJobArgs* a) {
  sim::JobRunOptions& o = a->options;
  return {"goldminer-sim job",
          "goldminer-sim job --scenario FILE [options]",
          "Runs one job's elastic workers under the shipped scaling policy over a scenario of what its\n"
          "workers and trainer deliver; one JSON line per window. See goldminer-sim(1), JOB SCENARIOS.",
          {
              help_flag(),
              required_option("scenario", "FILE", "CSV rows from_s,workers,samples_per_s (workers * : the trainer's limit)",
                              &a->scenario,
                              R"(The scenario: rows \fIfrom_s\fB,\fIworkers\fB,\fIsamples_per_s\fR, see
\fBJOB SCENARIOS\fR.)"),
              checked(option("duration", "S", "7200", "seconds to run", &o.duration_s, R"(Seconds to run, in windows.)"),
                      number_above(0)),
              checked(option("start-workers", "K", "1", "workers at the start", &o.start_workers,
                     R"(Workers the job starts with.)"),
                      integer_in_range(1, 65536)),
              checked(option("max-workers", "M", "64", "the most workers the job may have (its dw-max)", &o.max_workers,
                     R"(The most workers the job may have (its \fBdw\-max\fR).)"),
                      integer_in_range(1, 65536)),
              checked(option("noise", "SD", "0", "relative standard deviation of one window's rate", &o.noise,
                     R"(Relative standard deviation of one window's rate: it reads the
scenario's rate x (1 + \fISD\fR x Z), Z standard normal from \fB\-\-seed\fR.)"),
                      number_at_least_below(0, 1)),
              option("seed", "S", "1", "seed of the noise", &o.seed, R"(Seed of the noise.)"),
              checked(option("window-s", "S", "5", "seconds of one observation window", &o.window_s,
                     R"(Seconds of one observation window (the session's
\fBGOLDMINER_AUTOSCALE_INTERVAL\fR).)"),
                      number_above(0)),
              flag("json", "print one JSON object a window (the default prints the decisions only)", nullptr,
                   R"(Print one JSON object a window: \fB{"t_s": \fR..\fB, "workers": \fR..\fB,
"samples_per_s": \fR..\fB, "change": \fR..\fB, "why": "\fR..\fB"}\fR. Without it, the windows
with a decision, as "\fIT\fR s, \fIK\fR workers, \fIR\fR samples/s: \fIline\fR", and a last
line with the count and rate at the end.)"),
          },
          {}};
}

}  // namespace goldminer

#endif  // GOLDMINER_TOOLS_GOLDMINER_SIM_OPTIONS_H_
