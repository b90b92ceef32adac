/*===- tilejit.h - the C ABI of tilejit -----------------------------------===*
 *
 * What other languages call (Python's ctypes, Rust, Julia): opaque handles,
 * plain C types, and an int status on every call that can fail. On failure
 * a call returns nonzero and tilejit_last_error() (per thread) says why;
 * nothing throws across this boundary. The C++ API behind it is
 * tilejit/Kernel.h (kernels) and tilejit/ops/ (the losses). From ctypes,
 * set each function's argtypes and restype: a size_t or int64 passed
 * without them is truncated to an int.
 *
 *===----------------------------------------------------------------------===*/
#ifndef TILEJIT_TILEJIT_H
#define TILEJIT_TILEJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TILEJIT_API __attribute__((visibility("default")))
#else
#define TILEJIT_API
#endif

/* Element types (tilejit::DType, same order). */
typedef enum {
  TILEJIT_I1 = 0,
  TILEJIT_I32 = 1,
  TILEJIT_I64 = 2,
  TILEJIT_BF16 = 3,
  TILEJIT_F16 = 4,
  TILEJIT_F32 = 5
} tilejit_dtype;

/* What one kernel argument is (tilejit::KernelArg::Kind, same order). */
typedef enum {
  TILEJIT_ARG_POINTER = 0,
  TILEJIT_ARG_I32 = 1,
  TILEJIT_ARG_I64 = 2,
  TILEJIT_ARG_F32 = 3
} tilejit_arg_kind;

/* One kernel argument. A pointer is a device address for a launch, a host
 * address for a CPU run (with num_elements, the elements of dtype it holds);
 * scalars use i (I32, I64) or f (F32). */
typedef struct {
  int32_t kind;  /* tilejit_arg_kind */
  int32_t dtype; /* tilejit_dtype: the pointee's, or the scalar's */
  void *ptr;
  int64_t num_elements;
  int64_t i;
  float f;
} tilejit_arg;

typedef struct tilejit_kernel tilejit_kernel;

/* "MAJOR.MINOR.PATCH" of the library. */
TILEJIT_API const char *tilejit_version(void);

/* The registered kernel specs (built in, and registered since): how many,
 * and the name of the i-th (NULL outside [0, count)); names stay valid for
 * the process. */
TILEJIT_API int32_t tilejit_kernel_count(void);
TILEJIT_API const char *tilejit_kernel_name_at(int32_t i);

/* The message of this thread's last call that can fail: why it failed, or
 * "" when it succeeded. Valid until the next call on this thread. */
TILEJIT_API const char *tilejit_last_error(void);

/* Builds kernel `name` (a registered spec: `tilejit list`) for `dtype`,
 * with `n_set` "NAME=VALUE" parameters and `n_shape` launch-shape entries
 * (names and values, e.g. "BT" 4096), for GPU target `arch` (NULL or "":
 * the current device's). On success *out owns a handle. */
TILEJIT_API int tilejit_kernel_compile(const char *name, int32_t dtype,
                                       const char *const *set, size_t n_set,
                                       const char *const *shape_names,
                                       const int64_t *shape_values,
                                       size_t n_shape, const char *arch,
                                       tilejit_kernel **out);

/* Flags of tilejit_kernel_compile_flags, or-ed together. */
enum {
  /* With n_set = 0: the config `tilejit tune` stored for the current GPU,
   * dtype and shape (which must hold the kernel's tuning sizes), else the
   * defaults; without a GPU, the defaults. tilejit_kernel_config_source says
   * which. */
  TILEJIT_COMPILE_TUNED = 1u
};

/* tilejit_kernel_compile with `flags` (TILEJIT_COMPILE_*; 0 is
 * tilejit_kernel_compile). Unknown flags are an error. */
TILEJIT_API int tilejit_kernel_compile_flags(
    const char *name, int32_t dtype, const char *const *set, size_t n_set,
    const char *const *shape_names, const int64_t *shape_values,
    size_t n_shape, const char *arch, uint32_t flags, tilejit_kernel **out);

/* Frees a handle (NULL is ignored). */
TILEJIT_API void tilejit_kernel_destroy(tilejit_kernel *kernel);

/* The kernel's name and its config ("BLOCK_SIZE=4096,num_warps=8,..."),
 * owned by the handle. */
