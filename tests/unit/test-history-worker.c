/* SPDX-License-Identifier: MIT */
/* The store's worker (store/history-worker.h) on real SQLite files: jobs
 * run in order on the worker's own connection and come back on the loop,
 * never inside the submit; a job cancelled does not call back; a worker
 * without a connection runs its queue at stop; the
 * retention's batches; a prune interrupted by a stop and resumed by the
 * next start; the test fault (SQLITE_FULL, SQLITE_IOERR) met by the
 * worker's connection is the store's condition; an outcome and its
 * artifacts kept on a full disk land from the worker; a person's erasure
 * on the worker takes their outcome waiting and keeps another's. */
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "history-fixture.h"
#include "shared/macro.h"
#include "store/history-worker.h"
#include "store/history.h"
#include "tests.h"

#define T0 ((usec_t) 1763805600000000ULL)
#define DAY (86400 * USEC_PER_SEC)

typedef struct Fixture {
        char *dir;
        sd_event *event;
        History *h;
        HistoryWorker *w;
} Fixture;

static void fixture_open(Fixture *f) {
        f->h = open_store(f->dir, 0);
        ASSERT_OK(history_worker_new(f->event, f->h, &f->w));
}

static void fixture_close(Fixture *f) {
        f->w = history_worker_free(f->w);
        f->h = history_free(f->h);
}

static void fixture_start(Fixture *f) {
        *f = (Fixture){ .dir = make_subdir("worker") };
        ASSERT_OK(sd_event_new(&f->event));
        fixture_open(f);
}

static void fixture_stop(Fixture *f) {
        fixture_close(f);
        f->event = sd_event_unref(f->event);
        rm_rf_freep(&f->dir);
}

static bool exists(Fixture *f, unsigned n, const SessionKey *k) {
        _cleanup_(history_record_freep) HistoryRecord *r = NULL;
        int e = history_get_record(f->h, qid(n), k, &r);

        ASSERT_TRUE(e == 0 || e == -ENOENT);
        return e == 0;
}

/* ---- jobs ---- */

typedef struct Job {
        unsigned order; /* when it ran, on the thread */
        int result;
        bool worker; /* it ran on the worker's connection */
        bool *freed; /* set when its data is freed */
} Job;

typedef struct Results {
        unsigned calls;
        unsigned next; /* the thread's counter */
        int errors[8];
        unsigned orders[8];
        bool worker[8];
} Results;

static bool in_submit;
static Results *the_results;
/* While false, a job holds the worker before it runs: what is queued
 * behind it is known not to have started. */
static bool the_gate = true;

static int job_run(History *h, void *data) {
        Job *j = data;

        while (!__atomic_load_n(&the_gate, __ATOMIC_ACQUIRE))
                (void) usleep(1000);
        j->order = the_results->next++;
        j->worker = history_is_worker(h);
        return j->result;
}

static void job_free(void *data) {
        Job *j = data;

        if (j->freed)
                *j->freed = true;
        free(j);
}

static void job_done(HistoryJob *job, int error, void *data, void *userdata) {
        Results *r = userdata;
        Job *j = data;

        ASSERT_TRUE(!in_submit);
        ASSERT_TRUE(r->calls < ELEMENTSOF(r->errors));
        r->errors[r->calls] = error;
        r->orders[r->calls] = j->order;
        r->worker[r->calls] = j->worker;
        r->calls++;
}

static int submit(Fixture *f, Results *r, int result, bool *freed, HistoryJob **ret) {
        Job *j = calloc(1, sizeof *j);
        int k;

        ASSERT_TRUE(j);
        j->result = result;
        j->freed = freed;
        in_submit = true;
        k = history_worker_submit(f->w, job_run, j, job_free, job_done, r, ret);
        in_submit = false;
        return k;
}

static void run_until(Fixture *f, const unsigned *calls, unsigned n) {
        for (unsigned i = 0; i < 2000 && *calls < n; i++)
                ASSERT_OK(sd_event_run(f->event, 10 * USEC_PER_MSEC));
        ASSERT_EQ_INT(*calls, n);
}

/* Jobs run one after the other in order, on the worker's connection, and
 * each comes back on the loop with its result, never inside the submit. */
