/* SPDX-License-Identifier: MIT */
/* The org.wikiweb.Queue1 object, a face of a real Manager (its admission,
 * a history on a temporary state directory, no execution configured and
 * the test fault that keeps a query running), against a private
 * dbus-daemon: the live introspection equals dbus/org.wikiweb.Queue1.xml,
 * properties follow the Manager, PropertiesChanged carries exactly the changed
 * properties once per event-loop iteration, signals carry ids and reasons,
 * ListTickets converts times and refuses a caller that is not root (on a
 * bus whose policy allows everything); the methods that act work for root
 * and ask a fake polkit, asynchronously, about anybody else. The real system bus
 * and policy are tested by the system suite (tests/system). */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "admission/admission.h"
#include "bus/queue-bus.h"
#include "manager/manager-ops.h"
#include "manager/manager.h"
#include "sandbox/files.h"
#include "shared/config.h"
#include "shared/macro.h"
#include "tests.h"

#define NAME "org.wikiweb.Queue1"
#define PATH "/org/wikiweb/Queue1"
#define IFACE "org.wikiweb.Queue1"

typedef struct Received {
        char member[64];
        char arg0[64];
        char arg1[64];
        uint64_t number;
        char changed[256]; /* PropertiesChanged: "Name,Name," in order */
} Received;

/* One case's fixture: a private dbus-daemon of its own, the Manager, the
 * object on that bus and a client, in one event loop. */
typedef struct Test {
        pid_t bus_pid;
        char config_path[64];
        char address[512];
        char *state_dir;
        Config config;
        sd_event *event;
        Manager *manager;
        Admission *admission; /* the Manager's, driven by hand for expiries */
        QueueBus *qb;
        sd_bus *client;
        Received received[64];
        size_t n_received;
        unsigned next_id;
} Test;

/* A bus where everything is allowed and every user may connect: the
 * daemon's own checks are what is tested here. */
static const char bus_config[] =
        "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
        " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
        "<busconfig>\n"
        " <type>session</type>\n"
        " <listen>unix:tmpdir=/tmp</listen>\n"
        " <auth>EXTERNAL</auth>\n"
        " <policy context=\"default\">\n"
        "  <allow user=\"*\"/>\n"
        "  <allow send_destination=\"*\" eavesdrop=\"true\"/>\n"
        "  <allow eavesdrop=\"true\"/>\n"
        "  <allow own=\"*\"/>\n"
        " </policy>\n"
        "</busconfig>\n";

/* Start a private dbus-daemon on a socket of its own; returns its address.
 * The daemon dies with us, even when an assertion aborts. */
static int start_bus(Test *t, char *address, size_t size) {
        char *config_path = t->config_path;
        char config_arg[128];
        int pipefd[2], cfd;
        size_t n = 0;

        if (access("/usr/bin/dbus-daemon", X_OK) < 0)
                return -ENOENT;
        snprintf(t->config_path, sizeof t->config_path, "/tmp/test-queue-bus-XXXXXX");
        cfd = mkstemp(config_path);
        if (cfd < 0)
                return -errno;
        if (write(cfd, bus_config, sizeof bus_config - 1) != (ssize_t) (sizeof bus_config - 1)) {
                close(cfd);
                return -EIO;
        }
        close(cfd);
        snprintf(config_arg, sizeof config_arg, "--config-file=%s", config_path);
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        t->bus_pid = fork();
        if (t->bus_pid < 0)
                return -errno;
        if (t->bus_pid == 0) {
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);

                (void) prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (null < 0 || dup2(pipefd[1], 3) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
                        _exit(127);
                execl("/usr/bin/dbus-daemon",
                      "dbus-daemon",
                      config_arg,
                      "--nofork",
                      "--nopidfile",
                      "--print-address=3",
                      (char *) NULL);
                _exit(127);
        }
        close(pipefd[1]);
        while (n < size - 1) {
                ssize_t k = read(pipefd[0], address + n, size - 1 - n);
                if (k <= 0)
                        break;
                n += (size_t) k;
                if (memchr(address, '\n', n))
                        break;
        }
        close(pipefd[0]);
        /* Read by now: do not leave it behind even if an assertion aborts. */
        (void) unlink(config_path);
        address[n] = 0;
        address[strcspn(address, "\n")] = 0;
        return n > 0 ? 0 : -EIO;
}

static void stop_bus(Test *t) {
        if (t->config_path[0])
                (void) unlink(t->config_path);
        if (t->bus_pid > 0) {
                kill(t->bus_pid, SIGTERM);
                (void) waitpid(t->bus_pid, NULL, 0);
                t->bus_pid = -1;
        }
}

static void counter_ids(char buf[static TICKET_ID_MAX], void *userdata) {
        Test *t = userdata;

        snprintf(buf, TICKET_ID_MAX, "tk_%032x", ++t->next_id);
}

static const char *no_env(const char *name, void *userdata) {
        return NULL;
}

/* A query of session s asked by user (NULL: anonymous); its id in ret_id. */
static void start_query(Test *t, const SessionKey *s, const char *user, char ret_id[static QUERY_ID_MAX]) {
        ManagerQuery *q = NULL;

        ASSERT_OK(manager_start_query(
                t->manager, &(ManagerQueryRequest){ .session = s, .user = user, .question = "Why?" }, &q));
        snprintf(ret_id, QUERY_ID_MAX, "%s", manager_query_id(q));
}

