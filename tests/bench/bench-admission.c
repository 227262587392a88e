/* SPDX-License-Identifier: MIT */
#include <math.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "admission/admission.h"
#include "shared/macro.h"

/* In-process benchmark of the admission machine: ns per join (of a new
 * session), status (of a random holder: hash lookup, heartbeat, position)
 * and leave (of a random holder) while the queue holds N tickets, for N =
 * 10^2, 10^4, 10^6. The size is kept roughly constant by alternating
 * batches: leave B, join B, status B; the best of 5 rounds is shown, as
 * the machine is shared, then the median of the rounds. Also the memory
 * per ticket: peak RSS
 * growth while holding 10^5 tickets, measured first, in this fresh process.
 * Then the floor under any design (floor_lookup_ns()) and the cost of one
 * memory access, for scale. Prints figures only; not a pass/fail test.
 *
 *   bench-admission [--quick]   (--quick: fewer operations, 10^5 at most) */

#define BATCH 1000u

static uint64_t rng_state = 42;

static uint64_t rng(void) {
        uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
}

/* Sessions are SHA-256 values in the daemon: random bytes here. */
static SessionKey random_key(void) {
        SessionKey k;

        for (size_t i = 0; i < sizeof(k.bytes); i += 8) {
                uint64_t x = rng();
                memcpy(k.bytes + i, &x, 8);
        }
        return k;
}

