//===- JsdReference.cpp - fp64 reference for the generalized JSD ----------===//
#include "kernels_spec/reference/JsdReference.h"

#include "kernels_spec/reference/KlDivReference.h"
#include "tilejit/Error.h"

#include <cmath>
#include <string>
#include <vector>

namespace tilejit {
namespace ref {

/// p log p with its limit 0 at p = 0 (log p = -inf).
static double xlogx(double p, double logP) { return p == 0 ? 0 : p * logP; }

double jsdRow(const double *x, const double *y, int64_t V, double beta,
              double *grad) {
  if (V < 0 || !(beta >= 0 && beta <= 1))
    throw Error("jsd reference: needs V >= 0 and beta in [0, 1] (got V = " +
                std::to_string(V) + ", beta = " + std::to_string(beta) + ")");
  double loss = 0;
  for (int64_t v = 0; v < V; ++v) {
    double q = std::exp(x[v]), p = std::exp(y[v]);
    double term, d;
    if (beta == 0) { // KL(P || Q)
      term = p == 0 ? 0 : p * (y[v] - x[v]);
      d = -p;
    } else if (beta == 1) { // KL(Q || P)
      term = q == 0 ? 0 : q * (x[v] - y[v]);
      d = term + q;
    } else {
      double m = beta * p + (1 - beta) * q;
      double logM = std::log(m);
      term = beta * xlogx(p, y[v]) + (1 - beta) * xlogx(q, x[v]) -
             xlogx(m, logM);
      d = q == 0 ? 0 : (1 - beta) * q * (x[v] - logM);
    }
    loss += term;
    if (grad)
      grad[v] = d;
  }
  return loss;
}

double jsdLogitsRow(const double *s, const double *t, int64_t V, double beta,
                    double temperature, double *grad) {
  if (V < 1 || !(temperature > 0))
    throw Error("jsd_logits reference: needs V >= 1 and a temperature > 0 "
                "(got V = " + std::to_string(V) + ", T = " +
                std::to_string(temperature) + ")");
  std::vector<double> x = logSoftmax(s, V, temperature);
  std::vector<double> y = logSoftmax(t, V, temperature);
  std::vector<double> g(V);
  double loss = jsdRow(x.data(), y.data(), V, beta, g.data());
  if (grad) {
    double sum = 0;
    for (double d : g)
      sum += d;
    for (int64_t v = 0; v < V; ++v)
      grad[v] = (g[v] - std::exp(x[v]) * sum) / temperature;
  }
  return loss;
}

} // namespace ref
} // namespace tilejit
