// Minimum-cost cut of the stateless region as a minimum s-t cut (see cut.h).
#include "tw_lib/split/cut.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <queue>

namespace goldminer::split {
namespace {

// Larger than any finite cost, small enough that sums stay finite.
constexpr double kInf = 1e30;

// Dinic's maximum flow on a small dense-enough graph; capacities in ms.
class FlowGraph {
 public:
  explicit FlowGraph(int n) : adj_(n), level_(n), next_(n) {}

  void add_edge(int from, int to, double cap) {
    if (cap <= 0) return;
    adj_[from].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({to, cap});
    adj_[to].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({from, 0});
  }

  void max_flow(int s, int t) {
    while (bfs(s, t)) {
      std::fill(next_.begin(), next_.end(), 0);
      while (dfs(s, t, kInf * 4) > 0) {
      }
    }
  }

  // Nodes reachable from s in the residual graph: the source side.
  std::vector<bool> source_side(int s) const {
    std::vector<bool> seen(adj_.size(), false);
    std::vector<int> stack = {s};
    seen[s] = true;
    while (!stack.empty()) {
      int u = stack.back();
      stack.pop_back();
      for (int e : adj_[u])
        if (edges_[e].cap > kEps && !seen[edges_[e].to]) {
          seen[edges_[e].to] = true;
          stack.push_back(edges_[e].to);
        }
    }
    return seen;
  }

 private:
  static constexpr double kEps = 1e-12;
  struct Edge {
    int to;
    double cap;
  };

  bool bfs(int s, int t) {
    std::fill(level_.begin(), level_.end(), -1);
    std::queue<int> q;
    level_[s] = 0;
    q.push(s);
    while (!q.empty()) {
      int u = q.front();
      q.pop();
      for (int e : adj_[u])
        if (edges_[e].cap > kEps && level_[edges_[e].to] < 0) {
          level_[edges_[e].to] = level_[u] + 1;
          q.push(edges_[e].to);
        }
    }
    return level_[t] >= 0;
  }

  double dfs(int u, int t, double pushed) {
    if (u == t) return pushed;
    for (int& i = next_[u]; i < static_cast<int>(adj_[u].size()); ++i) {
      int e = adj_[u][i];
      int v = edges_[e].to;
      if (edges_[e].cap <= kEps || level_[v] != level_[u] + 1) continue;
      double got = dfs(v, t, std::min(pushed, edges_[e].cap));
      if (got > 0) {
        edges_[e].cap -= got;
        edges_[e ^ 1].cap += got;
        return got;
      }
    }
    return 0;
  }

