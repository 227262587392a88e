/* SPDX-License-Identifier: MIT */
/* The admission controller with N slots against the reference model of the
 * unit test (tests/unit/admission-model.h): the first bytes choose the
 * settings (1..8 slots, a queue of 0..15 tickets, deadlines of 1..4 s), the
 * rest a sequence of join, status, leave, claim, finish, expire, peek and
 * drain operations with their sessions and time steps. After every
 * operation the machine must agree with the model in everything it shows
 * (states, slots, positions, estimates, deadlines, events), and the
 * model's invariants must hold: at most N slots reserved or running, FIFO
 * across slots, one ticket and one running query per session. */

#include <stdint.h>

#include "admission/admission.h"
#include "tests/unit/admission-model.h"
#include "fuzz.h"

typedef struct Bytes {
        const uint8_t *p;
        size_t left;
} Bytes;

/* One byte per draw (two for large ranges): short inputs make long runs. */
static bool bytes_source(void *userdata, uint64_t n, uint64_t *ret) {
        Bytes *b = userdata;
        uint64_t v;

        if (b->left == 0)
                return false;
        v = *b->p++;
        b->left--;
        if (n > 256 && b->left > 0) {
                v = v << 8 | *b->p++;
                b->left--;
        }
        *ret = v % n;
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Bytes b = { data, size };
        AdmissionSettings s;

        if (size < 4)
                return 0;
        s = (AdmissionSettings){
                .slots = 1 + data[0] % MODEL_SLOTS_MAX,
                .max_length = data[1] % 16,
                .reservation_usec = (1 + data[2] % 4) * USEC_PER_SEC,
                .heartbeat_usec = (1 + data[3] % 4) * USEC_PER_SEC,
        };
        b.p += 4;
        b.left -= 4;

        /* Bounded: at most 2000 operations per input. */
        admission_model_run(&s, 2000, bytes_source, &b, NULL);
        return 0;
}
