/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/files.h"
#include "sandbox/sandbox-internal.h"
#include "shared/fault.h"
#include "shared/log.h"
#include "shared/macro.h"

/* ---- state changes ---- */

SandboxState sandbox_state_of(const SandboxConditions *c) {
        assert(c);

        if (c->test_starting)
                return SANDBOX_STARTING;
        if (c->static_unavailable)
                return SANDBOX_UNAVAILABLE;
        if (c->manager_ready)
                return c->sweep_done ? SANDBOX_AVAILABLE : SANDBOX_STARTING;
        if (c->manager_expected && !c->manager_overdue)
                return SANDBOX_STARTING;
        return SANDBOX_UNAVAILABLE;
}

static void sandbox_conditions(const Sandbox *s, usec_t t, SandboxConditions *ret) {
        bool ready = scope_manager_is_ready(s->scopes);

        *ret = (SandboxConditions){
                .static_unavailable = s->static_reason[0] != 0,
                .test_starting = TEST_FAULT(t < s->test_starting_until),
                .manager_ready = ready,
                .manager_expected = scope_manager_is_expected(s->scopes),
                .manager_overdue = !ready && t >= usec_add(s->manager_lost, SANDBOX_STARTING_MAX_USEC),
                .sweep_done = s->sweep_done,
        };
}

SandboxState sandbox_get_state(const Sandbox *s) {
        SandboxConditions c;

        assert(s);
        sandbox_conditions(s, now(CLOCK_MONOTONIC), &c);
        return sandbox_state_of(&c);
}

bool sandbox_is_available(const Sandbox *s) {
        return sandbox_get_state(s) == SANDBOX_AVAILABLE;
}

const char *sandbox_unavailable_reason(const Sandbox *s) {
        Sandbox *m = (Sandbox *) s; /* reason[] is a cache of the sentence */
        SandboxConditions c;

        assert(s);

        sandbox_conditions(s, now(CLOCK_MONOTONIC), &c);
        if (TEST_FAULT(c.test_starting))
                return "held starting by the test fault switch WIKI_WEB_TEST_SANDBOX_STARTING_MS";
        if (c.static_unavailable)
                return s->static_reason;
        if (!c.manager_ready && !c.manager_expected) {
                snprintf(
                        m->reason,
                        sizeof m->reason,
                        "no user manager: %s, and the service user does not linger",
                        scope_manager_reason(s->scopes));
                return m->reason;
        }
        if (!c.manager_ready && c.manager_overdue) {
                snprintf(
                        m->reason,
                        sizeof m->reason,
                        "the user manager has not answered for %" PRIu64 " s: %s",
                        (uint64_t) (SANDBOX_STARTING_MAX_USEC / USEC_PER_SEC),
                        scope_manager_reason(s->scopes));
                return m->reason;
        }
        if (!c.manager_ready)
                return scope_manager_reason(s->scopes);
        if (!s->sweep_done)
                return "the start-up sweep of leftover containers is not done yet";
        return "";
}

static int sandbox_on_announce(sd_event_source *source, void *userdata) {
        Sandbox *s = userdata;
        SandboxState state = sandbox_get_state(s);
        bool pending = sandbox_cleanup_pending(s);

        if (state == s->last_state && pending == s->last_pending)
                return 0;
        s->last_state = state;
        s->last_pending = pending;
        if (s->state_handler)
                s->state_handler(s, s->state_userdata);
        return 0;
}

static int sandbox_on_state_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        Sandbox *s = userdata;

        sandbox_notify(s);
        return 0;
}

/* The state changes by time alone when the fault switch's hold ends and
 * when a user manager that does not answer becomes overdue: wake up then. */
static void sandbox_arm_state_timer(Sandbox *s, usec_t t) {
        usec_t next = USEC_INFINITY;
        int r;

        if (TEST_FAULT(t < s->test_starting_until))
                next = s->test_starting_until;
        if (!scope_manager_is_ready(s->scopes)) {
                usec_t overdue = usec_add(s->manager_lost, SANDBOX_STARTING_MAX_USEC);
                if (t < overdue)
                        next = MIN(next, overdue);
        }
        if (next == USEC_INFINITY) {
                if (s->state_timer)
                        (void) sd_event_source_set_enabled(s->state_timer, SD_EVENT_OFF);
                return;
        }
        if (!s->state_timer) {
                r = sd_event_add_time(
                        s->event, &s->state_timer, CLOCK_MONOTONIC, next, 0, sandbox_on_state_timer, s);
                if (r < 0) {
                        log_warning_errno(r, "Cannot watch the sandbox's start");
                        return;
                }
                (void) sd_event_source_set_description(s->state_timer, "sandbox-state");
                return;
        }
        (void) sd_event_source_set_time(s->state_timer, next);
        (void) sd_event_source_set_enabled(s->state_timer, SD_EVENT_ONESHOT);
}