static int on_signal(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Test *t = userdata;
        Received *rv;
        const char *member = sd_bus_message_get_member(m);

        if (!streq(sd_bus_message_get_path(m), PATH))
                return 0;
        ASSERT_TRUE(t->n_received < ELEMENTSOF(t->received));
        rv = &t->received[t->n_received++];
        *rv = (Received){ .number = 0 };
        snprintf(rv->member, sizeof rv->member, "%s", member);

        if (streq(member, "TicketPromoted")) {
                const char *id;
                ASSERT_OK(sd_bus_message_read(m, "s", &id));
                snprintf(rv->arg0, sizeof rv->arg0, "%s", id);
        } else if (streq(member, "TicketRemoved")) {
                const char *id, *reason;
                ASSERT_OK(sd_bus_message_read(m, "ss", &id, &reason));
                snprintf(rv->arg0, sizeof rv->arg0, "%s", id);
                snprintf(rv->arg1, sizeof rv->arg1, "%s", reason);
        } else if (streq(member, "QueryFinished")) {
                const char *id, *status;
                ASSERT_OK(sd_bus_message_read(m, "sst", &id, &status, &rv->number));
                snprintf(rv->arg0, sizeof rv->arg0, "%s", id);
                snprintf(rv->arg1, sizeof rv->arg1, "%s", status);
        } else if (streq(member, "PropertiesChanged")) {
                const char *iface, *prop;
                size_t len = 0;

                ASSERT_OK(sd_bus_message_read(m, "s", &iface));
                ASSERT_EQ_STR(iface, IFACE);
                ASSERT_OK(sd_bus_message_enter_container(m, 'a', "{sv}"));
                while (sd_bus_message_enter_container(m, 'e', "sv") > 0) {
                        ASSERT_OK(sd_bus_message_read(m, "s", &prop));
                        ASSERT_OK(sd_bus_message_skip(m, "v"));
                        ASSERT_OK(sd_bus_message_exit_container(m));
                        len += (size_t) snprintf(rv->changed + len, sizeof rv->changed - len, "%s,", prop);
                        ASSERT_TRUE(len < sizeof rv->changed);
                }
                ASSERT_OK(sd_bus_message_exit_container(m));
        }
        return 0;
}

/* Run the shared event loop until it is idle for a moment: the server and
 * the client live in the same loop, so every call is asynchronous. */
static void settle(Test *t) {
        for (int idle = 0; idle < 3;) {
                int r = sd_event_run(t->event, 20 * USEC_PER_MSEC);
                ASSERT_OK(r);
                idle = r == 0 ? idle + 1 : 0;
        }
}

typedef struct Reply {
        bool done;
        sd_bus_message *m;
} Reply;

static int on_reply(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Reply *rp = userdata;

        rp->done = true;
        rp->m = sd_bus_message_ref(m);
        return 0;
}

static sd_bus_message *call(Test *t, sd_bus_message *m) {
        Reply rp = { .done = false };

        ASSERT_OK(sd_bus_call_async(t->client, NULL, m, on_reply, &rp, 5 * USEC_PER_SEC));
        while (!rp.done)
                ASSERT_OK(sd_event_run(t->event, USEC_INFINITY));
        return rp.m;
}

static sd_bus_message *call_method(Test *t, const char *iface, const char *member, const char *types, ...) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        va_list ap;

        ASSERT_OK(sd_bus_message_new_method_call(t->client, &m, NAME, PATH, iface, member));
        if (types) {
                va_start(ap, types);
                ASSERT_OK(sd_bus_message_appendv(m, types, ap));
                va_end(ap);
        }
        return call(t, m);
}

static sd_bus_message *get_property(Test *t, const char *property, const char *type) {
        sd_bus_message *reply = call_method(t, "org.freedesktop.DBus.Properties", "Get", "ss", IFACE, property);

        ASSERT_TRUE(!sd_bus_message_is_method_error(reply, NULL));
        ASSERT_OK(sd_bus_message_enter_container(reply, 'v', type));
        return reply;
}

static uint64_t get_t(Test *t, const char *property) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = get_property(t, property, "t");
        uint64_t v;

        ASSERT_OK(sd_bus_message_read(reply, "t", &v));
        return v;
}

static uint32_t get_u(Test *t, const char *property) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = get_property(t, property, "u");
        uint32_t v;

        ASSERT_OK(sd_bus_message_read(reply, "u", &v));
        return v;
}

/* RunningQueries as "id:phase," for each entry. */
static void expect_running_queries(Test *t, const char *expected) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = get_property(t, "RunningQueries", "a(ss)");
        char buf[512] = "";
        const char *id, *phase;
        int r;

        ASSERT_OK(sd_bus_message_enter_container(reply, 'a', "(ss)"));
        while ((r = sd_bus_message_read(reply, "(ss)", &id, &phase)) > 0) {
                size_t n = strlen(buf);
                (void) snprintf(buf + n, sizeof buf - n, "%s:%s,", id, phase);
        }
        ASSERT_OK(r);
        ASSERT_OK(sd_bus_message_exit_container(reply));
        ASSERT_EQ_STR(buf, expected);
}

/* ListRunningQueries (root only): "id:phase:user," for each. */
static void expect_running_query_users(Test *t, const char *expected) {
        _cleanup_(sd_bus_message_unrefp)
                sd_bus_message *reply = call_method(t, IFACE, "ListRunningQueries", NULL);
        char buf[512] = "";
        const char *id, *phase, *user;
        int r;

        ASSERT_OK(sd_bus_message_enter_container(reply, 'a', "(sss)"));
        while ((r = sd_bus_message_read(reply, "(sss)", &id, &phase, &user)) > 0) {
                size_t n = strlen(buf);
                (void) snprintf(buf + n, sizeof buf - n, "%s:%s:%s,", id, phase, user);
        }
        ASSERT_OK(r);
        ASSERT_OK(sd_bus_message_exit_container(reply));
        ASSERT_EQ_STR(buf, expected);
}

static void expect_s(Test *t, const char *property, const char *expected) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = get_property(t, property, "s");
        const char *v;

        ASSERT_OK(sd_bus_message_read(reply, "s", &v));
        ASSERT_EQ_STR(v, expected);
}