static uint64_t now_ns(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static long max_rss_kib(void) {
        struct rusage ru;

        if (getrusage(RUSAGE_SELF, &ru) < 0)
                return -1;
        return ru.ru_maxrss;
}

static Admission *new_machine(void) {
        /* Long deadlines: nothing expires during a run, so each operation
         * does its own work only. */
        AdmissionSettings s = {
                .reservation_usec = 3600 * USEC_PER_SEC,
                .heartbeat_usec = 3600 * USEC_PER_SEC,
                .max_length = 1000000,
                .slots = 1,
        };
        Admission *a = NULL;
        int r;

        r = admission_new(&s, &a);
        if (r < 0) {
                fprintf(stderr, "admission_new: %s\n", strerror(-r));
                exit(EXIT_FAILURE);
        }
        return a;
}

static void must_join(Admission *a, const SessionKey *k, usec_t now) {
        int r = admission_join(a, k, now);
        if (r != 1) {
                fprintf(stderr, "join: unexpected %d\n", r);
                exit(EXIT_FAILURE);
        }
}

typedef struct Figures {
        double join_ns, status_ns, leave_ns;
} Figures;

/* Work done inside the timed loops is collected here so that nothing is
 * optimised away. */
static volatile uint64_t sink;

/* One round: ops operations of each kind, in batches. */
static Figures run_round(Admission *a, SessionKey *live, size_t n, size_t ops, usec_t *now) {
        SessionKey batch[BATCH];
        size_t n_live = n, b = MIN((size_t) BATCH, n / 2), done = 0;
        uint64_t t_join = 0, t_status = 0, t_leave = 0;

        while (done < ops) {
                uint64_t t;

                /* leave b random holders */
                for (size_t i = 0; i < b; i++) {
                        size_t j = rng() % n_live;
                        batch[i] = live[j];
                        live[j] = live[--n_live];
                }
                t = now_ns();
                for (size_t i = 0; i < b; i++)
                        sink += (uint64_t) admission_leave(a, &batch[i], *now);
                t_leave += now_ns() - t;

                /* join b new sessions */
                for (size_t i = 0; i < b; i++)
                        batch[i] = random_key();
                t = now_ns();
                for (size_t i = 0; i < b; i++)
                        sink += (uint64_t) admission_join(a, &batch[i], *now);
                t_join += now_ns() - t;
                for (size_t i = 0; i < b; i++)
                        live[n_live++] = batch[i];

                /* status of b random holders */
                for (size_t i = 0; i < b; i++)
                        batch[i] = live[rng() % n_live];
                t = now_ns();
                for (size_t i = 0; i < b; i++) {
                        AdmissionStatus st;
                        (void) admission_status(a, &batch[i], *now, &st);
                        sink += st.ticket.position;
                }
                t_status += now_ns() - t;

                done += b;
                *now += 1; /* time moves, nothing expires */
        }

        if (admission_queue_length(a) != n) {
                fprintf(stderr, "size drifted: %" PRIu64 " != %zu\n", admission_queue_length(a), n);
                exit(EXIT_FAILURE);
        }

        return (Figures){
                .join_ns = (double) t_join / (double) done,
                .status_ns = (double) t_status / (double) done,
                .leave_ns = (double) t_leave / (double) done,
        };
}

static int cmp_double(const void *x, const void *y) {
        double a = *(const double *) x, b = *(const double *) y;
        return (a > b) - (a < b);
}

static double median(double *v, size_t n) {
        qsort(v, n, sizeof(double), cmp_double);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define ROUNDS_MAX 16u

/* Fill a machine with n tickets, then run several rounds and keep the best
 * figure of each kind (the machine this runs on is shared, and the
 * interference only ever adds time) and the median one. */
static Figures run_size(size_t n, size_t ops, unsigned rounds, Figures *ret_median) {
        Admission *a = new_machine();
        usec_t now = 1000 * USEC_PER_SEC;
        SessionKey *live;
        Figures best = { INFINITY, INFINITY, INFINITY };
        double join[ROUNDS_MAX], status[ROUNDS_MAX], leave[ROUNDS_MAX];

        live = malloc(sizeof(SessionKey) * n);
        if (!live) {
                fprintf(stderr, "out of memory\n");
                exit(EXIT_FAILURE);
        }
        for (size_t i = 0; i < n; i++) {
                live[i] = random_key();
                must_join(a, &live[i], now);
        }

        for (unsigned r = 0; r < rounds; r++) {
                Figures f = run_round(a, live, n, ops, &now);
                best.join_ns = MIN(best.join_ns, f.join_ns);
                best.status_ns = MIN(best.status_ns, f.status_ns);
                best.leave_ns = MIN(best.leave_ns, f.leave_ns);
                join[r] = f.join_ns;
                status[r] = f.status_ns;
                leave[r] = f.leave_ns;
        }
        *ret_median = (Figures){
                .join_ns = median(join, rounds),
                .status_ns = median(status, rounds),
                .leave_ns = median(leave, rounds),
        };

        free(live);
        admission_free(a);
        return best;
}

/* For scale: the time of one dependent random load from a working set of
 * the given size (a pointer chase around one random cycle, Sattolo's
 * shuffle), with 4 KiB pages or (huge) 2 MiB aligned and offered to
 * transparent huge pages, as the machine's big tables are. At 10^6 tickets
 * the tables are far larger than the caches, and every operation needs at
 * least one such load whatever the algorithm: the session's ticket. */
static double load_latency_ns(size_t bytes, bool huge) {
        size_t n = bytes / sizeof(uint32_t);
        uint32_t *next = NULL, p = 0;
        uint64_t t;
        size_t steps = 1000000;

        if (huge) {
                void *m;
                if (posix_memalign(&m, 2 << 20, n * sizeof(uint32_t)) != 0)
                        return NAN;
                (void) madvise(m, n * sizeof(uint32_t), MADV_HUGEPAGE);
                next = m;
        } else
                next = malloc(n * sizeof(uint32_t));
        if (!next)
                return NAN;
        for (size_t i = 0; i < n; i++)
                next[i] = (uint32_t) i;
        for (size_t i = n - 1; i > 0; i--) {
                size_t j = rng() % i;
                uint32_t x = next[i];
                next[i] = next[j];
                next[j] = x;
        }
        t = now_ns();
        for (size_t i = 0; i < steps; i++)
                p = next[p];
        t = now_ns() - t;
        sink += p;
        free(next);
        return (double) t / (double) steps;
}

/* The floor under any design, for judging the figures above: the bare
 * lookup of a present session in an ideal table (open addressing at load
 * 1/2, one 64-byte cache line per session holding its whole key and its
 * FIFO slot, nothing else done), then optionally its position (a Fenwick
 * tree over 64-slot bitmap words, as the machine has), with the same
 * batches as the status loop. A status must at least do both, and then the
 * heartbeat and the answer. */
typedef struct FloorEntry {
        SessionKey key;
        uint32_t slot; /* 0: empty; else the FIFO slot + 1 */
        uint8_t pad[28];
} FloorEntry;

static double floor_ns(size_t n, size_t ops, bool with_position) {
        size_t size = 64, mask, n_words = n / 64 + 1, b = MIN((size_t) BATCH, n);
        FloorEntry *t = NULL;
        SessionKey *keys, batch[BATCH];
        uint64_t *live;
        uint32_t *fen;
        double best = INFINITY;

        while (size < 2 * n)
                size *= 2;
        mask = size - 1;
        if (posix_memalign((void **) &t, 2 << 20, size * sizeof(FloorEntry)) != 0)
                return NAN;
        (void) madvise(t, size * sizeof(FloorEntry), MADV_HUGEPAGE);
        memset(t, 0, size * sizeof(FloorEntry));
        keys = malloc(n * sizeof(SessionKey));
        live = calloc(n_words, sizeof(uint64_t));
        fen = calloc(n_words + 1, sizeof(uint32_t));
        if (!keys || !live || !fen) {
                free(t);
                free(keys);
                free(live);
                free(fen);
                return NAN;
        }

        for (size_t i = 0; i < n; i++) {
                uint64_t h;

                keys[i] = random_key();
                memcpy(&h, keys[i].bytes, sizeof(h));
                for (size_t j = (h * UINT64_C(0x9E3779B97F4A7C15)) & mask;; j = (j + 1) & mask)
                        if (t[j].slot == 0) {
                                t[j].key = keys[i];
                                t[j].slot = (uint32_t) i + 1;
                                break;
                        }
                live[i / 64] |= UINT64_C(1) << (i % 64);
                for (size_t w = i / 64 + 1; w <= n_words; w += w & (~w + 1))
                        fen[w]++;
        }

        for (unsigned r = 0; r < 5; r++) {
                uint64_t total = 0;

                for (size_t done = 0; done < ops; done += b) {
                        uint64_t t0;

                        for (size_t i = 0; i < b; i++)
                                batch[i] = keys[rng() % n];
                        t0 = now_ns();
                        for (size_t i = 0; i < b; i++) {
                                uint64_t h;
                                size_t j;

                                memcpy(&h, batch[i].bytes, sizeof(h));
                                for (j = (h * UINT64_C(0x9E3779B97F4A7C15)) & mask;
                                     memcmp(t[j].key.bytes, batch[i].bytes, sizeof(batch[i].bytes)) != 0;
                                     j = (j + 1) & mask)
                                        ;
                                uint32_t slot = t[j].slot - 1, rank = 0;
                                if (with_position) {
                                        for (uint32_t w = slot / 64; w > 0; w -= w & (~w + 1))
                                                rank += fen[w];
                                        rank += (uint32_t) __builtin_popcountll(
                                                live[slot / 64] & (UINT64_MAX >> (63 - slot % 64)));
                                }
                                sink += slot + rank;
                        }
                        total += now_ns() - t0;
                }
                best = MIN(best, (double) total / (double) ops);
        }

        free(keys);
        free(live);
        free(fen);
        free(t);
        return best;
}

/* Peak RSS growth while holding n tickets. The keys are generated on the
 * fly and not kept, so the figure is the machine's own memory. */
static void measure_memory(size_t n) {
        long before = max_rss_kib(), after;
        Admission *a = new_machine();

        for (size_t i = 0; i < n; i++) {
                SessionKey k = random_key();
                must_join(a, &k, 1000 * USEC_PER_SEC);
        }
        after = max_rss_kib();
        printf("memory: holding %zu tickets: peak RSS %ld KiB (was %ld KiB before): %.0f bytes per ticket\n",
               n,
               after,
               before,
               (double) (after - before) * 1024.0 / (double) n);
        admission_free(a);
}

int main(int argc, char *argv[]) {
        bool quick = argc > 1 && streq(argv[1], "--quick");
        size_t sizes[] = { 100, 10000, quick ? 100000 : 1000000 };
        size_t ops = quick ? 10000 : 100000;
        unsigned rounds = quick ? 3 : 5;
        Figures f[ELEMENTSOF(sizes)], med[ELEMENTSOF(sizes)];

        if (argc > 1 && !quick) {
                fprintf(stderr, "usage: %s [--quick]\n", argv[0]);
                return EXIT_FAILURE;
        }

        /* First, in a fresh process, before anything big was allocated. */
        measure_memory(100000);

        printf("\nns per operation, best of %u rounds of %zu operations of each kind\n"
               "(batches of up to %u leaves, joins, statuses; the size stays within %u of N)\n",
               rounds,
               ops,
               BATCH,
               BATCH);
        printf("%10s %12s %12s %12s\n", "tickets", "join ns", "status ns", "leave ns");
        for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
                f[i] = run_size(sizes[i], ops, rounds, &med[i]);
                printf("%10zu %12.1f %12.1f %12.1f\n", sizes[i], f[i].join_ns, f[i].status_ns, f[i].leave_ns);
                fflush(stdout);
        }

        printf("median of the %u rounds:\n", rounds);
        for (size_t i = 0; i < ELEMENTSOF(sizes); i++)
                printf("%10s %12.1f %12.1f %12.1f   (%zu tickets)\n",
                       "median",
                       med[i].join_ns,
                       med[i].status_ns,
                       med[i].leave_ns,
                       sizes[i]);
        printf("peak RSS after the largest size: %ld KiB (with the benchmark's own %zu-byte key per ticket)\n",
               max_rss_kib(),
               sizeof(SessionKey));
        for (size_t i = 1; i < ELEMENTSOF(sizes); i++)
                printf("%10s %11.2fx %11.2fx %11.2fx   (%zu vs %zu tickets)\n",
                       "ratio",
                       f[i].join_ns / f[0].join_ns,
                       f[i].status_ns / f[0].status_ns,
                       f[i].leave_ns / f[0].leave_ns,
                       sizes[i],
                       sizes[0]);
        {
                size_t big = sizes[ELEMENTSOF(sizes) - 1];
                double l0 = floor_ns(sizes[0], ops, false), l1 = floor_ns(big, ops, false);
                double p0 = floor_ns(sizes[0], ops, true), p1 = floor_ns(big, ops, true);

                printf("floor: in an ideal table (one cache line per session, nothing else), best of 5\n"
                       "%10s %12s %12s\n"
                       "%10zu %12.1f %12.1f\n"
                       "%10zu %12.1f %12.1f\n"
                       "%10s %11.2fx %11.2fx   (%zu vs %zu sessions)\n",
                       "sessions",
                       "lookup ns",
                       "+position ns",
                       sizes[0],
                       l0,
                       p0,
                       big,
                       l1,
                       p1,
                       "ratio",
                       l1 / l0,
                       p1 / p0,
                       big,
                       sizes[0]);
                printf("       lookup and position alone at %zu: %.2fx the whole status at %zu\n",
                       big,
                       p1 / f[0].status_ns,
                       sizes[0]);
        }
        printf("for scale: one dependent random load costs %.1f ns within 64 KiB, %.1f ns within %zu MiB,\n"
               "           %.1f ns within %zu MiB with 2 MiB (transparent huge) pages\n",
               load_latency_ns(64 * 1024, false),
               load_latency_ns(quick ? 16 << 20 : 128 << 20, false),
               (size_t) (quick ? 16 : 128),
               load_latency_ns(quick ? 16 << 20 : 128 << 20, true),
               (size_t) (quick ? 16 : 128));
        return EXIT_SUCCESS;
}
