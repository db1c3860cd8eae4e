// first-fit: the first node in tie order that fits; devices by best fit inside the node.
//
// A StrategyPlugin (plugin.h); MakePlugin(Strategy::kFirstFit) returns it. Thread safety: none.
#pragma once

#include "placement/plugin.h"