TEST(jobs_in_order) {
        Results r = { 0 };
        Fixture f;

        fixture_start(&f);
        the_results = &r;
        ASSERT_OK(submit(&f, &r, 0, NULL, NULL));
        ASSERT_OK(submit(&f, &r, -EIO, NULL, NULL));
        ASSERT_OK(submit(&f, &r, 1, NULL, NULL));
        ASSERT_EQ_INT(r.calls, 0);
        run_until(&f, &r.calls, 3);
        for (unsigned i = 0; i < 3; i++) {
                ASSERT_EQ_INT(r.orders[i], i);
                ASSERT_TRUE(r.worker[i]);
        }
        ASSERT_EQ_INT(r.errors[0], 0);
        ASSERT_EQ_INT(r.errors[1], -EIO);
        ASSERT_EQ_INT(r.errors[2], 1);
        ASSERT_EQ_INT(history_worker_queued(f.w), 0);
        fixture_stop(&f);
}

/* A job cancelled never calls back, and its data is freed; the worker's
 * stop drops what is queued, freeing it too. */
TEST(cancel_and_stop) {
        bool freed[4] = { false };
        HistoryJob *j[4];
        Results r = { 0 };
        Fixture f;

        fixture_start(&f);
        the_results = &r;
        __atomic_store_n(&the_gate, false, __ATOMIC_RELEASE);
        for (unsigned i = 0; i < 4; i++)
                ASSERT_OK(submit(&f, &r, 0, &freed[i], &j[i]));
        ASSERT_TRUE(!history_job_cancel(j[1]));
        __atomic_store_n(&the_gate, true, __ATOMIC_RELEASE);
        run_until(&f, &r.calls, 3);
        ASSERT_TRUE(freed[0] && freed[1] && freed[2] && freed[3]);
        ASSERT_EQ_INT(r.orders[0], 0);
        ASSERT_EQ_INT(r.orders[1], 1); /* the cancelled one never ran */

        /* Queued behind a job that is still to start, then the stop. */
        for (unsigned i = 0; i < 4; i++) {
                freed[i] = false;
                ASSERT_OK(submit(&f, &r, 0, &freed[i], NULL));
        }
        f.w = history_worker_free(f.w);
        ASSERT_TRUE(freed[0] && freed[1] && freed[2] && freed[3]);
        ASSERT_EQ_INT(r.calls, 3);
        ASSERT_OK(history_worker_new(f.event, f.h, &f.w));
        fixture_stop(&f);
}

/* A worker without a connection (SyncWorker's): its jobs get none, and
 * its stop runs what is queued, calling nothing back. */
TEST(unconnected_worker_runs_its_queue_at_stop) {
        bool freed[3] = { false };
        Results r = { 0 };
        Fixture f;

        fixture_start(&f);
        the_results = &r;
        f.w = history_worker_free(f.w);
        ASSERT_OK(history_worker_new_unconnected(f.event, "test-unconnected", &f.w));
        ASSERT_OK(submit(&f, &r, 0, NULL, NULL));
        run_until(&f, &r.calls, 1);
        ASSERT_TRUE(!r.worker[0]);

        for (unsigned i = 0; i < 3; i++)
                ASSERT_OK(submit(&f, &r, 0, &freed[i], NULL));
        f.w = history_worker_free(f.w);
        ASSERT_EQ_INT(r.next, 4);
        ASSERT_TRUE(freed[0] && freed[1] && freed[2]);
        ASSERT_OK(sd_event_run(f.event, 20 * USEC_PER_MSEC));
        ASSERT_EQ_INT(r.calls, 1);
        ASSERT_OK(history_worker_new(f.event, f.h, &f.w));
        fixture_stop(&f);
}

/* ---- the retention's batches ---- */

typedef struct Prune {
        usec_t before;
        unsigned records, artifacts;
} Prune;

static int prune_run(History *h, void *data) {
        Prune *p = data;

        return history_prune(h, p->before, 100, &p->records, &p->artifacts);
}

typedef struct PruneRun {
        Fixture *f;
        usec_t before;
        unsigned batches, records;
        bool more;
        unsigned calls;
        unsigned stop_after; /* 0: run to the end */
} PruneRun;

static void prune_done(HistoryJob *job, int error, void *data, void *userdata);

static void prune_next(PruneRun *run) {
        Prune *p = calloc(1, sizeof *p);

        ASSERT_TRUE(p);
        p->before = run->before;
        ASSERT_OK(history_worker_submit(run->f->w, prune_run, p, free, prune_done, run, NULL));
}

