/* tilejit.h is a C header: this file, compiled as C11 with warnings as
 * errors, fails the build if it stops being one. */
#include "tilejit/tilejit.h"

int tilejit_c_header_check(void) {
  tilejit_kernel *kernel = NULL;
  const char *set[] = {"BLOCK_SIZE=1024"};
  tilejit_arg arg = {TILEJIT_ARG_I32, TILEJIT_I32, NULL, 0, 7, 0.0f};
  int64_t grid[3] = {1, 1, 1};
  if (tilejit_kernel_compile("ce_tvd_loss_sum", TILEJIT_F32, set, 1, NULL,
                             NULL, 0, NULL, &kernel) != 0)
    return 1;
  int status = tilejit_kernel_run_cpu(kernel, grid, &arg, 1);
  tilejit_kernel_destroy(kernel);
  if (tilejit_kernel_compile_flags("ce_tvd_loss_sum", TILEJIT_F32, NULL, 0,
                                   NULL, NULL, 0, NULL, TILEJIT_COMPILE_TUNED,
                                   &kernel) != 0)
    return 1;
  tilejit_kernel_usage usage;
  if (tilejit_kernel_config_source(kernel)[0] == '\0' ||
      tilejit_kernel_resources(kernel, &usage) == 0)
    status = 1; /* a tuned compile says why; nothing is loaded yet */
  tilejit_kernel_destroy(kernel);
  if (tilejit_kernel_count() <= 0 || tilejit_kernel_name_at(0) == NULL)
    status = 1;
  tilejit_linear_ce_args lce;
  tilejit_linear_ce_args_init(&lce);
  if (lce.ignore_index != -100)
    status = 1;
  return status;
}