  std::vector<std::vector<int>> adj_;
  std::vector<Edge> edges_;
  std::vector<int> level_, next_;
};

double capacity(double cost) { return std::isinf(cost) ? kInf : cost; }

// Builds the flow network: node i is 2 + i, value aux nodes follow.
// Source side = moved to the worker.
std::vector<bool> solve(const CutProblem& p) {
  const int n = static_cast<int>(p.node_ms.size());
  const int s = 0, t = 1;
  FlowGraph g(2 + n + static_cast<int>(p.values.size()));
  auto node = [&](int i) { return i < 0 ? s : 2 + i; };
  for (int i = 0; i < n; ++i) g.add_edge(s, node(i), capacity(p.node_ms[i]));
  for (const auto& [a, b] : p.requires_moved) g.add_edge(node(a), node(b), kInf);
  for (size_t k = 0; k < p.values.size(); ++k) {
    const auto& v = p.values[k];
    // Closure: a consumer on the worker needs its producer there.
    if (v.producer >= 0)
      for (int c : v.consumers) g.add_edge(node(c), node(v.producer), kInf);
    double cap = capacity(v.cost);
    if (v.trainer_reads) {
      if (v.producer >= 0) g.add_edge(node(v.producer), t, cap);
      continue;
    }
    if (v.consumers.empty()) continue;
    int aux = 2 + n + static_cast<int>(k);
    g.add_edge(node(v.producer), aux, cap);
    for (int c : v.consumers) g.add_edge(aux, node(c), kInf);
  }
  g.max_flow(s, t);
  std::vector<bool> side = g.source_side(s);
  std::vector<bool> moved(n);
  for (int i = 0; i < n; ++i) moved[i] = side[node(i)];
  return moved;
}

}  // namespace

namespace {

// Whether value `v` crosses with `moved` (produced on the worker side, read
// on the trainer's).
bool crosses(const CutProblem::Value& v, const std::vector<bool>& moved) {
  if (v.producer >= 0 && !moved[v.producer]) return false;
  if (v.trainer_reads) return true;
  for (int c : v.consumers)
    if (!moved[c]) return true;
  return false;
}

}  // namespace

double crossing_bytes(const CutProblem& p, const std::vector<bool>& moved) {
  double bytes = 0;
  for (const auto& v : p.values)
    if (crosses(v, moved)) bytes += v.bytes;
  return bytes;
}

double trainer_part(const CutProblem& p, const std::vector<bool>& moved) {
  double ms = 0;
  for (size_t i = 0; i < p.node_ms.size(); ++i)
    if (!moved[i]) ms += p.node_ms[i];
  return ms;
}

std::vector<NamedCut> candidate_cuts(const CutProblem& problem) {
  std::vector<NamedCut> out;
  const std::vector<bool> none(problem.node_ms.size(), false);
  auto add = [&](const std::string& name, std::vector<bool> moved) {
    for (const auto& c : out)
      if (c.choice.moved == moved) return;
    CutChoice choice{moved, cut_cost(problem, moved)};
    if (std::isinf(choice.cost)) return;
    // A cut that moves nothing is dataset mode, whichever choice found it.
    out.push_back({moved == none ? "dataset" : name, std::move(choice)});
  };
  add("min-cost", choose_min_cost_cut(problem).moved);
  for (double scale : {0.0625, 0.25, 0.5, 2.0, 4.0, 16.0}) {
    CutProblem scaled = problem;
    for (auto& v : scaled.values)
      if (!std::isinf(v.cost)) v.cost *= scale;
    char name[64];
    std::snprintf(name, sizeof(name), "min-cost at transfer x%g", scale);
    add(name, solve(scaled));
  }
  add("max", choose_max_cut(problem).moved);
  add("dataset", none);
  // Cheapest first; dataset mode after any cut of equal cost.
  std::stable_sort(out.begin(), out.end(), [&](const NamedCut& a, const NamedCut& b) {
    if (a.choice.cost != b.choice.cost) return a.choice.cost < b.choice.cost;
    return a.name != "dataset" && b.name == "dataset";
  });
  return out;
}

double cut_cost(const CutProblem& p, const std::vector<bool>& moved) {
  auto on_worker = [&](int i) { return i < 0 || moved[i]; };
  double cost = 0;
  for (size_t i = 0; i < p.node_ms.size(); ++i)
    if (!moved[i]) cost += p.node_ms[i];
  for (const auto& [a, b] : p.requires_moved)
    if (moved[a] && !moved[b]) return kCannotCross;
  for (const auto& v : p.values) {
    bool read_outside = v.trainer_reads;
    for (int c : v.consumers) {
      if (!moved[c]) read_outside = true;
      if (moved[c] && !on_worker(v.producer)) return kCannotCross;
    }
    if (on_worker(v.producer) && read_outside) cost += v.cost;
  }
  return cost;
}

CutChoice choose_min_cost_cut(const CutProblem& problem) {
  CutChoice choice;
  choice.moved = solve(problem);
  choice.cost = cut_cost(problem, choice.moved);
  return choice;
}

CutChoice choose_max_cut(const CutProblem& problem) {
  CutProblem unit = problem;
  std::fill(unit.node_ms.begin(), unit.node_ms.end(), 1.0);
  for (auto& v : unit.values)
    if (!std::isinf(v.cost)) v.cost = 0;
  CutChoice choice;
  choice.moved = solve(unit);
  choice.cost = cut_cost(problem, choice.moved);
  return choice;
}

}  // namespace goldminer::split