static void prune_done(HistoryJob *job, int error, void *data, void *userdata) {
        PruneRun *run = userdata;
        Prune *p = data;

        ASSERT_TRUE(error >= 0);
        run->batches++;
        run->records += p->records;
        run->more = error > 0;
        /* The batch queued behind a stop may still have run before it:
         * its done lands here and counts nothing. */
        if (run->stop_after > 0 && run->batches > run->stop_after)
                return;
        if (!run->more || run->batches == run->stop_after) {
                run->calls++;
                return;
        }
        prune_next(run);
}

/* 250 old records and 3 new: three batches (100, 100, 50), the new ones
 * kept, and the running one never taken. */
TEST(prune_in_batches) {
        SessionKey k = key(1);
        PruneRun run = { 0 };
        Fixture f;

        fixture_start(&f);
        for (unsigned i = 0; i < 250; i++)
                add_record(f.h, i, &k, T0 + i, NULL);
        ASSERT_OK(history_begin(f.h, qid(1000), &k, "Still running?", T0));
        for (unsigned i = 0; i < 3; i++)
                add_record(f.h, 2000 + i, &k, T0 + 400 * DAY, NULL);
        run = (PruneRun){ .f = &f, .before = T0 + 365 * DAY };
        prune_next(&run);
        run_until(&f, &run.calls, 1);
        ASSERT_EQ_INT(run.batches, 3);
        ASSERT_EQ_INT(run.records, 250);
        ASSERT_TRUE(!exists(&f, 0, &k) && !exists(&f, 249, &k));
        ASSERT_TRUE(exists(&f, 1000, &k) && exists(&f, 2000, &k) && exists(&f, 2002, &k));
        ASSERT_OK(history_checkpoint(f.h));
        fixture_stop(&f);
}

/* A stop after the first batch: what it took is gone, the rest stays;
 * the next start's run takes the rest. */
TEST(prune_interrupted_and_resumed) {
        SessionKey k = key(2);
        PruneRun run;
        Fixture f;

        fixture_start(&f);
        for (unsigned i = 0; i < 250; i++)
                add_record(f.h, i, &k, T0 + i, NULL);
        run = (PruneRun){ .f = &f, .before = T0 + DAY, .stop_after = 1 };
        prune_next(&run);
        /* The second batch queued behind it, dropped by the stop. */
        prune_next(&run);
        run_until(&f, &run.calls, 1);
        fixture_close(&f);

        fixture_open(&f);
        ASSERT_TRUE(!exists(&f, 0, &k) && !exists(&f, 99, &k));
        ASSERT_TRUE(exists(&f, 249, &k));
        run = (PruneRun){ .f = &f, .before = T0 + DAY };
        prune_next(&run);
        run_until(&f, &run.calls, 1);
        ASSERT_TRUE(run.records >= 50 && run.records <= 150);
        ASSERT_TRUE(!exists(&f, 249, &k));
        fixture_stop(&f);
}

/* ---- faults met on the worker ---- */

typedef struct Delete {
        char id[40];
        SessionKey session;
} Delete;

static int delete_run(History *h, void *data) {
        Delete *d = data;

        return history_delete(h, d->id, &d->session);
}

static void note_done(HistoryJob *job, int error, void *data, void *userdata) {
        Results *r = userdata;

        r->errors[r->calls % ELEMENTSOF(r->errors)] = error;
        r->calls++;
}

static int delete_on_worker(Fixture *f, unsigned n, const SessionKey *k) {
        Delete *d = calloc(1, sizeof *d);
        Results r = { 0 };

        ASSERT_TRUE(d);
        snprintf(d->id, sizeof d->id, "%s", qid(n));
        d->session = *k;
        ASSERT_OK(history_worker_submit(f->w, delete_run, d, free, note_done, &r, NULL));
        run_until(f, &r.calls, 1);
        return r.errors[0];
}

static int retry_run(History *h, void *data) {
        return history_retry(h);
}

static int retry_on_worker(Fixture *f) {
        Results r = { 0 };

        ASSERT_OK(history_worker_submit(f->w, retry_run, NULL, NULL, note_done, &r, NULL));
        run_until(f, &r.calls, 1);
        return r.errors[0];
}

/* SQLITE_FULL and SQLITE_IOERR on the worker's connection: the job fails,
 * the store's condition (read on the loop's connection) says it in words,
 * new records are refused; the next write that lands ends it. */
