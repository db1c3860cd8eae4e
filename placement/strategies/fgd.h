// fgd: fragmentation gradient descent (Weng et al., ATC '23). Places a task where the node's
// fragmentation F_n (frag.h) grows least; for a GPU share, also picks the device that way.
// Scores as the paper's artifact does: int(100 · sigmoid(−ΔF/1000)) — the integer cut makes
// ties, which the pool's tie order decides (a seeded order reproduces the published numbers).
//
// A StrategyPlugin (plugin.h); MakePlugin(Strategy::kFgd) returns it. Thread safety: none.
#pragma once

#include "placement/frag.h"
#include "placement/plugin.h"

namespace gpupool::placement {

// The devices with the least cost = h·ΔH + f·ΔF for `req` on `node`, and that cost. For a
// single-device share it tries every candidate device (least cost, then fullest, then lowest
// index); otherwise it takes ChooseDevices' set. False when the set breaks the spill budget.
struct FragCost {
  double h = 0;         // weight of ΔH
  double f = 1;         // weight of ΔF
  double s = 0;         // weight of Δ stranded GPU
  double waste = 0;     // weight of Δ expected share waste
  double pressure = 0;  // weight of the pressured share consumed
  // Weight of the free share a single-device share placement leaves on its device (best fit);
  // it also chooses that device within the node.
  double best_fit = 0;
  double operator()(const FragModel::Deltas& d) const {
    return h * d.h + f * d.f + s * d.s + waste * d.waste + pressure * d.pressure;
  }
};
bool FragChoose(const FragModel& model, FragCost cost, const NodeState& node,
                const CompiledRequest& req, const DeviceSet& candidates, DeviceSet* chosen,
                double* best_cost);

}  // namespace gpupool::placement
