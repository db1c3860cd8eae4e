// fgd-pack: our strategy. FGD's fragmentation gradient plus a counting measure of what the node
// can still host, a penalty for GPU stranded by lean CPU, and the expected final waste of the
// free share a placement leaves, and the share it takes of GPU models that pinned tasks need;
// quantised so that near-ties consolidate in the tie order.
//
// cost = ΔH + w·ΔF + 16·ΔS + 128·ΔW + 30·P [+ 60·C] [+ 64·ΔR] [+ 15·ΔX] [+ 64·ΔSC + 20·Q]:
// ΔF is FGD's "will the next typical task fit at all"; ΔH counts how many tasks of each class still
// fit by GPU share, CPU and memory, weighted up for classes few nodes can host (so a 120-core 8-GPU
// node is not nibbled away by small tasks); ΔS is the change of the node's idle GPU its free CPU
// cannot feed at 1.3 × the workload's GPU per CPU (CPU-only tasks included), which keeps CPU-heavy
// tasks off CPU-lean nodes; ΔW is the change of the changed devices' expected final waste
// (share_patterns.h), which puts a share where it completes a typical pattern (a 320 next to a 650,
// not next to a 470); P is the share the placement takes times the pinned pressure on its devices
// (PinnedLoad, cubed: per node type and model, how much of those GPUs pinned tasks will take),
// which keeps tasks that may run anywhere off the GPUs that tasks pinned to them will need (a
// third of gpuspec33's tasks want T4s, and T4s are an eighth of the pool); where the
// tasks pinned to some model ask more than its GPUs (ρ ≥ 1.1, ModelPressure) P weighs 150: routing
// before patterns, since a flexible task there displaces a pinned one that has nowhere else. C,
// only where the pool's CPU cannot feed its GPUs (CpuScarcity ≥ 1.3), is 1000 × the node's free CPU
// share after the placement: best fit on the scarce resource. R, only in a CPU-tight pool (1.08 ≤
// CpuScarcity < 1.3: the CPU runs out before the GPUs fill, and from then on the GPU placed depends
// on which tasks find no room first), is the CPU-only work the node can still take — Σ over the
// CPU-only classes of p × cores × the workload's GPU per core × how many fit in the node's free CPU
// and memory, a third of it on a node with no GPU in use — counted for GPU tasks: they cut the room
// of CPU-only tasks, so the free CPU ends in holes that small GPU tasks fill and CPU-only tasks do
// not; there the stranded-GPU term weighs 64. X, wherever CpuScarcity ≥ 1 (the CPU runs out no
// later than the GPUs: the CPU-scarce and CPU-tight modes and just below the latter), is
// the node's free CPU above the CPU-hole cap (CpuHoleCap: the task size up to which the workload's
// tasks bring the most GPU beyond its mean GPU per core), in milli-cores: a placement that cuts
// such a hole is rewarded, so the free CPU ends in holes that the GPU-dense small tasks fit and the
// bigger, GPU-poorer ones do not. In a CPU-lean pool — nodes too lean to feed their
// GPUs at the GPU tasks' mean CPU per GPU would leave ≥ 5% of that CPU unmet (CpuLeanShortfall) —
// the stranded-GPU term weighs 64 and 64 × Δ stranded CPU joins (the node's free CPU its idle GPU
// cannot use at 0.7 × the GPU tasks' GPU per CPU): CPU-light tasks to lean nodes, CPU-heavy ones to
// CPU-rich nodes. Where such a pool is not also CPU-scarce, the leanness is 0.8 and a share that
// asks more cores per GPU than the node has free per idle GPU costs 20 × its share × ln(the ratio
// of the two)² (Q: it leaves the node's other idle GPU less CPU each).
// In a pool partitioned by model pins (ModelPartition ≤ 1/3) P weighs 30,000 and
// the cost adds 1,000 × the free share a share placement leaves on its device: routing first, then
// best fit inside the model's slice. w = 2, or 10 when multi-GPU tasks bring a quarter or more of
// the workload's GPU demand. Score = ⌊−cost / (20·w)⌋; equal scores go to the pool's tie order,
// which fills nodes in a fixed order (consolidation). Give it the whole class list (SetWorkload
// with every shape), not FGD's top 95%: the rare big shapes need protecting.
//
// In a plain pool — CPU ample (CpuScarcity < 0.98), no model over-pinned, not partitioned, not
// CPU-lean — the stranded-GPU term weighs 64 as well (16 is left to the pools near the CPU-tight
// gate and the over-pinned ones, where 64 cost cpu235/cpu250 and gpuspec33).
//
// A StrategyPlugin (plugin.h); MakePlugin(Strategy::kFgdPack) returns it. Thread safety: none.
#pragma once