void sandbox_notify(Sandbox *s) {
        sandbox_arm_state_timer(s, now(CLOCK_MONOTONIC));
        if (sandbox_get_state(s) == s->last_state && sandbox_cleanup_pending(s) == s->last_pending)
                return;
        /* Announce from the loop, never from inside the caller (an sd-bus
         * callback, a cleanup's step). */
        if (s->announce)
                (void) sd_event_source_set_enabled(s->announce, SD_EVENT_ONESHOT);
}

bool sandbox_cleanup_pending(const Sandbox *s) {
        assert(s);
        return s->n_pending > 0;
}

void sandbox_set_state_handler(Sandbox *s, SandboxStateHandler handler, void *userdata) {
        assert(s);

        s->state_handler = handler;
        s->state_userdata = userdata;
}

void sandbox_set_cleanup_confirmed_handler(Sandbox *s, SandboxCleanupConfirmedHandler handler, void *userdata) {
        assert(s);

        s->confirmed_handler = handler;
        s->confirmed_userdata = userdata;
}

#if ENABLE_TEST_FAULTS
void sandbox_set_test_unconfirmable(Sandbox *s, unsigned n) {
        assert(s);
        scope_manager_set_test_unconfirmable(s->scopes, n);
}

void sandbox_set_test_deaf_init(Sandbox *s, bool deaf) {
        assert(s);
        s->test_deaf_init = deaf;
}

void sandbox_set_test_starting(Sandbox *s, usec_t duration) {
        assert(s);
        s->test_starting_until = usec_add(now(CLOCK_MONOTONIC), duration);
        sandbox_notify(s);
}
#endif

/* Say once which limits hold here (docs/SANDBOX.md: cgroup v1 versus v2): the
 * scope's MemoryMax= and TasksMax= only where the user manager has the
 * controllers delegated; otherwise only the rlimits. */
static void sandbox_log_limits(void) {
        _cleanup_free_ char *path = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        char line[512] = "";
        unsigned uid = (unsigned) getuid();

        if (asprintf(
                    &path,
                    "/sys/fs/cgroup/user.slice/user-%u.slice/user@%u.service/cgroup.subtree_control",
                    uid,
                    uid) < 0)
                return;
        f = fopen(path, "re");
        if (f && !fgets(line, sizeof line, f))
                line[0] = 0;
        if (strstr(line, "memory") && strstr(line, "pids"))
                log_info(
                        "Sandbox limits: MemoryMax= and TasksMax= hold for each run's scope (cgroup v2 controllers "
                        "delegated: %.*s), besides the rlimits.",
                        (int) strcspn(line, "\n"),
                        line);
        else
                log_notice(
                        "Sandbox limits: no memory and pids controllers are delegated to the user manager (cgroup "
                        "v1 or hybrid, or none delegated): memory is limited per process (RLIMIT_DATA), tasks by "
                        "RLIMIT_NPROC, not per run.");
}

static void sandbox_on_ready(bool ready, const char *reason, void *userdata) {
        Sandbox *s = userdata;
        bool was_answering = s->manager_answered;

        s->manager_answered = ready;
        if (ready) {
                log_info("The user manager answers: sandbox scopes can be made.");
                if (!s->sweep_started && !s->static_reason[0]) {
                        sandbox_log_limits();
                        sandbox_sweep_start(s);
                }
        } else {
                /* It stopped answering: it has SANDBOX_STARTING_MAX_USEC
                 * from now to answer again. */
                if (was_answering)
                        s->manager_lost = now(CLOCK_MONOTONIC);
                if (reason && *reason && !strstr(reason, "waiting"))
                        log_warning("Sandbox unavailable: %s.", reason);
        }
        sandbox_notify(s);
}

/* ---- set-up ---- */

