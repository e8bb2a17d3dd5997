/*
 * Stand-in libcudart and libnccl for testing libamldist's NCCL paths on
 * machines without a GPU.  THESE ARE NOT CUDA AND NOT NCCL: device memory
 * is host memory, "kernels" run when a stream is progressed, and collectives
 * exchange data through files in a temporary directory.  They test our code
 * (device choice, unique-id exchange, error handling, result checking), never
 * NVIDIA's.
 *
 * This header is what the two libraries (and the test driver) share: the
 * stream queue of the fake runtime, which the fake NCCL queues its
 * collectives on, and the half / bfloat16 conversions.
 */
#ifndef STANDIN_H
#define STANDIN_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* nccl.h declares a few functions with () instead of (void). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime_api.h>
#include <nccl.h>
#pragma GCC diagnostic pop

/*
 * A stream operation.  poll(arg) is called each time its stream is
 * progressed while it is at the stream's head; it must not block and returns
 * 1 when the operation is done, 0 when it is not yet.  release(arg), if not
 * NULL, is called once when the operation is done.  Both run with the fake
 * runtime's lock held: they must not call the fake runtime back.
 * The runtime progresses streams (never in the background: there is no
 * device) on every enqueue, query and synchronize call.
 */
typedef int (*fakecuda_poll_fn)(void *arg);
cudaError_t fakecuda_enqueue(cudaStream_t stream, fakecuda_poll_fn poll,
                             void (*release)(void *arg), void *arg);
/* Progresses every stream as far as it can go, without blocking. */
void fakecuda_progress(void);
/* The runtime's lock, for state that poll() and release() share with calls
 * made from other threads (a watchdog thread's ncclCommAbort, say).  Not
 * recursive: never taken by poll() or release(), which run under it. */
void fakecuda_lock(void);
void fakecuda_unlock(void);

/* IEEE binary16 and bfloat16 <-> float; stores round to nearest even. */
static inline float standin_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu, bits;
    float f;
    if (exp == 0x1f)
        bits = sign | 0x7f800000u | (man << 13);
    else if (exp)
        bits = sign | ((exp + 112) << 23) | (man << 13);
    else {
        f = (float)man * 0x1p-24f; /* zero or subnormal: exact */
        return sign ? -f : f;
    }
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint16_t standin_float_to_half(float f)
{
    uint32_t x, ax, r;
    uint16_t sign;
    memcpy(&x, &f, sizeof x);
    sign = (uint16_t)((x >> 16) & 0x8000u);
    ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN stays a (quiet) NaN */
        return (uint16_t)(sign | 0x7e00u);
    if (ax >= 0x477ff000u) /* 65520 and above round to infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* below 2^-14: a subnormal half (or zero) */
        float a;
        memcpy(&a, &ax, sizeof a);
        return (uint16_t)(sign | (uint16_t)nearbyintf(a * 0x1p24f));
    }
    r = ax - (112u << 23); /* rebias the exponent, then round 23 -> 10 bits */
    r = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
    return (uint16_t)(sign | r);
}

static inline float standin_bf16_to_float(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

static inline uint16_t standin_float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

#endif