#include <cstdint>
#include <vector>

#include "placement/plugin.h"

namespace gpupool::placement {

// w for a workload; the cost in milli-GPU (lower is better) and the score it maps to.
double FgdPackWeight(const std::vector<FragClass>& workload);
// The workload's milli-GPU per milli-core: Σ p·g·k / Σ p·cpu over every class (0 without CPU).
double GpuPerCpu(const std::vector<FragClass>& workload);
// Per model id, how hard the workload's pinned classes lean on that model's GPUs, cubed: ρ³ with
// ρ = Σ over pinned GPU classes allowing the model (model_share < 1) of p·g·k / model_share,
// over Σ p·g·k of every GPU class. ρ = 1: the pinned tasks alone would fill the model's GPUs
// by the time the pool is full. 0 everywhere when no class is pinned.
std::vector<double> ModelPressure(const std::vector<FragClass>& workload);
// How much of each (node type, model)'s GPUs the pinned classes will take by the time the pool is
// full: the workload scaled to the pool's GPUs, each pinned GPU class (model_share < 1) spread over
// the GPUs of its models on the node types that could host it when empty, the classes with the
// least such capacity first, each in proportion to the room the earlier ones left (what finds no
// room, in proportion to capacity). Indexed by PoolShape::types, then model id (64 entries; a
// type without live nodes or GPUs has an empty row). 1 = that model's GPUs there are all needed
// by pinned tasks; a 1-GPU H100 node stays low where only 8-GPU jobs are pinned to H100s.
std::vector<std::vector<double>> PinnedLoad(const std::vector<FragClass>& workload,
                                            const PoolShape& pool);
// How partitioned the pool is by model pins: the share of the pool's GPUs a GPU class may use
// (FragClass::model_share), averaged over the classes weighted by GPU demand (p·g·k). 1: every
// class may use every GPU (also without GPU classes); 1/6: the demand is split into slices of a
// sixth of the pool each. At or below 1/3 fgd-pack works in partitioned mode (best fit inside a
// model's slice, routing by pressure first).
double ModelPartition(const std::vector<FragClass>& workload);
// How short the pool's CPU is for the workload: the workload's milli-cores per milli-GPU over the
// pool's (CPU-only classes included). 1: the pool's CPU just feeds its GPUs at the workload's
// mix; above, CPU runs out first. 0 without CPU demand or pool CPU.
double CpuScarcity(const std::vector<FragClass>& workload, const PoolShape& pool);
// The GPU tasks' milli-GPU per milli-core (CPU-only classes left out; 0 without CPU demand).
double GpuTasksGpuPerCpu(const std::vector<FragClass>& workload);
// How much of the CPU the GPU tasks need the lean nodes cannot give: with r = the GPU tasks'
// mean cores per GPU, Σ over GPU nodes of max(0, r · GPUs − cores), over r × the pool's GPUs.
// 0: every node can feed its GPUs at the mean; at kCpuLeanGate (0.05) and above fgd-pack weighs
// where CPU goes (stranded GPU and stranded CPU). 0 without GPU demand or pool GPUs.
double CpuLeanShortfall(const std::vector<FragClass>& workload, const PoolShape& pool);
// The CPU-hole cap, in milli-cores: with the classes sorted by cores, the size up to which
// Σ p × (milli-GPU − mean × milli-cores) — the GPU they bring beyond the workload's mean GPU per
// core (GpuPerCpu, CPU-only classes included) — is largest. 0 when no prefix brings more than the
// mean (e.g. one class), or without CPU demand. Where CpuScarcity ≥ 1 fgd-pack rewards cutting
// free CPU above it (fgd_pack.cc, kCpuHoleWeight).
int64_t CpuHoleCap(const std::vector<FragClass>& workload);
double FgdPackCost(double delta_h, double delta_f, double delta_stranded, double delta_waste,
                   double fgd_weight);
int64_t FgdPackScore(double cost, double fgd_weight);

}  // namespace gpupool::placement