TILEJIT_API const char *tilejit_kernel_name(const tilejit_kernel *kernel);
TILEJIT_API const char *tilejit_kernel_config(const tilejit_kernel *kernel);

/* Where the config came from: "default", "set", "tuned, <file>", or
 * "default; <why no tuned config applies>". Owned by the handle. */
TILEJIT_API const char *
tilejit_kernel_config_source(const tilejit_kernel *kernel);

/* The declared parameters: how many, and parameter i's name (owned by the
 * handle), whether it is a pointer, and its dtype (a pointer's pointee). */
TILEJIT_API int32_t tilejit_kernel_num_params(const tilejit_kernel *kernel);
TILEJIT_API int tilejit_kernel_param(const tilejit_kernel *kernel, int32_t i,
                                     const char **name, int32_t *is_pointer,
                                     int32_t *dtype);

/* Runs grid[0] x grid[1] x grid[2] programs in the CPU interpreter on host
 * buffers. Arguments are checked against the parameters first. */
TILEJIT_API int tilejit_kernel_run_cpu(const tilejit_kernel *kernel,
                                       const int64_t grid[3],
                                       const tilejit_arg *args, size_t n_args);

/* Compiles (through the disk cache) for the current device if not done yet;
 * call it before capturing a launch in a CUDA graph. */
TILEJIT_API int tilejit_kernel_compile_gpu(const tilejit_kernel *kernel);

/* What one program of the loaded kernel uses on the GPU. */
typedef struct {
  int32_t threads;   /* per program (thread block) */
  int32_t registers; /* per thread */
  int32_t static_shared_bytes;
  int32_t dynamic_shared_bytes;
} tilejit_kernel_usage;

/* Fills *usage; fails before tilejit_kernel_compile_gpu has loaded the
 * kernel. */
TILEJIT_API int tilejit_kernel_resources(const tilejit_kernel *kernel,
                                         tilejit_kernel_usage *usage);

/* Launches on `stream` (a CUstream; NULL: the legacy default stream) after
 * checking the arguments; returns without waiting for the kernel. */
TILEJIT_API int tilejit_kernel_launch(const tilejit_kernel *kernel,
                                      const int64_t grid[3],
                                      const tilejit_arg *args, size_t n_args,
                                      void *stream);

/* Tunes kernel `name` on the current GPU for `dtype`, as `tilejit tune NAME`
 * does: a kernel whose spec declares how to run it (tilejit_kernel_compile
 * takes any kernel; this one only those, e.g. "jsd" and a kernel library's
 * own). `size_names`/`size_values` give every size the spec declares (e.g.
 * "BT" 4096, "V" 151936) and `set` optional "NAME=VALUE" scalar arguments.
 * Each candidate config runs on generated inputs, is checked against the
 * spec's fp64 reference and timed over `repetitions` launches (median, L2
 * flushed before each); the fastest is stored in the tuning database
 * ($TILEJIT_CACHE_DIR/tuning; not with TILEJIT_CACHE=0), where
 * TILEJIT_COMPILE_TUNED finds it. An entry stored before is returned as it
 * is unless `retune`. Writes the winner ("BLOCK_SIZE=2048,num_warps=8") to
 * `best`, NUL-terminated, truncated to `best_bytes`. Fails without a GPU,
 * for a kernel with no run declaration, or when no candidate passes. */
TILEJIT_API int tilejit_kernel_tune(const char *name, int32_t dtype,
                                    const char *const *size_names,
                                    const int64_t *size_values, size_t n_sizes,
                                    const char *const *set, size_t n_set,
                                    int32_t repetitions, int32_t retune,
                                    char *best, size_t best_bytes);

/*===----------------------------------------------------------------------===*
 * The reduced CE+TVD loss and its gradient on the caller's memory
 * (tilejit/ops/FusedCeTvd.h has the contract: shapes, strides in elements,
 * in place when grad == student, no host synchronization).
 *===----------------------------------------------------------------------===*/

/* Where an op runs. */
typedef enum { TILEJIT_DEVICE_GPU = 0, TILEJIT_DEVICE_CPU = 1 } tilejit_device;