static const Received *expect_received(Test *t, size_t *i, const char *member) {
        ASSERT_TRUE(*i < t->n_received);
        if (!streq(t->received[*i].member, member)) {
                fprintf(stderr, "signal %zu: expected %s, got %s\n", *i, member, t->received[*i].member);
                abort();
        }
        return &t->received[(*i)++];
}

/* The next signal is TicketRemoved(id, reason). */
static void expect_removed(Test *t, size_t *i, const char *id, const char *reason) {
        const Received *rv = expect_received(t, i, "TicketRemoved");

        if (id)
                ASSERT_EQ_STR(rv->arg0, id);
        ASSERT_EQ_STR(rv->arg1, reason);
}

static SessionKey key(uint8_t b) {
        SessionKey k;

        memset(k.bytes, b, sizeof k.bytes);
        return k;
}

/* Keep the lines of the <interface name="org.wikiweb.Queue1"> element,
 * without comments and blank lines, each trimmed. */
static char *interface_block(const char *xml) {
        const char *start = strstr(xml, "<interface name=\"" IFACE "\">");
        const char *end;
        char *out, *o;
        bool in_comment = false;

        ASSERT_TRUE(start);
        end = strstr(start, "</interface>");
        ASSERT_TRUE(end);
        end += STRLEN("</interface>");
        out = o = calloc(1, (size_t) (end - start) + 2);
        ASSERT_TRUE(out);
        for (const char *p = start; p < end;) {
                const char *eol = memchr(p, '\n', (size_t) (end - p));
                const char *line_end = eol ? eol : end;
                const char *a = p, *z = line_end;

                while (a < z && (*a == ' ' || *a == '\t'))
                        a++;
                while (z > a && (z[-1] == ' ' || z[-1] == '\t' || z[-1] == '\r'))
                        z--;
                if (in_comment) {
                        if (z - a >= 3 && strneq(z - 3, "-->", 3))
                                in_comment = false;
                } else if (z - a >= 4 && strneq(a, "<!--", 4)) {
                        if (!(z - a >= 3 && strneq(z - 3, "-->", 3)))
                                in_comment = true;
                } else if (z > a) {
                        memcpy(o, a, (size_t) (z - a));
                        o += z - a;
                        *o++ = '\n';
                }
                p = eol ? eol + 1 : end;
        }
        *o = 0;
        return out;
}

static void run_introspection(Test *t) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *live = NULL, *want = NULL, *file = NULL;
        char path[4096];
        const char *xml;
        size_t n;

        reply = call_method(t, "org.freedesktop.DBus.Introspectable", "Introspect", NULL);
        ASSERT_TRUE(!sd_bus_message_is_method_error(reply, NULL));
        ASSERT_OK(sd_bus_message_read(reply, "s", &xml));

        snprintf(path, sizeof path, "%s/../../../dbus/org.wikiweb.Queue1.xml", test_data_dir());
        file = test_read_file(path, &n);
        ASSERT_TRUE(n > 0 && n < 65535);
        live = interface_block(xml);
        want = interface_block(file);
        if (!streq(live, want)) {
                fprintf(stderr, "live introspection:\n%s\ndbus/org.wikiweb.Queue1.xml:\n%s\n", live, want);
                abort();
        }
}

#define SEC(x) ((usec_t) (x) *USEC_PER_SEC)