TEST(fault_on_worker) {
        static const struct {
                int code, fault;
                const char *words;
        } faults[] = {
                { SQLITE_FULL, -ENOSPC, "no space left" },
                { SQLITE_IOERR, -EIO, "I/O error" },
        };
        SessionKey k = key(3);
        HistoryStorage st;
        Fixture f;

        fixture_start(&f);
        for (unsigned i = 0; i < ELEMENTSOF(faults); i++) {
                const char *cause = NULL;

                add_record(f.h, 10 + i, &k, T0, NULL);
                history_set_test_write_fault(f.h, faults[i].code, 1, 1);
                ASSERT_EQ_INT(delete_on_worker(&f, 10 + i, &k), -EIO);
                history_get_storage(f.h, 0, &st);
                ASSERT_EQ_INT(st.fault, faults[i].fault);
                ASSERT_EQ_INT(st.state, HISTORY_STORAGE_DEGRADED);
                ASSERT_TRUE(strstr(st.cause, faults[i].words));
                ASSERT_EQ_INT(history_check_writable(f.h, &cause), faults[i].fault);
                ASSERT_TRUE(exists(&f, 10 + i, &k));
                /* Landed: over. */
                ASSERT_OK(delete_on_worker(&f, 10 + i, &k));
                ASSERT_TRUE(!exists(&f, 10 + i, &k));
                history_get_storage(f.h, 0, &st);
                ASSERT_EQ_INT(st.state, HISTORY_STORAGE_OK);
        }
        fixture_stop(&f);
}

/* A file of n bytes, unlinked: the artifact's bytes as the sandbox hands
 * them over (its file may be gone while the descriptor is held). */
static int artifact_file(size_t n) {
        char path[] = "/tmp/test-history-worker-artifact-XXXXXX";
        int fd = mkostemp(path, O_CLOEXEC);
        char buf[512];

        ASSERT_TRUE(fd >= 0);
        ASSERT_TRUE(unlink(path) == 0);
        memset(buf, 'a', sizeof buf);
        for (size_t done = 0; done < n; done += sizeof buf)
                ASSERT_TRUE(write(fd, buf, MIN(sizeof buf, n - done)) > 0);
        return fd;
}

/* A full disk at the outcome: the outcome and its artifact wait in memory
 * (the record reads as it will be stored, the file still to come); the
 * retry on the worker lands both, the file first. */
TEST(outcome_and_artifacts_land_from_worker) {
        static const char sha[] = "0000000000000000000000000000000000000000000000000000000000000000";
        _cleanup_(history_record_freep) HistoryRecord *rec = NULL;
        SessionKey k = key(4);
        Artifact a = { .name = (char *) "plot.png", .media_type = "image/png", .size_bytes = 1000 };
        HistoryStorage st;
        Fixture f;

        fixture_start(&f);
        memcpy(a.sha256, sha, sizeof a.sha256);
        a.fd = artifact_file(1000);
        ASSERT_OK(history_begin(f.h, qid(1), &k, "A plot?", T0));
        history_set_test_write_fault(f.h, SQLITE_FULL, 1, 1);
        ASSERT_EQ_INT(
                history_finish_nosync(
                        f.h,
                        qid(1),
                        &(HistoryOutcome){ .succeeded = true,
                                           .answer = "Here.",
                                           .finished_at = T0 + 1,
                                           .artifacts = &a,
                                           .n_artifacts = 1 }),
                1);
        /* The caller's descriptor is its own again: the store holds a copy. */
        ASSERT_TRUE(close(a.fd) == 0);
        ASSERT_TRUE(history_outcome_waits(f.h, qid(1)));
        ASSERT_OK(history_get_record(f.h, qid(1), &k, &rec));
        ASSERT_EQ_STR(rec->status, "succeeded");
        ASSERT_EQ_INT(rec->n_artifacts, 0);
        rec = history_record_free(rec);
        history_get_storage(f.h, 0, &st);
        ASSERT_EQ_INT(st.n_pending, 1);

        ASSERT_EQ_INT(retry_on_worker(&f), 0);
        ASSERT_TRUE(!history_outcome_waits(f.h, qid(1)));
        ASSERT_OK(history_get_record(f.h, qid(1), &k, &rec));
        ASSERT_EQ_STR(rec->status, "succeeded");
        ASSERT_EQ_STR(rec->answer, "Here.");
        ASSERT_EQ_INT(rec->n_artifacts, 1);
        ASSERT_EQ_STR(rec->artifacts[0].name, "plot.png");
        ASSERT_EQ_INT(rec->artifacts[0].size_bytes, 1000);
        history_get_storage(f.h, 0, &st);
        ASSERT_EQ_INT(st.state, HISTORY_STORAGE_OK);
        fixture_stop(&f);
}

