// Compute hooks: placeholder until the launch hooks land.
#include "agent/interposer/interposer.h"

void gpupool::interposer::ChargeCompute(uint64_t) {}