static void run_flow(Test *t) {
        SessionKey a = key(1), b = key(2), c = key(3);
        usec_t t0 = now(CLOCK_MONOTONIC);
        char id[QUERY_ID_MAX], want[256];
        const Received *rv;
        size_t i = 0;

        /* Settings are const; the rest starts at zero. */
        ASSERT_EQ_INT(get_u(t, "MaxLength"), 3);
        ASSERT_EQ_INT(get_t(t, "ReservationUSec"), SEC(60));
        ASSERT_EQ_INT(get_t(t, "HeartbeatUSec"), SEC(120));
        expect_s(t, "State", "idle");
        expect_s(t, "Health", "ok");
        expect_s(t, "RunningQueryId", "");
        expect_s(t, "RunningQueryPhase", "");
        ASSERT_EQ_INT(get_u(t, "QueueLength"), 0);
        ASSERT_EQ_INT(get_t(t, "AverageQueryUSec"), 0);
        ASSERT_EQ_INT(get_u(t, "Slots"), 1);
        ASSERT_EQ_INT(get_u(t, "SlotsRunning"), 0);
        ASSERT_EQ_INT(get_u(t, "SlotsReserved"), 0);
        expect_running_queries(t, "");

        /* A joins (with a name) and is promoted at once; B joins. One
         * PropertiesChanged, with final values. */
        ASSERT_EQ_INT(manager_join(t->manager, &a, "alice", t0), 1);
        ASSERT_EQ_INT(manager_join(t->manager, &b, NULL, t0), 1);
        settle(t);
        rv = expect_received(t, &i, "TicketPromoted");
        ASSERT_EQ_STR(rv->arg0, "tk_00000000000000000000000000000001");
        rv = expect_received(t, &i, "PropertiesChanged");
        ASSERT_EQ_STR(rv->changed, "State,QueueLength,SlotsReserved,");
        ASSERT_EQ_INT(t->n_received, i);
        expect_s(t, "State", "reserved");
        ASSERT_EQ_INT(get_u(t, "SlotsReserved"), 1);
        ASSERT_EQ_INT(get_u(t, "QueueLength"), 2);

        /* ListTickets (we are root here, or we are refused), with the
         * user of A's ticket ("Identity"), none for B's. */
        {
                _cleanup_(sd_bus_message_unrefp)
                        sd_bus_message *reply = call_method(t, IFACE, "ListTickets", NULL);
                const char *tid, *status, *user;
                uint32_t pos;
                uint64_t joined, hb, res;
                usec_t real = now(CLOCK_REALTIME);

                if (geteuid() != 0) {
                        ASSERT_TRUE(sd_bus_message_is_method_error(reply, SD_BUS_ERROR_ACCESS_DENIED));
                } else {
                        ASSERT_TRUE(!sd_bus_message_is_method_error(reply, NULL));
                        ASSERT_OK(sd_bus_message_enter_container(reply, 'a', "(ssuttts)"));
                        ASSERT_EQ_INT(
                                sd_bus_message_read(
                                        reply, "(ssuttts)", &tid, &status, &pos, &joined, &hb, &res, &user),
                                1);
                        ASSERT_EQ_STR(tid, "tk_00000000000000000000000000000001");
                        ASSERT_EQ_STR(status, "reserved");
                        ASSERT_EQ_STR(user, "alice");
                        ASSERT_EQ_INT(pos, 0);
                        ASSERT_TRUE(joined <= real && joined + SEC(10) > real);
                        ASSERT_TRUE(hb > real + SEC(110) && hb <= real + SEC(120));
                        ASSERT_TRUE(res > real + SEC(50) && res <= real + SEC(60));
                        ASSERT_EQ_INT(
                                sd_bus_message_read(
                                        reply, "(ssuttts)", &tid, &status, &pos, &joined, &hb, &res, &user),
                                1);
                        ASSERT_EQ_STR(tid, "tk_00000000000000000000000000000002");
                        ASSERT_EQ_STR(status, "waiting");
                        ASSERT_EQ_STR(user, "");
                        ASSERT_EQ_INT(pos, 1);
                        ASSERT_EQ_INT(res, 0);
                        ASSERT_EQ_INT(
                                sd_bus_message_read(
                                        reply, "(ssuttts)", &tid, &status, &pos, &joined, &hb, &res, &user),
                                0);
                        ASSERT_OK(sd_bus_message_exit_container(reply));
                }
        }

        /* Reservation expiry of A: removed, B promoted; State stays
         * "reserved", so only QueueLength and TicketsExpired change. */
        ASSERT_EQ_INT(admission_expire(t->admission, t0 + SEC(60)), 1);
        settle(t);
        expect_removed(t, &i, "tk_00000000000000000000000000000001", "reservation");
        rv = expect_received(t, &i, "TicketPromoted");
        ASSERT_EQ_STR(rv->arg0, "tk_00000000000000000000000000000002");
        rv = expect_received(t, &i, "PropertiesChanged");
        ASSERT_EQ_STR(rv->changed, "QueueLength,TicketsExpired,");
        ASSERT_EQ_INT(t->n_received, i);
        ASSERT_EQ_INT(get_t(t, "TicketsExpired"), 1);

        /* C joins and leaves. */
        ASSERT_EQ_INT(manager_join(t->manager, &c, NULL, t0 + SEC(60)), 1);
        ASSERT_OK(manager_leave(t->manager, &c, t0 + SEC(60)));
        settle(t);
        expect_removed(t, &i, "tk_00000000000000000000000000000003", "left");
        /* Length went 1 -> 2 -> 1 within one iteration: nothing to report. */
        ASSERT_EQ_INT(t->n_received, i);

        /* B's query starts, asked by bob: running, in the phase "model". */
        start_query(t, &b, "bob", id);
        settle(t);
        rv = expect_received(t, &i, "TicketRemoved");
        ASSERT_EQ_STR(rv->arg1, "claimed");
        rv = expect_received(t, &i, "PropertiesChanged");
        ASSERT_EQ_STR(
                rv->changed,
                "State,QueueLength,RunningQueryId,RunningQueryPhase,SlotsRunning,SlotsReserved,RunningQueries,"
                "QueriesStarted,");
        ASSERT_EQ_INT(t->n_received, i);
        expect_s(t, "State", "running");
        ASSERT_EQ_INT(get_u(t, "SlotsRunning"), 1);
        ASSERT_EQ_INT(get_u(t, "SlotsReserved"), 0);
        snprintf(want, sizeof want, "%s:model,", id);
        expect_running_queries(t, want);
        expect_s(t, "RunningQueryId", id);
        expect_s(t, "RunningQueryPhase", "model");
        ASSERT_EQ_INT(get_t(t, "QueriesStarted"), 1);
        /* Its user, root only, from the Manager's record. */
        {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
                const char *user;

                reply = call_method(t, IFACE, "GetRunningQueryUser", NULL);
                if (geteuid() != 0)
                        ASSERT_TRUE(sd_bus_message_is_method_error(reply, SD_BUS_ERROR_ACCESS_DENIED));
                else {
                        ASSERT_OK(sd_bus_message_read(reply, "s", &user));
                        ASSERT_EQ_STR(user, "bob");
                        snprintf(want, sizeof want, "%s:model:bob,", id);
                        expect_running_query_users(t, want);
                }
        }

        /* While it runs, C joins and stops polling: expired by heartbeat. */
        ASSERT_EQ_INT(manager_join(t->manager, &c, NULL, t0 + SEC(61)), 1);
        settle(t);
        rv = expect_received(t, &i, "PropertiesChanged");
        ASSERT_EQ_STR(rv->changed, "QueueLength,");
        ASSERT_EQ_INT(admission_expire(t->admission, t0 + SEC(181)), 1);
        settle(t);
        expect_removed(t, &i, "tk_00000000000000000000000000000004", "heartbeat");
        rv = expect_received(t, &i, "PropertiesChanged");
        ASSERT_EQ_STR(rv->changed, "QueueLength,TicketsExpired,");
        ASSERT_EQ_INT(get_t(t, "TicketsExpired"), 2);
        expect_s(t, "State", "running");

        /* It is cancelled: it fails, its slot is given up (nothing to clean
         * up), idle again, the average known. */
        ASSERT_OK(manager_cancel_query(t->manager, id, "Cancelled by the test"));
        settle(t);
        rv = expect_received(t, &i, "QueryFinished");
        ASSERT_EQ_STR(rv->arg0, id);
        ASSERT_EQ_STR(rv->arg1, "failed");
        rv = expect_received(t, &i, "PropertiesChanged");
        ASSERT_EQ_STR(
                rv->changed,
                "State,AverageQueryUSec,RunningQueryId,RunningQueryPhase,SlotsRunning,RunningQueries,"
                "QueriesFailed,");
        ASSERT_EQ_INT(t->n_received, i);
        expect_running_queries(t, "");
        expect_s(t, "State", "idle");
        expect_s(t, "RunningQueryId", "");
        expect_s(t, "RunningQueryPhase", "");
        expect_s(t, "Health", "ok");
        ASSERT_EQ_INT(get_t(t, "QueriesFailed"), 1);
        ASSERT_TRUE(get_t(t, "AverageQueryUSec") > 0);
        ASSERT_EQ_INT(t->n_received, i);

        /* Nothing else is there: no setter, no other method. */
        {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = call_method(
                        t, "org.freedesktop.DBus.Properties", "Set", "ssv", IFACE, "State", "s", "idle");
                ASSERT_TRUE(sd_bus_message_is_method_error(reply, NULL));
        }
        {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = call_method(t, IFACE, "Claim", NULL);
                ASSERT_TRUE(sd_bus_message_is_method_error(reply, SD_BUS_ERROR_UNKNOWN_METHOD));
        }
}

