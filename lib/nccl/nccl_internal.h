/* What lib/nccl tells the rest of the library. */
#ifndef AMLDIST_NCCL_INTERNAL_H
#define AMLDIST_NCCL_INTERNAL_H

#include <stddef.h>

/* Two lines for amldist_build_info(): NCCL and the CUDA runtime, each
 * "yes, VERSION (FILE)" as amldist_nccl_comm_init() would load it (and
 * loads it, once per process), or "no (why)"; and the versions the build
 * saw.  The runtime is loaded, not initialized: no GPU is touched. */
void amldist__nccl_describe(char *nccl, size_t nccl_size, char *cuda,
                            size_t cuda_size);

#endif /* AMLDIST_NCCL_INTERNAL_H */
