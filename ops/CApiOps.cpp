//===- CApiOps.cpp - tilejit.h's losses over tilejit/ops/ -----------------===//
#include "tilejit/tilejit.h"

#include "ops/CApiGuard.h"
#include "tilejit/ops/FusedCeTvd.h"

#include <cstring>

using namespace tilejit;
using capi::guarded;
using capi::require;

namespace {

ops::CeTvdReducedArgs argsOf(const tilejit_ce_tvd_reduced_args *c) {
  require(c != nullptr, "null tilejit_ce_tvd_reduced_args");
  require(c->dtype >= TILEJIT_I1 && c->dtype <= TILEJIT_F32,
          "unknown tilejit_dtype");
  require(c->set || c->n_set == 0, "null parameter array");
  ops::CeTvdReducedArgs a;
  a.dtype = DType(c->dtype);
  a.BT = c->bt;
  a.V = c->v;
  a.student = c->student;
  a.teacher = c->teacher;
  a.rowStride = c->row_stride;
  a.target = c->target;
  a.grad = c->grad;
  a.gradStride = c->grad_stride;
  a.loss = c->loss;
  a.ce = c->ce;
  a.tvd = c->tvd;
  a.badTarget = c->bad_target;
  a.ignoreIndex = c->ignore_index;
  a.alpha = c->alpha;
  a.beta = c->beta;
  a.mean = c->mean != 0;
  for (size_t i = 0; i < c->n_set; ++i) {
    require(c->set[i] != nullptr, "null parameter string");
    a.set.push_back(c->set[i]);
  }
  return a;
}

} // namespace

extern "C" {

int tilejit_ce_tvd_reduced_workspace_bytes(
    const tilejit_ce_tvd_reduced_args *args, size_t *bytes) {
  return guarded([&] {
    require(bytes != nullptr, "null output");
    *bytes = ops::ceTvdReducedWorkspaceBytes(argsOf(args));
  });
}

int tilejit_ce_tvd_reduced_prepare(const tilejit_ce_tvd_reduced_args *args,
                                   char *config, size_t config_capacity) {
  return guarded([&] {
    std::string used = ops::prepareCeTvdReduced(argsOf(args));
    if (config && config_capacity > 0) {
      size_t n = std::min(used.size(), config_capacity - 1);
      std::memcpy(config, used.data(), n);
      config[n] = '\0';
    }
  });
}

int tilejit_ce_tvd_reduced(const tilejit_ce_tvd_reduced_args *args,
                           void *workspace, size_t workspace_bytes,
                           int32_t device, void *stream) {
  return guarded([&] {
    require(device == TILEJIT_DEVICE_GPU || device == TILEJIT_DEVICE_CPU,
            "unknown tilejit_device");
    ops::ceTvdReduced(argsOf(args), workspace, workspace_bytes,
                      device == TILEJIT_DEVICE_GPU ? ops::Device::Gpu
                                                   : ops::Device::Cpu,
                      static_cast<CUstream>(stream));
  });
}

} // extern "C"