/* In a forked child: drop to uid/gid 65534 and connect to the test bus;
 * exits the child on failure. */
static sd_bus *child_connect_as_nobody(const char *address) {
        sd_bus *bus = NULL;

        if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                _exit(2);
        if (sd_bus_new(&bus) < 0 || sd_bus_set_address(bus, address) < 0 ||
            sd_bus_set_bus_client(bus, true) < 0 || sd_bus_start(bus) < 0)
                _exit(3);
        return bus;
}

/* Run the shared loop (the daemon's side) until the child pid closes fd
 * (the read end of its pipe: it exited), then read what it wrote into buf
 * (NUL-terminated). The Manager's sandbox reaps every child (it owns
 * SIGCHLD), so what a child says goes through the pipe, not its exit
 * status. */
static void wait_child(Test *t, pid_t pid, int fd, char *buf, size_t size) {
        size_t n = 0;

        for (;;) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                ssize_t k;

                ASSERT_TRUE(poll(&p, 1, 0) >= 0);
                if (p.revents == 0) {
                        ASSERT_OK(sd_event_run(t->event, 10 * USEC_PER_MSEC));
                        continue;
                }
                k = read(fd, buf + n, size - 1 - n);
                ASSERT_TRUE(k >= 0);
                if (k == 0 || n + (size_t) k >= size - 1) {
                        n += (size_t) k;
                        break;
                }
                n += (size_t) k;
        }
        buf[n] = 0;
        close(fd);
        (void) waitpid(pid, NULL, WNOHANG);
}

/* A caller that is not root is refused by the daemon itself, whatever the
 * bus policy says (this bus allows everything). */
static void run_list_tickets_needs_root(Test *t) {
        const char *address = t->address;
        char said[16];
        int pipefd[2];
        pid_t pid;

        if (geteuid() != 0) {
                fprintf(stderr, "not root: skipping the non-root caller check\n");
                return;
        }
        ASSERT_TRUE(pipe2(pipefd, O_CLOEXEC) >= 0);
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
                sd_bus *bus = child_connect_as_nobody(address);
                int r;

                r = sd_bus_call_method(bus, NAME, PATH, IFACE, "ListTickets", &error, &reply, NULL);
                if (r >= 0 || !sd_bus_error_has_name(&error, SD_BUS_ERROR_ACCESS_DENIED))
                        _exit(4);
                sd_bus_error_free(&error);
                r = sd_bus_call_method(bus, NAME, PATH, IFACE, "GetRunningQueryUser", &error, NULL, NULL);
                if (r >= 0 || !sd_bus_error_has_name(&error, SD_BUS_ERROR_ACCESS_DENIED))
                        _exit(6);
                sd_bus_error_free(&error);
                r = sd_bus_call_method(bus, NAME, PATH, IFACE, "ListRunningQueries", &error, NULL, NULL);
                if (r >= 0 || !sd_bus_error_has_name(&error, SD_BUS_ERROR_ACCESS_DENIED))
                        _exit(7);
                /* Properties stay readable. */
                sd_bus_error_free(&error);
                r = sd_bus_get_property_trivial(
                        bus, NAME, PATH, IFACE, "QueueLength", &error, 'u', &(uint32_t){ 0 });
                if (r < 0)
                        _exit(5);
                (void) write(pipefd[1], "OK", 2);
                _exit(0);
        }
        close(pipefd[1]);
        wait_child(t, pid, pipefd[0], said, sizeof said);
        ASSERT_EQ_STR(said, "OK");
}

/* The methods that act, as root (never asks polkit): Drain/Resume flip
 * Admission, RemoveTicket removes with reason "admin", CancelQuery cancels
 * the Manager's running query. */
/* Call member of the interface (arg: its "s" argument, or NULL) and check
 * the reply: success when error is NULL, else that error. */
static void expect_call(Test *t, const char *member, const char *arg, const char *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = arg ?
                call_method(t, IFACE, member, "s", arg) :
                call_method(t, IFACE, member, NULL);

        if (error)
                ASSERT_TRUE(sd_bus_message_is_method_error(reply, error));
        else
                ASSERT_TRUE(!sd_bus_message_is_method_error(reply, NULL));
}