typedef struct {
  int32_t dtype;        /* tilejit_dtype of student, teacher, grad */
  int64_t bt, v;        /* rows, vocab */
  const void *student;  /* (bt, v), rows row_stride apart */
  const void *teacher;  /* (bt, v), rows teacher_stride apart */
  int64_t row_stride;   /* 0: v */
  int64_t teacher_stride; /* 0: row_stride; another value is an error */
  const int64_t *target; /* (bt) */
  void *grad;           /* (bt, v), rows grad_stride apart; == student: in place */
  int64_t grad_stride;  /* 0: row_stride */
  float *loss;          /* (1) */
  float *ce, *tvd;      /* (bt) each, or NULL */
  int32_t *bad_target;  /* (1), or NULL */
  int64_t ignore_index; /* usually -100 */
  double alpha, beta;
  int32_t mean;         /* 1: mean over valid rows, 0: sum */
  const char *const *set; /* "NAME=VALUE" of fused_ce_tvd_loss_grad */
  size_t n_set;
} tilejit_ce_tvd_reduced_args;

/* Fills *args with the defaults: no pointers, contiguous rows,
 * ignore_index -100, alpha = beta = 1, mean. Call it before setting fields:
 * a zeroed struct means ignore_index 0 and weights 0. */
TILEJIT_API void
tilejit_ce_tvd_reduced_args_init(tilejit_ce_tvd_reduced_args *args);

/* Bytes of workspace tilejit_ce_tvd_reduced needs, into *bytes. */
TILEJIT_API int
tilejit_ce_tvd_reduced_workspace_bytes(const tilejit_ce_tvd_reduced_args *args,
                                       size_t *bytes);

/* Compiles and loads the GPU kernels the call needs (before graph capture);
 * NULL or a buffer of `config_capacity` bytes receives the config used. */
TILEJIT_API int
tilejit_ce_tvd_reduced_prepare(const tilejit_ce_tvd_reduced_args *args,
                               char *config, size_t config_capacity);

/* Enqueues the loss and gradient on `stream` (a CUstream; ignored on the
 * CPU) with `workspace_bytes` of workspace. */
TILEJIT_API int tilejit_ce_tvd_reduced(const tilejit_ce_tvd_reduced_args *args,
                                       void *workspace, size_t workspace_bytes,
                                       int32_t device, void *stream);

/*===-- The unreduced CE+TVD (tilejit/ops/FusedCeTvd.h) --------------------===*
 * ce_i, tvd_i per row and the state the backward reads; the backward's
 * gradient from per-row upstream gradients. */
typedef struct {
  int32_t dtype;         /* tilejit_dtype of student, teacher, grad */
  int64_t bt, v;         /* rows, vocab */
  const void *student;   /* (bt, v), rows row_stride apart */
  const void *teacher;   /* (bt, v), rows teacher_stride apart */
  int64_t row_stride;    /* 0: v */
  int64_t teacher_stride; /* 0: row_stride; another value is an error */
  const int64_t *target; /* (bt) */
  int64_t ignore_index;  /* usually -100 */
  const char *forward_kernel; /* NULL or "": chosen for the GPU */
  const char *const *set;     /* "NAME=VALUE", each kernel takes its own */
  size_t n_set;
} tilejit_ce_tvd_args;

/* The defaults: no pointers, contiguous rows, ignore_index -100, the forward
 * kernel chosen for the GPU. */
TILEJIT_API void tilejit_ce_tvd_args_init(tilejit_ce_tvd_args *args);

/* Bytes of the state between forward and backward (caller-owned). */
TILEJIT_API size_t tilejit_ce_tvd_state_bytes(int64_t bt);

/* Compiles and loads both GPU kernels (before graph capture). */
TILEJIT_API int tilejit_ce_tvd_prepare(const tilejit_ce_tvd_args *args);

/* ce, tvd: (bt) f32 each; state: tilejit_ce_tvd_state_bytes(bt) bytes. */
TILEJIT_API int tilejit_ce_tvd_forward(const tilejit_ce_tvd_args *args,
                                       float *ce, float *tvd, void *state,
                                       int32_t device, void *stream);

/* grad: (bt, v) in dtype, rows grad_stride (0: v) apart; grad_ce, grad_tvd:
 * (bt) f32 upstream gradients. */
