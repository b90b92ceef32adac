//===- KlDivReference.cpp - fp64 reference for KL distillation ------------===//
#include "kernels_spec/reference/KlDivReference.h"

#include "tilejit/Error.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace tilejit {
namespace ref {

/// log softmax(x / T) of a row, the max subtracted first.
std::vector<double> logSoftmax(const double *x, int64_t V, double T) {
  std::vector<double> out(x, x + V);
  for (double &v : out)
    v /= T;
  double m = *std::max_element(out.begin(), out.end());
  double sum = 0;
  for (double v : out)
    sum += std::exp(v - m);
  double lse = m + std::log(sum);
  for (double &v : out)
    v -= lse;
  return out;
}

double klDivRow(const double *s, const double *t, int64_t V,
                double temperature, bool reverse, double *grad) {
  if (V < 1 || !(temperature > 0))
    throw Error("kl_div reference: needs V >= 1 and a temperature > 0 (got "
                "V = " + std::to_string(V) + ", T = " +
                std::to_string(temperature) + ")");
  std::vector<double> logQ = logSoftmax(s, V, temperature);
  std::vector<double> logP = logSoftmax(t, V, temperature);
  double kl = 0;
  for (int64_t v = 0; v < V; ++v) {
    double q = std::exp(logQ[v]), p = std::exp(logP[v]);
    // A class the weighting distribution gives 0 adds nothing (0 * inf).
    if (reverse ? q > 0 : p > 0)
      kl += reverse ? q * (logQ[v] - logP[v]) : p * (logP[v] - logQ[v]);
  }
  if (grad)
    for (int64_t v = 0; v < V; ++v) {
      double q = std::exp(logQ[v]), p = std::exp(logP[v]);
      double d = !reverse ? q - p : q > 0 ? q * (logQ[v] - logP[v] - kl) : 0;
      grad[v] = d / temperature;
    }
  return kl;
}

} // namespace ref
} // namespace tilejit