/* A person's key for the token methods: a fake of the transport's. */
static int fake_user_key(const char *user, SessionKey *ret) {
        memset(ret->bytes, 0x5a, sizeof ret->bytes);
        ret->bytes[0] = (uint8_t) user[0];
        return 0;
}

/* ListUserTokens and RevokeUserTokens, as root: the person's tokens
 * without their secret, then all of them revoked; a name that is not an
 * identity name refused by them and EraseUser alike. */
static void run_token_methods(Test *t) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL, *revoked = NULL;
        const char *id, *name;
        uint64_t created, expires, used;
        ManagerTokenCreated c;
        ManagerError e;
        uint32_t n;

        manager_set_user_key_function(t->manager, fake_user_key);
        ASSERT_OK(manager_token_create(t->manager, "alice", "laptop", 1, &c, &e));
        reply = call_method(t, IFACE, "ListUserTokens", "s", "alice");
        ASSERT_TRUE(!sd_bus_message_is_method_error(reply, NULL));
        ASSERT_OK(sd_bus_message_enter_container(reply, 'a', "(ssttt)"));
        ASSERT_EQ_INT(sd_bus_message_read(reply, "(ssttt)", &id, &name, &created, &expires, &used), 1);
        ASSERT_EQ_STR(id, c.id);
        ASSERT_EQ_STR(name, "laptop");
        ASSERT_TRUE(created == c.created_at && expires == c.expires_at && used == 0);
        ASSERT_EQ_INT(sd_bus_message_read(reply, "(ssttt)", &id, &name, &created, &expires, &used), 0);
        /* One rule for the name every person method takes: an identity name. */
        for (size_t i = 0; i < 2; i++) {
                const char *bad = i == 0 ? "" : "bad\001name";

                expect_call(t, "ListUserTokens", bad, SD_BUS_ERROR_INVALID_ARGS);
                expect_call(t, "RevokeUserTokens", bad, SD_BUS_ERROR_INVALID_ARGS);
                expect_call(t, "EraseUser", bad, SD_BUS_ERROR_INVALID_ARGS);
        }
        revoked = call_method(t, IFACE, "RevokeUserTokens", "s", "alice");
        ASSERT_OK(sd_bus_message_read(revoked, "u", &n));
        ASSERT_EQ_INT(n, 1);
        ASSERT_EQ_INT(manager_token_create(t->manager, "alice", "x", 0, &c, &e), 0);
}

static void run_admin_methods(Test *t) {
        SessionKey a = key(1), b = key(2), c = key(3);
        usec_t t0 = now(CLOCK_MONOTONIC);
        char id[QUERY_ID_MAX];
        const Received *rv;
        size_t i = 0;

        if (geteuid() != 0) {
                fprintf(stderr, "not root: skipping the root caller checks\n");
                return;
        }

        expect_s(t, "Admission", "open");
        expect_call(t, "Drain", NULL, NULL);
        settle(t);
        rv = expect_received(t, &i, "PropertiesChanged");
        ASSERT_EQ_STR(rv->changed, "Admission,");
        expect_s(t, "Admission", "draining");
        ASSERT_EQ_INT(manager_join(t->manager, &a, NULL, t0), -ESHUTDOWN);
        /* Idempotent: nothing changes, nothing is emitted. */
        expect_call(t, "Drain", NULL, NULL);
        expect_call(t, "Resume", NULL, NULL);
        settle(t);
        rv = expect_received(t, &i, "PropertiesChanged");
        ASSERT_EQ_STR(rv->changed, "Admission,");
        expect_s(t, "Admission", "open");
        ASSERT_EQ_INT(t->n_received, i);

        /* RemoveTicket: unknown, then the reserved one (the next is promoted). */
        ASSERT_EQ_INT(manager_join(t->manager, &a, NULL, t0), 1);
        ASSERT_EQ_INT(manager_join(t->manager, &b, NULL, t0), 1);
        ASSERT_EQ_INT(manager_join(t->manager, &c, NULL, t0), 1);
        settle(t);
        i = t->n_received;
        expect_call(t, "RemoveTicket", "tk_nope", QUEUE_BUS_ERROR_NO_SUCH_TICKET);
        expect_call(t, "RemoveTicket", "tk_00000000000000000000000000000001", NULL);
        settle(t);
        expect_removed(t, &i, "tk_00000000000000000000000000000001", "admin");
        rv = expect_received(t, &i, "TicketPromoted");
        ASSERT_EQ_STR(rv->arg0, "tk_00000000000000000000000000000002");
        ASSERT_EQ_INT(get_u(t, "QueueLength"), 2);

        /* CancelQuery: an id that does not run is NoSuchQuery; B's running
         * query is cancelled, and ends. */
        expect_call(t, "CancelQuery", "qr_x", QUEUE_BUS_ERROR_NO_SUCH_QUERY);
        start_query(t, &b, NULL, id);
        settle(t);
        i = t->n_received;
        expect_call(t, "CancelQuery", id, NULL);
        settle(t);
        /* Its slot is given up before its end is announced: C is promoted. */
        rv = expect_received(t, &i, "TicketPromoted");
        ASSERT_EQ_STR(rv->arg0, "tk_00000000000000000000000000000003");
        rv = expect_received(t, &i, "QueryFinished");
        ASSERT_EQ_STR(rv->arg0, id);
        ASSERT_EQ_STR(rv->arg1, "failed");
        expect_call(t, "CancelQuery", id, QUEUE_BUS_ERROR_NO_SUCH_QUERY);
        run_token_methods(t);
}

/* A fake polkit on the private bus, in the same event loop as the daemon:
 * if the daemon waited for polkit synchronously, the loop would never get
 * to the answer and the test would hang. */
typedef struct FakePolkit {
        sd_bus *bus;
        bool authorize;
        bool challenge;
        unsigned calls;
        uint32_t last_flags;
        char last_subject_kind[64];
        char last_name[64];
        char last_action[64];
} FakePolkit;

