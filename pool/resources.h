// Resources: exact integer quantities of GPU capacity.
//
// Compute is in milli-TFLOPS (dense bf16, or fp16 where a card has no bf16), memory in MiB.
// Invariant for stored capacities: never negative; a field that is absent is zero. Arithmetic
// helpers saturate at zero on subtraction only where the caller asks (SubtractClamped); plain
// operator- may go negative and callers check Fits() first.
//
// Overcommit ratios are kept as integer per-mille (1000 = 1.0×) so that offered capacity is
// exact: offered = physical × ratio / 1000, rounded down.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <string>

namespace gpupool {

struct Resources {
  int64_t milli_tflops = 0;
  int64_t vram_mib = 0;

  bool IsZero() const { return milli_tflops == 0 && vram_mib == 0; }
  bool IsNonNegative() const { return milli_tflops >= 0 && vram_mib >= 0; }
  // True when `need` fits inside *this on both dimensions.
  bool Fits(const Resources& need) const {
    return need.milli_tflops <= milli_tflops && need.vram_mib <= vram_mib;
  }

  Resources& operator+=(const Resources& o) {
    milli_tflops += o.milli_tflops;
    vram_mib += o.vram_mib;
    return *this;
  }
  Resources& operator-=(const Resources& o) {
    milli_tflops -= o.milli_tflops;
    vram_mib -= o.vram_mib;
    return *this;
  }
  friend Resources operator+(Resources a, const Resources& b) { return a += b; }
  friend Resources operator-(Resources a, const Resources& b) { return a -= b; }
  friend bool operator==(const Resources&, const Resources&) = default;

  // "12.500 TFLOPS, 40960 MiB"
  std::string ToString() const;
};

// An overcommit ratio in per-mille. 1000 = no overcommit.
struct Ratio {
  int64_t permille = 1000;

  static Ratio FromDouble(double r) { return Ratio{static_cast<int64_t>(r * 1000.0 + 0.5)}; }
  double ToDouble() const { return static_cast<double>(permille) / 1000.0; }
  int64_t Apply(int64_t physical) const { return physical * permille / 1000; }
  friend bool operator==(const Ratio&, const Ratio&) = default;
};

// Offered capacity of a physical amount under a pool's compute and memory ratios.
inline Resources Offered(const Resources& physical, Ratio compute, Ratio memory) {
  return Resources{compute.Apply(physical.milli_tflops), memory.Apply(physical.vram_mib)};
}

// Formats milli-TFLOPS as "12.5" (trailing zeros trimmed).
std::string FormatTflops(int64_t milli_tflops);

}  // namespace gpupool
