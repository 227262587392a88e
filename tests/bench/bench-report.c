/* SPDX-License-Identifier: MIT */
/* The unanswered report (API.md 9.2) over a large synthetic history: N
 * records (default 100,000) written through the store as the daemon
 * writes them (history_begin(), history_finish_nosync()), from 3,000
 * topics asked with Zipf-like frequencies, each in a few wordings built
 * from a vocabulary of 600 words; about 60% of the records carry a
 * signal, 10% have feedback. Then report_unanswered() over 30 days and
 * its JSON and CSV, each timed over RUNS runs: the median and the worst.
 * Target: under a second for 100,000 records.
 *
 * Usage: [BENCH_REPORT_REUSE=1] bench-report [N] [DIRECTORY] (DIRECTORY:
 * where the store is made, kept after; a new temporary one by default,
 * removed after; with BENCH_REPORT_REUSE=1, the store made there by an
 * earlier run is measured again). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "api/render.h"
#include "shared/macro.h"
#include "store/history.h"
#include "store/report.h"

#define RUNS 5
#define TOPICS 3000
#define VOCABULARY 600

static const char *const prefixes[] = {
        "What is the",       "How do I find the", "Where is the", "Who approves the",
        "Tell me about the", "Is there a",        "Explain the",  "",
};

static int cmp(const void *a, const void *b) {
        usec_t x = *(const usec_t *) a, y = *(const usec_t *) b;
        return x < y ? -1 : x > y;
}

/* xorshift: the same history every run. */
static uint64_t rnd(void) {
        static uint64_t s = 0x9e3779b97f4a7c15ULL;

        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
}

static void word(unsigned n, char buf[static 16]) {
        static const char *const syl[] = { "par", "ki",  "pol", "cy",  "tra", "vel", "ro",
                                           "om",  "bud", "get", "lea", "ve",  "ex",  "pen",
                                           "se",  "vi",  "si",  "tor", "ne",  "to" };

        snprintf(buf, 16, "%s%s%s", syl[n % 20], syl[(n / 20) % 20], syl[(n / 400) % 20]);
}

