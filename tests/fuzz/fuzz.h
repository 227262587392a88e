/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* What every fuzz target shares: the libFuzzer entry point (fuzz-main.c
 * calls it to replay a corpus without libFuzzer) and CHECK(), an invariant
 * whose violation aborts with where and what, so libFuzzer keeps the input. */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(expr)                                                                                    \
        do {                                                                                           \
                if (!(expr)) {                                                                         \
                        fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #expr); \
                        abort();                                                                       \
                }                                                                                      \
        } while (0)