/* A delete on the worker of a record whose outcome waits: the outcome
 * lands first, then the record goes. */
TEST(delete_lands_waiting_outcome_first) {
        SessionKey k = key(5);
        Fixture f;

        fixture_start(&f);
        ASSERT_OK(history_begin(f.h, qid(1), &k, "Gone soon?", T0));
        history_set_test_write_fault(f.h, SQLITE_FULL, 1, 1);
        ASSERT_EQ_INT(
                history_finish_nosync(
                        f.h,
                        qid(1),
                        &(HistoryOutcome){ .succeeded = true, .answer = "Yes.", .finished_at = T0 + 1 }),
                1);
        ASSERT_OK(delete_on_worker(&f, 1, &k));
        ASSERT_TRUE(!history_outcome_waits(f.h, qid(1)));
        ASSERT_TRUE(!exists(&f, 1, &k));
        fixture_stop(&f);
}

/* ---- a person's erasure beside an outcome waiting ---- */

typedef struct Erase {
        SessionKey session;
        bool checkpoint; /* the sync and checkpoint after the last batch */
        unsigned records;
} Erase;

static int erase_run(History *h, void *data) {
        Erase *e = data;

        if (e->checkpoint) {
                int r = history_sync(h);

                return r < 0 ? r : history_checkpoint(h);
        }
        /* Two a batch: several batches for a handful of records. */
        return history_erase_session_batch(h, &e->session, 2, &e->records, NULL);
}

typedef struct EraseResult {
        unsigned calls;
        int error;
        unsigned records;
} EraseResult;

static void erase_done(HistoryJob *job, int error, void *data, void *userdata) {
        EraseResult *r = userdata;
        Erase *e = data;

        r->error = error;
        r->records = e->records;
        r->calls++;
}

/* One job of an erasure of session k on the worker: a batch (its count in
 * *ret_records, may be NULL) or the checkpoint. Returns its result. */
static int erase_job_on_worker(Fixture *f, const SessionKey *k, bool checkpoint, unsigned *ret_records) {
        Erase *e = calloc(1, sizeof *e);
        EraseResult r = { 0 };

        ASSERT_TRUE(e);
        e->session = *k;
        e->checkpoint = checkpoint;
        ASSERT_OK(history_worker_submit(f->w, erase_run, e, free, erase_done, &r, NULL));
        run_until(f, &r.calls, 1);
        if (ret_records)
                *ret_records = r.records;
        return r.error;
}

/* A whole erasure of session k, as the Manager runs it: batches on the
 * worker until none is left, then the checkpoint. Returns the records
 * erased. */
static unsigned erase_on_worker(Fixture *f, const SessionKey *k) {
        unsigned total = 0, n, batches = 0;
        int r;

        do {
                r = erase_job_on_worker(f, k, false, &n);
                ASSERT_OK(r);
                ASSERT_TRUE(n <= 2);
                total += n;
                ASSERT_TRUE(++batches < 100);
        } while (r > 0);
        ASSERT_OK(erase_job_on_worker(f, k, true, NULL));
        return total;
}

/* Record n of session k finished while the disk is full: its outcome
 * waits in memory. */
static void finish_on_full_disk(Fixture *f, unsigned n, const SessionKey *k, const char *answer) {
        ASSERT_OK(history_begin(f->h, qid(n), k, "Kept in memory?", T0 + n));
        history_set_test_write_fault(f->h, SQLITE_FULL, 1, 1);
        ASSERT_EQ_INT(
                history_finish_nosync(
                        f->h,
                        qid(n),
                        &(HistoryOutcome){ .succeeded = true, .answer = answer, .finished_at = T0 + n + 1 }),
                1);
        ASSERT_TRUE(history_outcome_waits(f->h, qid(n)));
}

static void assert_answer(Fixture *f, unsigned n, const SessionKey *k, const char *answer) {
        _cleanup_(history_record_freep) HistoryRecord *rec = NULL;

        ASSERT_OK(history_get_record(f->h, qid(n), k, &rec));
        ASSERT_EQ_STR(rec->status, "succeeded");
        ASSERT_EQ_STR(rec->answer, answer);
}

/* An outcome kept on a full disk is landed by the worker's retry; the
 * person's erasure on the worker then takes it with the rest, and one
 * that waits again when the erasure starts is landed by it first and
 * erased too. Another person's records stay, and nothing comes back at
 * the next start. */