static void sandbox_check_static(Sandbox *s) {
        const Config *c = s->config;
        _cleanup_free_ char *python = NULL;
        int r;

        r = runtime_find(c->sandbox_runtime ? c->sandbox_runtime : "crun", &s->runtime);
        if (r < 0) {
                snprintf(
                        s->static_reason,
                        sizeof s->static_reason,
                        "the OCI runtime \"%s\" was not found",
                        c->sandbox_runtime ? c->sandbox_runtime : "crun");
                return;
        }
        s->kind = runtime_kind_from_path(s->runtime);

        r = sandbox_workdir_mkdir_p(s->work_dir, 0700);
        if (r < 0) {
                snprintf(
                        s->static_reason,
                        sizeof s->static_reason,
                        "cannot create %s: %s",
                        s->work_dir,
                        strerror(-r));
                return;
        }
        r = sandbox_workdir_mkdir_p(s->state_root, 0700);
        if (r < 0) {
                snprintf(
                        s->static_reason,
                        sizeof s->static_reason,
                        "cannot create %s: %s",
                        s->state_root,
                        strerror(-r));
                return;
        }

        if (c->sandbox_rootfs && *c->sandbox_rootfs) {
                s->rootfs = strdup(c->sandbox_rootfs);
                if (!s->rootfs || asprintf(&python, "%s/usr/bin/python3", c->sandbox_rootfs) < 0) {
                        python = NULL;
                        snprintf(s->static_reason, sizeof s->static_reason, "out of memory");
                        return;
                }
                for (const char *const *m = (const char *const[]){ "proc", "dev", "tmp", "data", "out", NULL };
                     *m;
                     m++) {
                        _cleanup_free_ char *p = NULL;
                        struct stat st;
                        if (asprintf(&p, "%s/%s", c->sandbox_rootfs, *m) < 0 || stat(p, &st) < 0 ||
                            !S_ISDIR(st.st_mode)) {
                                snprintf(
                                        s->static_reason,
                                        sizeof s->static_reason,
                                        "the rootfs %s has no /%s directory",
                                        c->sandbox_rootfs,
                                        *m);
                                return;
                        }
                }
        } else {
                s->default_rootfs = true;
                if (asprintf(&s->rootfs, "%s/rootfs", s->work_dir) < 0) {
                        s->rootfs = NULL;
                        snprintf(s->static_reason, sizeof s->static_reason, "out of memory");
                        return;
                }
                r = sandbox_workdir_make_skeleton(s->rootfs);
                if (r < 0) {
                        snprintf(
                                s->static_reason,
                                sizeof s->static_reason,
                                "cannot create the rootfs skeleton %s: %s",
                                s->rootfs,
                                strerror(-r));
                        return;
                }
                python = strdup("/usr/bin/python3");
        }
        if (!python || access(python, X_OK) < 0)
                snprintf(
                        s->static_reason,
                        sizeof s->static_reason,
                        "the rootfs has no python3 (%s)",
                        python ? python : "?");
}

int sandbox_new(sd_event *event, const Config *config, const SandboxOptions *options, Sandbox **ret) {
        _cleanup_(sandbox_freep) Sandbox *s = calloc(1, sizeof *s);
        const SandboxOptions none = { 0 };
        const char *rd = getenv("RUNTIME_DIRECTORY");
        int r;

        assert(event);
        assert(config);
        assert(ret);

        if (!s)
                return -ENOMEM;
        if (!options)
                options = &none;
        s->event = sd_event_ref(event);
        s->config = config;

        r = reaper_new(event, &s->reaper);
        if (r < 0)
                return r;

        if (options->work_dir)
                s->work_dir = strdup(options->work_dir);
        else if (config->state_directory && asprintf(&s->work_dir, "%s/sandbox", config->state_directory) < 0)
                s->work_dir = NULL;
        if (options->state_root)
                s->state_root = strdup(options->state_root);
        else if (rd && *rd && !strchr(rd, ':')) {
                if (asprintf(&s->state_root, "%s/runtime", rd) < 0)
                        s->state_root = NULL;
        } else if (s->work_dir && asprintf(&s->state_root, "%s/runtime", s->work_dir) < 0)
                s->state_root = NULL;

        if (!s->work_dir || !s->state_root)
                snprintf(s->static_reason, sizeof s->static_reason, "no state directory for the sandbox");
        else
                sandbox_check_static(s);

        /* The user manager has SANDBOX_STARTING_MAX_USEC from here. */
        s->manager_lost = now(CLOCK_MONOTONIC);
        r = scope_manager_new(event, options->bus_address, &s->scopes);
        if (r < 0)
                return r;
        scope_manager_set_ready_handler(s->scopes, sandbox_on_ready, s);
        r = sd_event_add_defer(event, &s->announce, sandbox_on_announce, s);
        if (r < 0)
                return r;
        r = sd_event_source_set_enabled(s->announce, SD_EVENT_OFF);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(s->announce, "sandbox-announce");
        s->last_state = sandbox_get_state(s);
        s->last_pending = false;
        sandbox_arm_state_timer(s, now(CLOCK_MONOTONIC));
        if (s->static_reason[0])
                log_warning("Sandbox unavailable: %s.", s->static_reason);
        else if (
                !scope_manager_is_ready(s->scopes) && scope_manager_reason(s->scopes)[0] &&
                !strstr(scope_manager_reason(s->scopes), "waiting"))
                log_warning("Sandbox unavailable: %s.", scope_manager_reason(s->scopes));
        *ret = TAKE_PTR(s);
        return 0;
}