TILEJIT_API int tilejit_ce_tvd_backward(const tilejit_ce_tvd_args *args,
                                        const void *state,
                                        const float *grad_ce,
                                        const float *grad_tvd, void *grad,
                                        int64_t grad_stride, int32_t device,
                                        void *stream);

/*===-- The chunked linear cross-entropy (tilejit/ops/LinearCe.h) ----------===*/
typedef enum {
  TILEJIT_REDUCTION_NONE = 0,
  TILEJIT_REDUCTION_MEAN = 1,
  TILEJIT_REDUCTION_SUM = 2
} tilejit_reduction;

typedef enum {
  TILEJIT_GEMM_CUBLASLT = 0,
  TILEJIT_GEMM_TILEJIT = 1, /* lce_gemm: tile dot on tensor cores */
  TILEJIT_GEMM_AUTO = 2     /* per problem the faster, timed by prepare */
} tilejit_gemm_backend;

typedef struct {
  int32_t dtype;              /* tilejit_dtype of input, weight, grad_input */
  int64_t n, d, v;            /* rows, hidden, vocab */
  const void *input;          /* (n, d), rows input_stride (0: d) apart */
  int64_t input_stride;
  const void *weight;         /* (v, d), rows weight_stride (0: d) apart */
  int64_t weight_stride;
  const float *bias;          /* (v) f32, or NULL */
  const int64_t *target;      /* (n) */
  const float *class_weight;  /* (v) f32, or NULL */
  const float *grad_output;   /* (n) f32: reduction none only */
  int64_t ignore_index;       /* usually -100 */
  double label_smoothing, z_loss, softcap; /* 0: off */
  int32_t reduction;          /* tilejit_reduction */
  float *loss;                /* (2): loss, z-loss part (mean, sum) */
  float *row_loss, *row_z_loss, *lse; /* (n) each, or NULL (none: row_loss) */
  void *grad_input;           /* (n, d) dtype, rows grad_input_stride apart */
  int64_t grad_input_stride;  /* 0: d */
  void *grad_weight;          /* (v, d) f32 (bf16 with bf16_grad_accumulation) */
  void *grad_bias;            /* (v), with a bias */
  int32_t *bad_target;        /* (1), or NULL */
  int64_t chunk_rows;         /* 0: from memory_budget_bytes */
  int64_t memory_budget_bytes; /* 0: one chunk */
  int64_t gemm_workspace_bytes; /* cuBLASLt's, inside the workspace */
  int32_t narrow_logits, bf16_grad_accumulation, gemm_backend;
  const char *const *set;     /* "NAME=VALUE" of lce_logits_grad, lce_gemm */
  size_t n_set;
} tilejit_linear_ce_args;

/* The defaults: no pointers, contiguous rows, ignore_index -100, no
 * smoothing, z-loss or softcap, mean, one chunk, 8 MiB for cuBLASLt,
 * cuBLASLt GEMMs. */
TILEJIT_API void tilejit_linear_ce_args_init(tilejit_linear_ce_args *args);

/* Bytes of workspace tilejit_linear_ce needs on `device`, into *bytes. */
TILEJIT_API int
tilejit_linear_ce_workspace_bytes(const tilejit_linear_ce_args *args,
                                  int32_t device, size_t *bytes);

/* GPU: compiles, and times cuBLASLt's first `gemm_candidates` algorithms
 * per GEMM (1: none) and, with tune_chunk_rows, the chunk sizes, running
 * the call on its own buffers; synchronizes. *chunk_rows (or NULL)
 * receives the rows per chunk chosen. */
TILEJIT_API int tilejit_linear_ce_prepare(const tilejit_linear_ce_args *args,
                                          void *workspace,
                                          size_t workspace_bytes,
                                          int32_t gemm_candidates,
                                          int32_t tune_chunk_rows,
                                          void *stream, int64_t *chunk_rows);

/* Enqueues the loss and gradients on `stream` (ignored on the CPU). */
TILEJIT_API int tilejit_linear_ce(const tilejit_linear_ce_args *args,
                                  void *workspace, size_t workspace_bytes,
                                  int32_t device, void *stream);

