/*
 * libFuzzer target for amlrun's torchelastic error-file reader
 * (launcher/errorfile.c, included: it needs nothing but libc).  Besides
 * the sanitizers' checks: a parsed file's strings are C strings, the inner
 * object's close is a '}' inside the input, and a failure says why.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../launcher/output/errorfile.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQUIRE(cond)                                                          \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_errorfile: %s:%d: %s\n", __FILE__,           \
                    __LINE__, #cond);                                          \
            abort();                                                           \
        }                                                                      \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy, so that ASan sees any read past the end. */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    struct errorfile ef;
    char why[160] = "";
    if (errorfile_parse(buf, size, &ef, why, sizeof why) == 0) {
        if (ef.message)
            REQUIRE(strlen(ef.message) <= size);
        if (ef.traceback)
            REQUIRE(strlen(ef.traceback) <= size);
        if (ef.inner_close)
            REQUIRE(ef.inner_close < size && buf[ef.inner_close] == '}');
        errorfile_free(&ef);
    } else {
        REQUIRE(why[0] != '\0');
        REQUIRE(!ef.message && !ef.traceback);
    }
    free(buf);
    return 0;
}