static int fake_check_authorization(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        FakePolkit *pk = userdata;
        const char *kind, *action, *cancel_id;
        uint32_t flags;

        ASSERT_OK(sd_bus_message_enter_container(m, 'r', "sa{sv}"));
        ASSERT_OK(sd_bus_message_read(m, "s", &kind));
        snprintf(pk->last_subject_kind, sizeof pk->last_subject_kind, "%s", kind);
        ASSERT_OK(sd_bus_message_enter_container(m, 'a', "{sv}"));
        while (sd_bus_message_enter_container(m, 'e', "sv") > 0) {
                const char *k, *v;

                ASSERT_OK(sd_bus_message_read(m, "s", &k));
                ASSERT_EQ_STR(k, "name");
                ASSERT_OK(sd_bus_message_read(m, "v", "s", &v));
                snprintf(pk->last_name, sizeof pk->last_name, "%s", v);
                ASSERT_OK(sd_bus_message_exit_container(m));
        }
        ASSERT_OK(sd_bus_message_exit_container(m));
        ASSERT_OK(sd_bus_message_exit_container(m));
        ASSERT_OK(sd_bus_message_read(m, "s", &action));
        snprintf(pk->last_action, sizeof pk->last_action, "%s", action);
        ASSERT_OK(sd_bus_message_skip(m, "a{ss}"));
        ASSERT_OK(sd_bus_message_read(m, "us", &flags, &cancel_id));
        pk->last_flags = flags;
        pk->calls++;
        return sd_bus_reply_method_return(m, "(bba{ss})", pk->authorize, pk->challenge, 0);
}

static const sd_bus_vtable fake_polkit_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("CheckAuthorization", "(sa{sv})sa{ss}us", "(bba{ss})", fake_check_authorization, 0),
        SD_BUS_VTABLE_END,
};

static void fake_polkit_start(Test *t, FakePolkit *pk) {
        ASSERT_OK(sd_bus_new(&pk->bus));
        ASSERT_OK(sd_bus_set_address(pk->bus, t->address));
        ASSERT_OK(sd_bus_set_bus_client(pk->bus, true));
        ASSERT_OK(sd_bus_start(pk->bus));
        ASSERT_OK(sd_bus_attach_event(pk->bus, t->event, 0));
        ASSERT_OK(sd_bus_add_object_vtable(
                pk->bus,
                NULL,
                "/org/freedesktop/PolicyKit1/Authority",
                "org.freedesktop.PolicyKit1.Authority",
                fake_polkit_vtable,
                pk));
        ASSERT_OK(sd_bus_request_name(pk->bus, "org.freedesktop.PolicyKit1", 0));
}

/* Call member (with an "s" argument when arg is set) as uid 65534 in a
 * child; returns the D-Bus error name it got ("" for success). The parent
 * runs the shared loop meanwhile. */
static void call_as_nobody(
        Test *t, const char *member, const char *arg, bool interactive, char *ret_error, size_t size) {
        char said[256];
        int pipefd[2];
        pid_t pid;

        ASSERT_TRUE(pipe2(pipefd, O_CLOEXEC) >= 0);
        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
                sd_bus *bus = child_connect_as_nobody(t->address);
                const char *name;

                if (sd_bus_set_allow_interactive_authorization(bus, interactive) < 0)
                        _exit(4);
                if (sd_bus_message_new_method_call(bus, &m, NAME, PATH, IFACE, member) < 0 ||
                    (arg && sd_bus_message_append(m, "s", arg) < 0))
                        _exit(5);
                name = sd_bus_call(bus, m, 10 * USEC_PER_SEC, &error, &reply) >= 0 ? "" : error.name;
                if (write(pipefd[1], "OK:", 3) < 0 || write(pipefd[1], name, strlen(name)) < 0)
                        _exit(6);
                _exit(0);
        }
        close(pipefd[1]);
        wait_child(t, pid, pipefd[0], said, sizeof said);
        ASSERT_TRUE(strncmp(said, "OK:", 3) == 0);
        snprintf(ret_error, size, "%s", said + 3);
}