int main(int argc, char *argv[]) {
        unsigned n = argc > 1 ? (unsigned) strtoul(argv[1], NULL, 10) : 100000;
        char tmpl[] = "/tmp/bench-report-XXXXXX", *dir = argc > 2 ? argv[2] : mkdtemp(tmpl);
        usec_t t_report[RUNS], t_json[RUNS], t_csv[RUNS], t0,
                start = now(CLOCK_REALTIME) - 20 * 24 * 3600 * USEC_PER_SEC;
        History *h = NULL;
        size_t groups = 0, json_bytes = 0, csv_bytes = 0;
        uint64_t records = 0;
        unsigned topics[TOPICS][3];

        if (!dir || history_open(dir, &h, NULL) < 0)
                return EXIT_FAILURE;
        for (unsigned i = 0; i < TOPICS; i++)
                for (unsigned k = 0; k < 3; k++)
                        topics[i][k] = (unsigned) (rnd() % VOCABULARY);

        t0 = now(CLOCK_MONOTONIC);
        /* BENCH_REPORT_REUSE=1 with a DIRECTORY made by an earlier run:
         * measure that store again without writing. */
        if (argc > 2 && getenv("BENCH_REPORT_REUSE"))
                n = 0;
        for (unsigned i = 0; i < n; i++) {
                char id[40], q[256], w[3][16], search[128], sources[256];
                /* Zipf-like: topic ~ TOPICS^(u^2), the first ones most asked. */
                double u = (double) (rnd() % 1000000) / 1000000.0;
                unsigned topic = (unsigned) (u * u * u * TOPICS) % TOPICS, signal = (unsigned) (rnd() % 10);
                SessionKey k = { .bytes = { 0 } };
                bool ok = signal != 9;

                for (unsigned j = 0; j < 3; j++)
                        word(topics[topic][j], w[j]);
                snprintf(id, sizeof id, "qr_%032x", i + 1);
                snprintf(
                        q,
                        sizeof q,
                        "%s %s %s%s%s?",
                        prefixes[rnd() % ELEMENTSOF(prefixes)],
                        w[0],
                        w[1],
                        rnd() % 2 ? " " : "s ",
                        rnd() % 3 ? w[2] : "for visitors");
                memcpy(k.bytes, &i, sizeof i);
                snprintf(
                        search,
                        sizeof search,
                        "[{\"query\":\"%s %s\",\"results\":%u}]",
                        w[0],
                        w[1],
                        signal < 3 ? 0 : 4);
                snprintf(
                        sources,
                        sizeof sources,
                        "[{\"title\":\"%s\",\"url\":\"https://wiki.example/index.php?oldid=%u\",\"revision_id\":%u}]",
                        w[0],
                        i,
                        i);
                if (history_begin(h, id, &k, q, start + (usec_t) i * 10 * USEC_PER_SEC) < 0 ||
                    history_finish_nosync(
                            h,
                            id,
                            &(HistoryOutcome){
                                    .succeeded = ok,
                                    .answer = ok ? "An answer." : NULL,
                                    .error_code = ok ? NULL : "query_timeout",
                                    .error_message = ok ? NULL : "timed out",
                                    .searches_json = search,
                                    .sources_json = signal < 3 ? NULL : sources,
                                    .citations_json = signal < 6 ?
                                            NULL :
                                            "[{\"n\":1,\"title\":\"X\",\"revision_id\":1,\"quote\":\"q\","
                                            "\"status\":\"verified\",\"url\":null,\"section\":null}]",
                                    .finished_at = start + (usec_t) i * 10 * USEC_PER_SEC + USEC_PER_SEC,
                            }) < 0)
                        return EXIT_FAILURE;
                if (i % 10 == 0 &&
                    history_set_feedback(
                            h,
                            id,
                            &k,
                            signal % 2 ? "down" : "up",
                            signal % 2 ? "incomplete" : NULL,
                            signal % 2 ? "The page is missing." : NULL,
                            start) < 0)
                        return EXIT_FAILURE;
        }
        (void) history_sync(h);
        printf("wrote %u records in %.1f s\n", n, (double) (now(CLOCK_MONOTONIC) - t0) / USEC_PER_SEC);

        for (unsigned r = 0; r < RUNS; r++) {
                Report *rep = NULL;
                json_object *o;
                char *csv;

                t0 = now(CLOCK_MONOTONIC);
                if (report_unanswered(h, now(CLOCK_REALTIME) - 30 * 24 * 3600 * USEC_PER_SEC, &rep) < 0)
                        return EXIT_FAILURE;
                t_report[r] = now(CLOCK_MONOTONIC) - t0;
                t0 = now(CLOCK_MONOTONIC);
                o = render_report(rep, 30, "https://wiki.example/w/api.php");
                if (!o)
                        return EXIT_FAILURE;
                json_bytes = strlen(render_body(o));
                json_object_put(o);
                t_json[r] = now(CLOCK_MONOTONIC) - t0;
                t0 = now(CLOCK_MONOTONIC);
                csv = render_report_csv(rep);
                if (!csv)
                        return EXIT_FAILURE;
                csv_bytes = strlen(csv);
                free(csv);
                t_csv[r] = now(CLOCK_MONOTONIC) - t0;
                groups = rep->n_groups;
                records = rep->n_records;
                report_free(rep);
        }
        qsort(t_report, RUNS, sizeof(usec_t), cmp);
        qsort(t_json, RUNS, sizeof(usec_t), cmp);
        qsort(t_csv, RUNS, sizeof(usec_t), cmp);
        printf("report: %" PRIu64 " records with a signal, %zu groups shown\n", records, groups);
        printf("report_unanswered: median %.1f ms, worst %.1f ms\n",
               (double) t_report[RUNS / 2] / 1000.0,
               (double) t_report[RUNS - 1] / 1000.0);
        printf("JSON (%zu bytes): median %.1f ms; CSV (%zu bytes): median %.1f ms\n",
               json_bytes,
               (double) t_json[RUNS / 2] / 1000.0,
               csv_bytes,
               (double) t_csv[RUNS / 2] / 1000.0);
        history_free(h);
        if (argc <= 2) {
                /* The store's files, then the directory. */
                static const char *const files[] = { "history.sqlite3",
                                                     "history.sqlite3-wal",
                                                     "history.sqlite3-shm" };

                for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                        char p[256];

                        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
                        (void) unlink(p);
                }
                (void) rmdir(dir);
        }
        return EXIT_SUCCESS;
}