Sandbox *sandbox_free(Sandbox *s) {
        if (!s)
                return NULL;
        while (s->queries) {
                SandboxQuery *q = s->queries;
                if (q->run)
                        sandbox_run_free(q->run);
                sandbox_query_free(q);
        }
        while (s->cleanups)
                sandbox_cleanup_free(s->cleanups);
        s->scopes = scope_manager_free(s->scopes);
        s->announce = sd_event_source_disable_unref(s->announce);
        s->state_timer = sd_event_source_disable_unref(s->state_timer);
        s->reaper = reaper_free(s->reaper);
        sd_event_unref(s->event);
        free(s->runtime);
        free(s->work_dir);
        free(s->state_root);
        free(s->rootfs);
        free(s);
        return NULL;
}

/* ---- queries ---- */

static bool query_id_valid(const char *id) {
        size_t n = strlen(id);

        if (n == 0 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
                      (id[i] >= '0' && id[i] <= '9') || id[i] == '_'))
                        return false;
        return true;
}

int sandbox_query_new(Sandbox *s, const char *query_id, SandboxQuery **ret) {
        _cleanup_(sandbox_query_freep) SandboxQuery *q = NULL;
        int r;

        assert(s);
        assert(ret);

        if (!query_id_valid(query_id))
                return -EINVAL;
        if (!s->work_dir)
                return -ENOENT;
        for (SandboxQuery *i = s->queries; i; i = i->next)
                if (streq(i->id, query_id))
                        return -EEXIST;
        q = calloc(1, sizeof *q);
        if (!q)
                return -ENOMEM;
        *q = (SandboxQuery){ .sandbox = s, .dir_fd = -1, .data_fd = -1, .out_fd = -1, .next = s->queries };
        s->queries = q;
        q->id = strdup(query_id);
        if (!q->id || asprintf(&q->dir, "%s/%s", s->work_dir, query_id) < 0) {
                q->dir = NULL;
                return -ENOMEM;
        }
        r = sandbox_workdir_make_query(q);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(q);
        return 0;
}

SandboxQuery *sandbox_query_free(SandboxQuery *q) {
        if (!q)
                return NULL;
        assert(!q->run);
        for (SandboxQuery **p = &q->sandbox->queries; *p; p = &(*p)->next)
                if (*p == q) {
                        *p = q->next;
                        break;
                }
        sandbox_workdir_remove_query(q);
        for (size_t i = 0; i < q->n_pages; i++)
                wiki_page_done(&q->pages[i]);
        free(q->pages);
        free(q->id);
        free(q->dir);
        free(q);
        return NULL;
}

int sandbox_query_add_page(SandboxQuery *q, const WikiPage *page) {
        size_t i;

        assert(q);
        assert(page);

        for (i = 0; i < q->n_pages; i++)
                if (streq(q->pages[i].title, page->title))
                        break;
        if (i == q->n_pages) {
                WikiPage *n = reallocarray(q->pages, q->n_pages + 1, sizeof *n);
                if (!n)
                        return -ENOMEM;
                q->pages = n;
                q->pages[i] = (WikiPage){ 0 };
                q->n_pages++;
        } else
                wiki_page_done(&q->pages[i]);
        q->pages[i].title = strdup(page->title);
        q->pages[i].url = strdup(page->url ? page->url : "");
        q->pages[i].revision_id = page->revision_id;
        if (!q->pages[i].title || !q->pages[i].url) {
                wiki_page_done(&q->pages[i]);
                q->n_pages--;
                return -ENOMEM;
        }
        return sandbox_data_write_page(q->data_fd, page, q->pages, q->n_pages);
}

bool sandbox_query_cleanup_confirmed(const SandboxQuery *q) {
        assert(q);
        return !sandbox_cleanup_pending_for(q->sandbox, q->id) &&
                (!q->run || q->run->state == SANDBOX_RUN_REPORTING);
}

int sandbox_query_collect(SandboxQuery *q, SandboxArtifacts *ret) {
        const Config *c = q->sandbox->config;

        assert(q);
        assert(ret);

        return sandbox_collect_artifacts(q->out_fd, c->artifact_max_files, c->artifact_max_bytes, ret);
}
