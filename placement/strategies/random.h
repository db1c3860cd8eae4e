// random: a feasible node uniformly at random, drawn from the pool's seed (no global randomness).
//
// A StrategyPlugin (plugin.h); MakePlugin(Strategy::kRandom) returns it. Thread safety: none.
#pragma once

#include "placement/plugin.h"