TEST(waiting_outcome_landed_then_erased) {
        SessionKey k = key(6), other = key(7);
        HistoryStorage st;
        Fixture f;

        fixture_start(&f);
        for (unsigned i = 1; i <= 3; i++)
                add_record(f.h, i, &k, T0 + i, NULL);
        add_record(f.h, 100, &other, T0, NULL);

        finish_on_full_disk(&f, 4, &k, "Landed by the worker.");
        history_get_storage(f.h, 0, &st);
        ASSERT_EQ_INT(st.n_pending, 1);
        ASSERT_EQ_INT(st.state, HISTORY_STORAGE_DEGRADED);
        ASSERT_EQ_INT(retry_on_worker(&f), 0);
        ASSERT_TRUE(!history_outcome_waits(f.h, qid(4)));
        history_get_storage(f.h, 0, &st);
        ASSERT_EQ_INT(st.n_pending, 0);
        ASSERT_EQ_INT(st.state, HISTORY_STORAGE_OK);
        assert_answer(&f, 4, &k, "Landed by the worker.");

        /* And one more waits when the erasure starts. */
        finish_on_full_disk(&f, 5, &k, "Landed by the erasure.");
        ASSERT_EQ_INT(erase_on_worker(&f, &k), 5);
        ASSERT_TRUE(!history_outcome_waits(f.h, qid(5)));
        history_get_storage(f.h, 0, &st);
        ASSERT_EQ_INT(st.n_pending, 0);
        for (unsigned i = 1; i <= 5; i++)
                ASSERT_TRUE(!exists(&f, i, &k));
        ASSERT_TRUE(exists(&f, 100, &other));

        /* Nothing to recover, nothing back. */
        fixture_close(&f);
        fixture_open(&f);
        for (unsigned i = 1; i <= 5; i++)
                ASSERT_TRUE(!exists(&f, i, &k));
        ASSERT_TRUE(exists(&f, 100, &other));
        fixture_stop(&f);
}

/* A person's erasure on the worker while another person's outcome waits
 * in memory, one of its batches failing on the full disk: the erasure
 * resumes and takes all of the person's records, the other's outcome
 * still waits, whole, and lands at the retry, to be read back after the
 * next start. */
TEST(erasure_keeps_anothers_waiting_outcome) {
        SessionKey k = key(8), other = key(9);
        HistoryStorage st;
        unsigned n = 99;
        Fixture f;

        fixture_start(&f);
        for (unsigned i = 1; i <= 5; i++)
                add_record(f.h, i, &k, T0 + i, NULL);
        finish_on_full_disk(&f, 100, &other, "Still waiting.");

        /* The disk is still full at the first batch: it goes as a whole
         * or not at all. */
        history_set_test_write_fault(f.h, SQLITE_FULL, 1, 1);
        ASSERT_EQ_INT(erase_job_on_worker(&f, &k, false, &n), -EIO);
        for (unsigned i = 1; i <= 5; i++)
                ASSERT_TRUE(exists(&f, i, &k));
        ASSERT_TRUE(history_outcome_waits(f.h, qid(100)));

        ASSERT_EQ_INT(erase_on_worker(&f, &k), 5);
        for (unsigned i = 1; i <= 5; i++)
                ASSERT_TRUE(!exists(&f, i, &k));
        /* Not the erasure's to land, nor to drop. */
        ASSERT_TRUE(history_outcome_waits(f.h, qid(100)));
        history_get_storage(f.h, 0, &st);
        ASSERT_EQ_INT(st.n_pending, 1);
        assert_answer(&f, 100, &other, "Still waiting.");

        ASSERT_EQ_INT(retry_on_worker(&f), 0);
        ASSERT_TRUE(!history_outcome_waits(f.h, qid(100)));
        history_get_storage(f.h, 0, &st);
        ASSERT_EQ_INT(st.n_pending, 0);
        ASSERT_EQ_INT(st.state, HISTORY_STORAGE_OK);

        /* Stored, not recovered as interrupted (open_store() checks that
         * none was running). */
        fixture_close(&f);
        fixture_open(&f);
        assert_answer(&f, 100, &other, "Still waiting.");
        for (unsigned i = 1; i <= 5; i++)
                ASSERT_TRUE(!exists(&f, i, &k));
        fixture_stop(&f);
}

DEFINE_TEST_MAIN()
