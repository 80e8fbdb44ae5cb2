// Cut choice over the stateless region (torch-free, unit-tested alone).
//
// The stateless nodes form a DAG; a valid cut moves a down-closed subset W
// to the worker (every node W holds has its stateless producers, and the
// nodes it must follow in memory order, in W too). Cost of a cut:
//   sum of trainer times of stateless nodes left on the trainer
// + sum of transfer costs of values produced on the worker side (or model
//   inputs) that some trainer-side node reads.
// Minimising this is a closure problem with a per-value "any consumer
// outside" term; it is solved exactly as a minimum s-t cut (Dinic).
#ifndef GOLDMINER_TW_LIB_SPLIT_CUT_H_
#define GOLDMINER_TW_LIB_SPLIT_CUT_H_

#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace goldminer::split {

constexpr double kCannotCross = std::numeric_limits<double>::infinity();

struct CutProblem {
  std::vector<double> node_ms;  // trainer time of each stateless node if it stays
  struct Value {
    int producer = -1;            // index into node_ms; -1: a model input (worker side)
    double cost = 0;              // transfer cost if it crosses; kCannotCross forbids
    std::vector<int> consumers;   // stateless consumers (indices)
    bool trainer_reads = false;   // read by a stateful node or returned by the model
    double bytes = 0;             // what crosses, per batch (for the report)
  };
  std::vector<Value> values;
  // (a, b): moving node a requires moving node b (memory order).
  std::vector<std::pair<int, int>> requires_moved;
};

struct CutChoice {
  std::vector<bool> moved;  // per node
  double cost = 0;          // objective at `moved` (kCannotCross if none is finite)
};

// Exact minimum of the cost above.
CutChoice choose_min_cost_cut(const CutProblem& problem);
// The largest valid W (no value that cannot cross crosses), ignoring costs.
CutChoice choose_max_cut(const CutProblem& problem);
// The cuts worth considering, each once, cheapest (by `problem`'s cost)
// first: the minimum-cost cut; the minimum-cost cuts with every transfer
// cost scaled by 1/16 .. 16 (the cuts a cheaper or dearer link would
// choose: what the choice falls back on when measurement overrules it);
// the largest cut; and dataset mode (nothing moved), which is always
// there, named "dataset" whichever choice found it, and last among equals.
// Names say which is which.
struct NamedCut {
  std::string name;
  CutChoice choice;
};
std::vector<NamedCut> candidate_cuts(const CutProblem& problem);
// Bytes per batch of the values that cross with `moved`.
double crossing_bytes(const CutProblem& problem, const std::vector<bool>& moved);
// Trainer time of the stateless nodes left there with `moved`.
double trainer_part(const CutProblem& problem, const std::vector<bool>& moved);

// Objective of a given assignment (kCannotCross if a forbidden value
// crosses or a constraint is broken).
double cut_cost(const CutProblem& problem, const std::vector<bool>& moved);

}  // namespace goldminer::split

#endif  // GOLDMINER_TW_LIB_SPLIT_CUT_H_