static void run_polkit(Test *t) {
        FakePolkit pk = { .authorize = false };
        char error[256];

        if (geteuid() != 0) {
                fprintf(stderr, "not root: skipping the non-root caller checks\n");
                return;
        }

        /* No polkit on the bus: root only. */
        call_as_nobody(t, "Drain", NULL, false, error, sizeof error);
        ASSERT_EQ_STR(error, SD_BUS_ERROR_ACCESS_DENIED);
        expect_s(t, "Admission", "open");

        /* polkit says no to every method. */
        fake_polkit_start(t, &pk);
        call_as_nobody(t, "Drain", NULL, false, error, sizeof error);
        ASSERT_EQ_STR(error, SD_BUS_ERROR_ACCESS_DENIED);
        ASSERT_EQ_INT(pk.calls, 1);
        ASSERT_EQ_STR(pk.last_subject_kind, "system-bus-name");
        ASSERT_TRUE(pk.last_name[0] == ':');
        ASSERT_EQ_STR(pk.last_action, "org.wikiweb.queue.manage");
        ASSERT_EQ_INT(pk.last_flags, 0);
        call_as_nobody(t, "Resume", NULL, false, error, sizeof error);
        ASSERT_EQ_STR(error, SD_BUS_ERROR_ACCESS_DENIED);
        call_as_nobody(t, "CancelQuery", "qr_x", false, error, sizeof error);
        ASSERT_EQ_STR(error, SD_BUS_ERROR_ACCESS_DENIED);
        call_as_nobody(t, "RemoveTicket", "tk_x", false, error, sizeof error);
        ASSERT_EQ_STR(error, SD_BUS_ERROR_ACCESS_DENIED);
        call_as_nobody(t, "ListUserTokens", "alice", false, error, sizeof error);
        ASSERT_EQ_STR(error, SD_BUS_ERROR_ACCESS_DENIED);
        call_as_nobody(t, "RevokeUserTokens", "alice", false, error, sizeof error);
        ASSERT_EQ_STR(error, SD_BUS_ERROR_ACCESS_DENIED);
        ASSERT_EQ_INT(pk.calls, 6);
        expect_s(t, "Admission", "open");

        /* polkit would ask: the interactive flag is passed on, and without
         * it the answer says so. */
        pk.challenge = true;
        call_as_nobody(t, "Drain", NULL, false, error, sizeof error);
        ASSERT_EQ_STR(error, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED);
        ASSERT_EQ_INT(pk.last_flags, 0);
        call_as_nobody(t, "Drain", NULL, true, error, sizeof error);
        ASSERT_EQ_INT(pk.last_flags, 1);

        /* polkit says yes: the call is answered once polkit has answered. */
        pk.challenge = false;
        pk.authorize = true;
        call_as_nobody(t, "Drain", NULL, true, error, sizeof error);
        ASSERT_EQ_STR(error, "");
        expect_s(t, "Admission", "draining");
        call_as_nobody(t, "RemoveTicket", "tk_nope", false, error, sizeof error);
        ASSERT_EQ_STR(error, QUEUE_BUS_ERROR_NO_SUCH_TICKET);
        call_as_nobody(t, "Resume", NULL, false, error, sizeof error);
        ASSERT_EQ_STR(error, "");
        expect_s(t, "Admission", "open");

        /* Root never asks. */
        pk.calls = 0;
        {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = call_method(t, IFACE, "Drain", NULL);
                ASSERT_TRUE(!sd_bus_message_is_method_error(reply, NULL));
        }
        ASSERT_EQ_INT(pk.calls, 0);
        pk.bus = sd_bus_flush_close_unref(pk.bus);
}

static void run_second_owner_refused(Test *t) {
        const char *address = t->address;
        QueueBus *other = NULL;

        /* The name is ours; a second daemon on the same bus learns it. */
        ASSERT_EQ_INT(queue_bus_new(t->event, t->manager, address, &other), -EEXIST);
        ASSERT_TRUE(!other);
}

/* A fresh fixture: a new private bus, a Manager (ticket ids counted from
 * 1; every query runs until cancelled, by the test fault), the object and
 * a client, settled. */
static void test_setup(Test *t) {
        _cleanup_free_ char *cfg_error = NULL;

        *t = (Test){ .bus_pid = -1, .n_received = 0, .state_dir = strdup("/tmp/test-queue-bus-state-XXXXXX") };
        ASSERT_OK(start_bus(t, t->address, sizeof t->address));

        ASSERT_TRUE(t->state_dir && mkdtemp(t->state_dir));
        ASSERT_OK(config_load(&t->config, no_env, NULL, &cfg_error));
        free(t->config.state_directory);
        t->config.state_directory = strdup(t->state_dir);
        free(t->config.sandbox_runtime);
        t->config.sandbox_runtime = strdup("/nonexistent/crun");
        ASSERT_TRUE(t->config.state_directory && t->config.sandbox_runtime);
        t->config.queue_reservation_seconds = 60;
        t->config.queue_heartbeat_seconds = 120;
        t->config.queue_max_length = 3;
        t->config.queue_slots = 1;
        ASSERT_OK(setenv("WIKI_WEB_TEST_FAULTS", "1", 1));
        ASSERT_OK(setenv("WIKI_WEB_TEST_QUERY_DELAY_MS", "600000", 1));

        ASSERT_OK(sd_event_new(&t->event));
        ASSERT_OK(manager_new(t->event, &t->config, &t->manager));
        /* The test drives the expiries by hand, at times of its choosing. */
        t->admission = (Admission *) manager_get_admission(t->manager);
        admission_set_id_generator(t->admission, counter_ids, t);
        ASSERT_OK(queue_bus_new(t->event, t->manager, t->address, &t->qb));

        ASSERT_OK(sd_bus_new(&t->client));
        ASSERT_OK(sd_bus_set_address(t->client, t->address));
        ASSERT_OK(sd_bus_set_bus_client(t->client, true));
        ASSERT_OK(sd_bus_start(t->client));
        ASSERT_OK(sd_bus_attach_event(t->client, t->event, 0));
        ASSERT_OK(sd_bus_match_signal(t->client, NULL, NULL, PATH, NULL, NULL, on_signal, t));
        settle(t);
}

static void test_done(Test *t) {
        t->client = sd_bus_flush_close_unref(t->client);
        t->qb = queue_bus_free(t->qb);
        t->manager = manager_free(t->manager);
        t->event = sd_event_unref(t->event);
        config_done(&t->config);
        if (t->state_dir)
                ASSERT_OK(sandbox_rm_rf(AT_FDCWD, t->state_dir));
        free(t->state_dir);
        stop_bus(t);
}

/* Each case on a fresh fixture: run_NAME(&t). */
#define FIXTURE_TEST(name)                                       \
        TEST(name) {                                             \
                _cleanup_(test_done) Test t = { .bus_pid = -1 }; \
                                                                 \
                test_setup(&t);                                  \
                run_##name(&t);                                  \
        }

FIXTURE_TEST(introspection)
FIXTURE_TEST(flow)
FIXTURE_TEST(list_tickets_needs_root)
FIXTURE_TEST(admin_methods)
FIXTURE_TEST(polkit)
FIXTURE_TEST(second_owner_refused)

/* Every case starts a dbus-daemon of its own: without one, skip them all. */
static int intro(void) {
        if (access("/usr/bin/dbus-daemon", X_OK) < 0)
                return test_skip("cannot start dbus-daemon --session");
        return 0;
}

DEFINE_TEST_MAIN_WITH_INTRO(intro)
