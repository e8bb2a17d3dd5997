/*
 * The Azure ML guide's example.py in C: every rank all-reduces a tensor [1]
 * on its GPU and prints what it got, which is the world size.
 *
 *     amlrun --nproc-per-node gpu build/examples/nccl_allreduce
 *     mpirun -np 8 build/examples/nccl_allreduce
 *
 * libamldist finds the layout, picks the GPU and hands rank 0's
 * ncclUniqueId to every rank; no MPI is needed in the program.
 */
#include <stdio.h>

#include <amldist.h>
/* nccl.h declares a few functions with () instead of (void). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime_api.h>
#include <nccl.h>
#pragma GCC diagnostic pop

int main(void)
{
    amldist_t *layout;
    ncclComm_t comm;
    float one = 1.0f, got = 0.0f, *dev = NULL;
    int rc = amldist_init(&layout, 0), device = -1;
    if (rc < 0) {
        fprintf(stderr, "nccl_allreduce: %s\n", amldist_last_error());
        return 1;
    }
    int rank = amldist_rank(layout), world = amldist_world_size(layout);
    if ((rc = amldist_nccl_comm_init(layout, -1, &comm, NULL)) < 0) {
        fprintf(stderr, "nccl_allreduce: %s (%s)\n", amldist_last_error(),
                amldist_err_name(rc));
        amldist_free(layout);
        return 1;
    }
    cudaGetDevice(&device);
    ncclResult_t nr = ncclSuccess;
    if (cudaMalloc((void **)&dev, sizeof *dev) != cudaSuccess ||
        cudaMemcpy(dev, &one, sizeof one, cudaMemcpyHostToDevice) !=
            cudaSuccess ||
        (nr = ncclAllReduce(dev, dev, 1, ncclFloat, ncclSum, comm, 0)) !=
            ncclSuccess ||
        cudaMemcpy(&got, dev, sizeof got, cudaMemcpyDeviceToHost) !=
            cudaSuccess) {
        fprintf(stderr, "nccl_allreduce: rank %d: %s\n", rank,
                nr != ncclSuccess ? ncclGetErrorString(nr)
                                  : cudaGetErrorString(cudaGetLastError()));
        /* Abort, not destroy: a peer may be gone, and destroy would wait. */
        ncclCommAbort(comm);
        cudaFree(dev);
        amldist_free(layout);
        return 1;
    }
    printf("rank %d/%d on cuda:%d: all_reduce([1]) = [%g]\n", rank, world,
           device, got);
    cudaFree(dev);
    ncclCommDestroy(comm);
    amldist_free(layout);
    return got == (float)world ? 0 : 1;
}