/*===-- Cross-entropy over given logits (tilejit/ops/CrossEntropy.h) ------===*/
typedef struct {
  int32_t dtype;              /* tilejit_dtype of logits and grad */
  int64_t bt, v;              /* rows, vocab */
  const void *logits;         /* (bt, v), contiguous */
  void *grad;                 /* (bt, v), contiguous; may be logits */
  const int64_t *target;      /* (bt) */
  const float *class_weight;  /* (v) f32, or NULL */
  const float *grad_output;   /* (bt) f32: reduction none only; NULL: 1s */
  int64_t ignore_index;       /* usually -100 */
  double label_smoothing, z_loss, softcap; /* 0: off */
  int32_t reduction;          /* tilejit_reduction */
  float *loss;                /* (2): loss, z-loss part (mean, sum) */
  float *row_loss, *row_z_loss; /* (bt) each */
  int32_t *bad_target;        /* (1), or NULL */
  double grad_scale;          /* the gradient is stored times this (> 0) */
} tilejit_cross_entropy_args;

/* The defaults: no pointers, ignore_index -100, no smoothing, z-loss or
 * softcap, mean, grad_scale 1. */
TILEJIT_API void
tilejit_cross_entropy_args_init(tilejit_cross_entropy_args *args);

/* Bytes of workspace tilejit_cross_entropy needs, into *bytes. */
TILEJIT_API int
tilejit_cross_entropy_workspace_bytes(const tilejit_cross_entropy_args *args,
                                      size_t *bytes);

/* Compiles and, on the GPU, loads the kernels (before graph capture). */
TILEJIT_API int
tilejit_cross_entropy_prepare(const tilejit_cross_entropy_args *args,
                              int32_t device);

/* The per-row losses, the reduced loss (mean, sum) and the gradient on
 * `stream` (ignored on the CPU). */
TILEJIT_API int tilejit_cross_entropy(const tilejit_cross_entropy_args *args,
                                      void *workspace, size_t workspace_bytes,
                                      int32_t device, void *stream);

/*===-- KL and JS divergence distillation (tilejit/ops/Distillation.h) ---===*/
typedef enum {
  TILEJIT_KL_FORWARD = 0, /* KL(p || q) of softmax(t / T), softmax(s / T) */
  TILEJIT_KL_REVERSE = 1, /* KL(q || p) */
  TILEJIT_JSD = 2,        /* LigerJSD of log-probabilities, with beta */
  TILEJIT_JSD_LOGITS = 3  /* the same of log softmax(logits / T) */
} tilejit_divergence;

typedef struct {
  int32_t divergence;         /* tilejit_divergence */
  int32_t dtype;              /* tilejit_dtype of student, teacher, grad */
  int64_t bt, v;              /* rows, vocab */
  const void *student;        /* (bt, v): log q (JSD), else logits */
  const void *teacher;        /* (bt, v) contiguous, as the student */
  void *grad;                 /* (bt, v) contiguous; may be student */
  const int64_t *label;       /* (bt), or NULL: every row counts */
  int64_t ignore_index;       /* usually -100 */
  double temperature;         /* KL, JSD_LOGITS: T > 0 */
  double beta;                /* JSD, JSD_LOGITS: in [0, 1] */
  int32_t reduction;          /* tilejit_reduction; mean is "batchmean" */
  const float *grad_output;   /* (bt) f32: reduction none only; NULL: 1s */
  float *loss;                /* (1): mean, sum */
  float *row_loss;            /* (bt) */
} tilejit_distillation_args;

/* The defaults: no pointers, forward KL, bf16, ignore_index -100,
 * temperature 1, beta 0.5, mean. */
TILEJIT_API void
tilejit_distillation_args_init(tilejit_distillation_args *args);

/* Bytes of workspace tilejit_distillation needs, into *bytes. */
TILEJIT_API int
tilejit_distillation_workspace_bytes(const tilejit_distillation_args *args,
                                     size_t *bytes);

/* Compiles and, on the GPU, loads the kernels (before graph capture). */
TILEJIT_API int
tilejit_distillation_prepare(const tilejit_distillation_args *args,
                             int32_t device);

/* The per-row divergences, the reduced loss (mean, sum) and the student's
 * gradient on `stream` (ignored on the CPU). */
TILEJIT_API int tilejit_distillation(const tilejit_distillation_args *args,
                                     void *workspace, size_t workspace_bytes,
                                     int32_t device, void *stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TILEJIT_TILEJIT_H */
