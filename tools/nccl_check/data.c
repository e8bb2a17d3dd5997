/* Data types and the check pattern. */
#include <string.h>
#include <strings.h>

#include "check.h"

/*
 * The pattern's modulus keeps sums exact: 17 values where the type holds
 * them with room, 3 for the 8-bit and 16-bit floating types (bfloat16 holds
 * whole numbers exactly only up to 256, half up to 2048).  Integer sums wrap
 * the same way in NCCL and in encode(), so they are always checkable.
 */
const dtype_t dtypes[] = {
    {"int8", ncclInt8, 1, K_INT, 17, 0},
    {"uint8", ncclUint8, 1, K_UINT, 17, 0},
    {"int32", ncclInt32, 4, K_INT, 17, 0},
    {"uint32", ncclUint32, 4, K_UINT, 17, 0},
    {"int64", ncclInt64, 8, K_INT, 17, 0},
    {"uint64", ncclUint64, 8, K_UINT, 17, 0},
    {"half", ncclFloat16, 2, K_F16, 3, 2048},
    {"float", ncclFloat32, 4, K_F32, 17, 1LL << 24},
    {"double", ncclFloat64, 8, K_F64, 17, 1LL << 53},
#if NCCL_VERSION_CODE >= 21000
    {"bfloat16", ncclBfloat16, 2, K_BF16, 3, 256},
#endif
};
const int ndtypes = (int)(sizeof dtypes / sizeof *dtypes);

const dtype_t *dtype_by_name(const char *name)
{
    static const struct { const char *alias, *name; } aliases[] = {
        {"fp16", "half"}, {"float16", "half"}, {"fp32", "float"},
        {"float32", "float"}, {"fp64", "double"}, {"float64", "double"},
        {"bf16", "bfloat16"}, {"int", "int32"}, {"char", "int8"}};
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
        if (!strcasecmp(name, aliases[i].alias))
            name = aliases[i].name;
    for (int i = 0; i < ndtypes; i++)
        if (!strcasecmp(name, dtypes[i].name))
            return &dtypes[i];
    return NULL;
}

long long pattern(const dtype_t *t, size_t i, int r)
{
    return (long long)((i * 7 + (size_t)r * 3) % (size_t)t->modulus);
}

int checkable(const dtype_t *t, int world)
{
    return t->exact == 0 || (long long)(t->modulus - 1) * world <= t->exact;
}

/* IEEE half of a whole number that float holds exactly, rounding to nearest
 * even as the GPU does. */
static uint16_t to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    if (((x >> 23) & 0xff) == 0)
        return (uint16_t)sign; /* zero (denormals do not occur here) */
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00u); /* too large: infinity */
    if (exp <= 0)
        return (uint16_t)sign; /* below half's normal range: not used here */
    uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)h;
}

static uint16_t to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

void encode(const dtype_t *t, long long v, void *out)
{
    switch (t->kind) {
    case K_INT:
    case K_UINT: {
        /* The low bytes of the two's complement: what a wrapping sum of
         * this width leaves (little-endian, as every CUDA host is). */
        uint64_t u = (uint64_t)v;
        memcpy(out, &u, t->size);
        break;
    }
    case K_F16: {
        uint16_t h = to_half((float)v);
        memcpy(out, &h, 2);
        break;
    }
    case K_BF16: {
        uint16_t b = to_bf16((float)v);
        memcpy(out, &b, 2);
        break;
    }
    case K_F32: {
        float f = (float)v;
        memcpy(out, &f, 4);
        break;
    }
    case K_F64: {
        double d = (double)v;
        memcpy(out, &d, 8);
        break;
    }
    }
}
