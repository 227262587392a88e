/* SPDX-License-Identifier: MIT */
/* wikiwebctl: the admin's tool for wikiwebd's queue, over D-Bus only
 * (org.wikiweb.Queue1, API.md 10 and 12.2), in the manner of resolvectl
 * and machinectl. */

#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "config-version.h"
#include "shared/macro.h"
#include "shared/time-util.h"
#include "wikiwebctl/ctl-table.h"

#define NAME "org.wikiweb.Queue1"
#define PATH "/org/wikiweb/Queue1"
#define IFACE "org.wikiweb.Queue1"

static TableJson arg_json = TABLE_JSON_OFF;
static bool arg_pager = true;
static bool arg_legend = true;
static bool arg_ask_password = true;
static const char *arg_host = NULL;

static pid_t pager_pid = 0;

static void help(void) {
        printf("%s [OPTIONS...] COMMAND ...\n\n"
               "Show and manage the wikiweb query queue (wikiwebd) over D-Bus.\n\n"
               "Commands:\n"
               "  status                 Show the queue's state, admission, running query,\n"
               "                         average, health and counters (the default)\n"
               "  tickets                List the tickets in FIFO order (root only)\n"
               "  drain                  Close admission for maintenance\n"
               "  resume                 Open admission again\n"
               "  cancel ID              Cancel the running query ID\n"
               "  remove-ticket ID       Remove the ticket ID\n"
               "  erase-user NAME        Erase everything kept of the person NAME\n"
               "  unanswered [DAYS]      What the wiki could not answer in the last DAYS\n"
               "                         (default 30), most asked first (root only)\n"
               "  tokens USER            List the access tokens of the person USER\n"
               "  revoke-tokens USER     Revoke every access token of the person USER\n\n"
               "Options:\n"
               "  -h --help              Show this help\n"
               "     --version           Show the version\n"
               "     --json=MODE         Output as JSON: short, pretty or off\n"
               "     --no-pager          Do not pipe the output into a pager\n"
               "     --no-legend         Do not show the headers and the summary line\n"
               "     --no-ask-password   Do not ask for a password (polkit)\n"
               "  -H --host=[USER@]HOST  Operate on a remote host (over ssh)\n\n"
               "See the wikiwebctl(1) man page for details.\n",
               program_invocation_short_name);
}

/* The output goes through $SYSTEMD_PAGER, $PAGER or less, as systemctl
 * does, when it is a terminal and --no-pager was not given. */
static void pager_open(void) {
        const char *pager = getenv("SYSTEMD_PAGER");
        int fds[2];

        if (!arg_pager || !isatty(STDOUT_FILENO))
                return;
        if (!pager)
                pager = getenv("PAGER");
        if (!pager)
                pager = "less";
        if (!*pager || streq(pager, "cat"))
                return;
        if (pipe2(fds, O_CLOEXEC) < 0)
                return;
        fflush(stdout);
        pager_pid = fork();
        if (pager_pid < 0) {
                pager_pid = 0;
                close(fds[0]);
                close(fds[1]);
                return;
        }
        if (pager_pid == 0) {
                if (dup2(fds[0], STDIN_FILENO) < 0)
                        _exit(EXIT_FAILURE);
                /* less: quit if one screen, keep colours, chop long lines. */
                (void) setenv("LESS", "FRSXMK", 0);
                execlp("sh", "sh", "-c", pager, (char *) NULL);
                _exit(EXIT_FAILURE);
        }
        if (dup2(fds[1], STDOUT_FILENO) < 0) {
                close(fds[0]);
                close(fds[1]);
                return;
        }
        close(fds[0]);
        close(fds[1]);
}

static void pager_close(void) {
        if (pager_pid <= 0)
                return;
        fflush(stdout);
        (void) fclose(stdout);
        (void) waitpid(pager_pid, NULL, 0);
        pager_pid = 0;
}

static int parse_argv(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100, ARG_JSON, ARG_NO_PAGER, ARG_NO_LEGEND, ARG_NO_ASK_PASSWORD };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "json", required_argument, NULL, ARG_JSON },
                { "no-pager", no_argument, NULL, ARG_NO_PAGER },
                { "no-legend", no_argument, NULL, ARG_NO_LEGEND },
                { "no-ask-password", no_argument, NULL, ARG_NO_ASK_PASSWORD },
                { "host", required_argument, NULL, 'H' },
                { 0 },
        };
        int c;

        while ((c = getopt_long(argc, argv, "hH:", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("wikiwebctl %s (contract revision %d)\n", PACKAGE_VERSION, CONTRACT_REVISION);
                        return 0;
                case ARG_JSON:
                        if (streq(optarg, "help")) {
                                printf("short\npretty\noff\n");
                                return 0;
                        }
                        arg_json = table_json_from_string(optarg);
                        if (arg_json < 0) {
                                fprintf(stderr, "Unknown JSON mode: %s (short, pretty or off)\n", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_NO_PAGER:
                        arg_pager = false;
                        break;
                case ARG_NO_LEGEND:
                        arg_legend = false;
                        break;
                case ARG_NO_ASK_PASSWORD:
                        arg_ask_password = false;
                        break;
                case 'H':
                        arg_host = optarg;
                        break;
                default:
                        return -EINVAL;
                }
        return 1;
}

/* The value of one property of the GetAll reply, NULL when absent. */
typedef struct QueueProperties {
        const char *state, *admission, *running, *phase, *health, *storage, *storage_cause;
        uint32_t queue_length, max_length, slots, slots_running, slots_reserved;
        char *running_queries; /* "qr_… (phase), …", owned; NULL when absent */
        uint64_t average, reservation, heartbeat, started, failed, expired;
} QueueProperties;

/* An array of running queries as one line, "qr_… (phase, user alice), …",
 * what is not known left out: RunningQueries' a(ss) (no users), or
 * ListRunningQueries' a(sss) (root only: with_user). */
static int read_running_list(sd_bus_message *reply, bool with_user, char **ret) {
        _cleanup_free_ char *line = NULL;
        int r;

        r = sd_bus_message_enter_container(reply, 'a', with_user ? "(sss)" : "(ss)");
        if (r < 0)
                return r;
        for (;;) {
                const char *id, *phase, *user = "";
                bool said;
                char *next;

                if (with_user)
                        r = sd_bus_message_read(reply, "(sss)", &id, &phase, &user);
                else
                        r = sd_bus_message_read(reply, "(ss)", &id, &phase);
                if (r <= 0)
                        break;
                said = *phase || *user;
                if (asprintf(
                            &next,
                            "%s%s%s%s%s%s%s%s%s",
                            line ? line : "",
                            line ? ", " : "",
                            id,
                            said ? " (" : "",
                            phase,
                            *phase && *user ? ", " : "",
                            *user ? "user " : "",
                            user,
                            said ? ")" : "") < 0)
                        return -ENOMEM;
                free(line);
                line = next;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(reply);
        if (r < 0)
                return r;
        free(*ret);
        *ret = TAKE_PTR(line);
        return 0;
}

/* RunningQueries, a variant of a(ss). */
static int read_running_queries(sd_bus_message *reply, char **ret) {
        int r;

        r = sd_bus_message_enter_container(reply, 'v', "a(ss)");
        if (r < 0)
                return r;
        r = read_running_list(reply, false, ret);
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(reply);
}

static int read_properties(sd_bus_message *reply, QueueProperties *p) {
        const char *name;
        int r;

        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                static const struct {
                        const char *name;
                        char type;
                        size_t offset;
                } map[] = {
                        { "State", 's', offsetof(QueueProperties, state) },
                        { "Admission", 's', offsetof(QueueProperties, admission) },
                        { "RunningQueryId", 's', offsetof(QueueProperties, running) },
                        { "RunningQueryPhase", 's', offsetof(QueueProperties, phase) },
                        { "Health", 's', offsetof(QueueProperties, health) },
                        { "Storage", 's', offsetof(QueueProperties, storage) },
                        { "StorageCause", 's', offsetof(QueueProperties, storage_cause) },
                        { "QueueLength", 'u', offsetof(QueueProperties, queue_length) },
                        { "MaxLength", 'u', offsetof(QueueProperties, max_length) },
                        { "Slots", 'u', offsetof(QueueProperties, slots) },
                        { "SlotsRunning", 'u', offsetof(QueueProperties, slots_running) },
                        { "SlotsReserved", 'u', offsetof(QueueProperties, slots_reserved) },
                        { "AverageQueryUSec", 't', offsetof(QueueProperties, average) },
                        { "ReservationUSec", 't', offsetof(QueueProperties, reservation) },
                        { "HeartbeatUSec", 't', offsetof(QueueProperties, heartbeat) },
                        { "QueriesStarted", 't', offsetof(QueueProperties, started) },
                        { "QueriesFailed", 't', offsetof(QueueProperties, failed) },
                        { "TicketsExpired", 't', offsetof(QueueProperties, expired) },
                };
                bool known = false;

                r = sd_bus_message_read(reply, "s", &name);
                if (r < 0)
                        return r;
                if (streq(name, "RunningQueries")) {
                        r = read_running_queries(reply, &p->running_queries);
                        if (r < 0)
                                return r;
                        known = true;
                }
                for (size_t i = 0; !known && i < ELEMENTSOF(map); i++) {
                        char sig[2] = { map[i].type, 0 };

                        if (!streq(name, map[i].name))
                                continue;
                        r = sd_bus_message_read(reply, "v", sig, (uint8_t *) p + map[i].offset);
                        if (r < 0)
                                return r;
                        known = true;
                        break;
                }
                if (!known) {
                        r = sd_bus_message_skip(reply, "v");
                        if (r < 0)
                                return r;
                }
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(reply);
}

static void queue_properties_done(QueueProperties *p) {
        free(p->running_queries);
        p->running_queries = NULL;
}

static int bus_error(const char *what, const sd_bus_error *error, int r) {
        fprintf(stderr, "Failed to %s: %s\n", what, error && error->message ? error->message : strerror(-r));
        return r;
}

static int verb_status(sd_bus *bus) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL, *user_reply = NULL,
                                                        *running_reply = NULL;
        const char *user = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        _cleanup_(queue_properties_done) QueueProperties p = { 0 };
        int r;

        r = sd_bus_call_method(
                bus, NAME, PATH, "org.freedesktop.DBus.Properties", "GetAll", &error, &reply, "s", IFACE);
        if (r < 0)
                return bus_error("read the queue (is wikiwebd running?)", &error, r);
        r = read_properties(reply, &p);
        if (r < 0)
                return bus_error("parse the queue's properties", NULL, r);
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "GetRunningQueryUser", NULL, &user_reply, NULL);
        if (r >= 0 && sd_bus_message_read(user_reply, "s", &user) < 0)
                user = NULL;
        /* Root sees each running query's user too; others the property. */
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "ListRunningQueries", NULL, &running_reply, NULL);
        if (r >= 0 && read_running_list(running_reply, true, &p.running_queries) < 0)
                return bus_error("parse the running queries", NULL, -EBADMSG);

        t = table_new_vertical();
        if (!t)
                return -ENOMEM;
        r = 0;
        r |= table_add_key(t, "State", "state") | table_add_string(t, p.state);
        r |= table_add_key(t, "Admission", "admission") |
                table_add_string(t, p.admission ? p.admission : "open");
        r |= table_add_key(t, "Queue length", "queue_length") | table_add_uint(t, p.queue_length);
        r |= table_add_key(t, "Max length", "max_length") | table_add_uint(t, p.max_length);
        r |= table_add_key(t, "Running query", "running_query_id") |
                table_add_string(t, p.running && *p.running ? p.running : (arg_json ? "" : "none"));
        r |= table_add_key(t, "Query phase", "running_query_phase") |
                table_add_string(t, p.phase && *p.phase ? p.phase : (arg_json ? "" : "none"));
        /* Its user (API.md "Identity"): root only, so shown only when the
         * daemon answers; an anonymous query has none. */
        if (user && *user)
                r |= table_add_key(t, "Query user", "running_query_user") | table_add_string(t, user);
        r |= table_add_key(t, "Slots", "slots") | table_add_uint(t, p.slots);
        r |= table_add_key(t, "Slots running", "slots_running") | table_add_uint(t, p.slots_running);
        r |= table_add_key(t, "Slots reserved", "slots_reserved") | table_add_uint(t, p.slots_reserved);
        r |= table_add_key(t, "Running queries", "running_queries") |
                table_add_string(
                        t,
                        p.running_queries && *p.running_queries ? p.running_queries :
                                                                  (arg_json ? "" : "none"));
        r |= table_add_key(t, "Average query", "average_query_usec");
        if (p.average > 0 || arg_json)
                r |= table_add_timespan(t, p.average);
        else
                r |= table_add_string(t, "n/a");
        r |= table_add_key(t, "Health", "health") | table_add_string(t, p.health);
        /* The history store, and why it is not ok (wikiwebd(8), "When the disk fills"). */
        r |= table_add_key(t, "Storage", "storage") | table_add_string(t, p.storage);
        if (arg_json || (p.storage_cause && *p.storage_cause))
                r |= table_add_key(t, "Storage cause", "storage_cause") | table_add_string(t, p.storage_cause);
        r |= table_add_key(t, "Queries started", "queries_started") | table_add_uint(t, p.started);
        r |= table_add_key(t, "Queries failed", "queries_failed") | table_add_uint(t, p.failed);
        r |= table_add_key(t, "Tickets expired", "tickets_expired") | table_add_uint(t, p.expired);
        r |= table_add_key(t, "Reservation", "reservation_usec") | table_add_timespan(t, p.reservation);
        r |= table_add_key(t, "Heartbeat", "heartbeat_usec") | table_add_timespan(t, p.heartbeat);
        if (r != 0)
                return -ENOMEM;

        pager_open();
        return table_print(t, stdout, arg_json, arg_legend);
}

static int verb_tickets(sd_bus *bus) {
        static const char *const columns[] = {
                "id",   "status", "position", "joined", "heartbeat_deadline", "reservation_deadline",
                "user", NULL
        };
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        const char *id, *status, *user;
        uint64_t joined, heartbeat, reservation;
        uint32_t position;
        int r;

        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "ListTickets", &error, &reply, NULL);
        if (r < 0)
                return bus_error("list the tickets", &error, r);

        t = table_new(columns);
        if (!t)
                return -ENOMEM;
        table_set_noun(t, "ticket", "tickets");
        r = sd_bus_message_enter_container(reply, 'a', "(ssuttts)");
        if (r < 0)
                return bus_error("parse the tickets", NULL, r);
        while ((r = sd_bus_message_read(
                        reply, "(ssuttts)", &id, &status, &position, &joined, &heartbeat, &reservation, &user)) >
               0)
                if (table_add_string(t, id) < 0 || table_add_string(t, status) < 0 ||
                    table_add_uint(t, position) < 0 || table_add_timestamp(t, joined) < 0 ||
                    table_add_timestamp(t, heartbeat) < 0 || table_add_timestamp(t, reservation) < 0 ||
                    table_add_string(t, *user || arg_json ? user : "-") < 0)
                        return -ENOMEM;
        if (r < 0)
                return bus_error("parse the tickets", NULL, r);

        pager_open();
        return table_print(t, stdout, arg_json, arg_legend);
}

/* A question as people typed it, made safe for a terminal: control
 * characters (C0, DEL, C1) become spaces, so that no escape sequence in
 * what somebody asked reaches root's terminal. A new string, NULL on OOM. */
static char *terminal_safe(const char *s) {
        char *t = strdup(s), *w = t;

        if (!t)
                return NULL;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
                        *w++ = ' ';
                        p++;
                } else
                        *w++ = *p < 0x20 || *p == 0x7f ? ' ' : (char) *p;
        }
        *w = 0;
        return t;
}

/* ListUnanswered (API.md 9.2, root only): one row per group. */
static int verb_unanswered(sd_bus *bus, const char *days_arg) {
        static const char *const columns[] = { "count",  "no_sources", "unverified", "negative_feedback",
                                               "failed", "last_asked", "question",   NULL };
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        uint64_t count, first, last, no_sources, unverified, negative, failed;
        const char *question;
        uint32_t days = 0;
        int r;

        if (days_arg) {
                char *end = NULL;
                unsigned long v;

                errno = 0;
                v = strtoul(days_arg, &end, 10);
                if (errno != 0 || !end || *end || end == days_arg || days_arg[0] == '-' ||
                    days_arg[0] == '+' || v < 1 || v > 365) {
                        fprintf(stderr, "DAYS must be an integer from 1 to 365: %s\n", days_arg);
                        return -EINVAL;
                }
                days = (uint32_t) v;
        }
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "ListUnanswered", &error, &reply, "u", days);
        if (r < 0)
                return bus_error("list what the wiki could not answer", &error, r);

        t = table_new(columns);
        if (!t)
                return -ENOMEM;
        table_set_noun(t, "question", "questions");
        r = sd_bus_message_enter_container(reply, 'a', "(stttttttas)");
        if (r < 0)
                return bus_error("parse the report", NULL, r);
        while ((r = sd_bus_message_enter_container(reply, 'r', "stttttttas")) > 0) {
                _cleanup_free_ char *safe = NULL;

                r = sd_bus_message_read(
                        reply,
                        "sttttttt",
                        &question,
                        &count,
                        &first,
                        &last,
                        &no_sources,
                        &unverified,
                        &negative,
                        &failed);
                if (r < 0)
                        return bus_error("parse the report", NULL, r);
                r = sd_bus_message_skip(reply, "as");
                if (r < 0)
                        return bus_error("parse the report", NULL, r);
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        return bus_error("parse the report", NULL, r);
                safe = terminal_safe(question);
                if (!safe || table_add_uint(t, count) < 0 || table_add_uint(t, no_sources) < 0 ||
                    table_add_uint(t, unverified) < 0 || table_add_uint(t, negative) < 0 ||
                    table_add_uint(t, failed) < 0 || table_add_timestamp(t, last) < 0 ||
                    table_add_string(t, safe) < 0)
                        return -ENOMEM;
        }
        if (r < 0)
                return bus_error("parse the report", NULL, r);

        pager_open();
        return table_print(t, stdout, arg_json, arg_legend);
}

/* ListUserTokens (API.md "Access tokens"): one row per token of user,
 * no secret; polkit may ask for a password as for the methods that act. */
static int verb_tokens(sd_bus *bus, const char *user) {
        static const char *const columns[] = { "id", "name", "created", "expires", "last_used", NULL };
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(table_freep) Table *t = NULL;
        uint64_t created, expires, used;
        const char *id, *name;
        int r;

        (void) sd_bus_set_allow_interactive_authorization(bus, arg_ask_password && isatty(STDIN_FILENO));
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "ListUserTokens", &error, &reply, "s", user);
        if (r < 0)
                return bus_error("list the tokens", &error, r);

        t = table_new(columns);
        if (!t)
                return -ENOMEM;
        table_set_noun(t, "token", "tokens");
        r = sd_bus_message_enter_container(reply, 'a', "(ssttt)");
        if (r < 0)
                return bus_error("parse the tokens", NULL, r);
        while ((r = sd_bus_message_read(reply, "(ssttt)", &id, &name, &created, &expires, &used)) > 0) {
                /* The name is the person's words: no escape sequence
                 * reaches the terminal. */
                _cleanup_free_ char *safe = terminal_safe(name);

                if (!safe || table_add_string(t, id) < 0 ||
                    table_add_string(t, arg_json ? name : safe) < 0 || table_add_timestamp(t, created) < 0 ||
                    table_add_timestamp(t, expires) < 0 || table_add_timestamp(t, used) < 0)
                        return -ENOMEM;
        }
        if (r < 0)
                return bus_error("parse the tokens", NULL, r);

        pager_open();
        return table_print(t, stdout, arg_json, arg_legend);
}

/* RevokeUserTokens: says how many were revoked. */
static int verb_revoke_tokens(sd_bus *bus, const char *user) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        uint32_t n;
        int r;

        (void) sd_bus_set_allow_interactive_authorization(bus, arg_ask_password && isatty(STDIN_FILENO));
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "RevokeUserTokens", &error, &reply, "s", user);
        if (r < 0)
                return bus_error("revoke the tokens", &error, r);
        r = sd_bus_message_read(reply, "u", &n);
        if (r < 0)
                return bus_error("parse the reply", NULL, r);
        if (arg_json)
                printf("{\"revoked\":%" PRIu32 "}\n", n);
        else
                printf("Revoked %" PRIu32 " %s.\n", n, n == 1 ? "token" : "tokens");
        return 0;
}

/* Drain, Resume, CancelQuery(id), RemoveTicket(id): polkit may ask for a
 * password on the caller's terminal (its agent), unless --no-ask-password. */
static int verb_act(sd_bus *bus, const char *member, const char *id, const char *what) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        (void) sd_bus_set_allow_interactive_authorization(bus, arg_ask_password && isatty(STDIN_FILENO));
        if (id)
                r = sd_bus_call_method(bus, NAME, PATH, IFACE, member, &error, NULL, "s", id);
        else
                r = sd_bus_call_method(bus, NAME, PATH, IFACE, member, &error, NULL, NULL);
        if (r < 0)
                return bus_error(what, &error, r);
        return 0;
}

/* EraseUser(name): the person's cancelled queries may take a while to end
 * (the daemon waits up to 60 s for them), so the call may last longer
 * than sd-bus's default 25 s. */
#define ERASE_USER_TIMEOUT_USEC (120 * USEC_PER_SEC)

static int verb_erase_user(sd_bus *bus, const char *name) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        uint64_t records;
        int r;

        (void) sd_bus_set_allow_interactive_authorization(bus, arg_ask_password && isatty(STDIN_FILENO));
        r = sd_bus_message_new_method_call(bus, &m, NAME, PATH, IFACE, "EraseUser");
        if (r < 0)
                return bus_error("create the call", NULL, r);
        r = sd_bus_message_append(m, "s", name);
        if (r < 0)
                return bus_error("create the call", NULL, r);
        r = sd_bus_call(bus, m, ERASE_USER_TIMEOUT_USEC, &error, &reply);
        if (r < 0)
                return bus_error("erase the person", &error, r);
        r = sd_bus_message_read(reply, "t", &records);
        if (r < 0)
                return bus_error("parse the reply", NULL, r);
        if (arg_json)
                printf("{\"records\":%" PRIu64 "}\n", records);
        else
                printf("%" PRIu64 " %s erased.\n", records, records == 1 ? "record" : "records");
        return 0;
}

static int run(int argc, char *argv[]) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        const char *verb;
        int r, n;

        r = parse_argv(argc, argv);
        if (r <= 0)
                return r;

        verb = optind < argc ? argv[optind] : "status";
        n = argc - optind - (optind < argc ? 1 : 0);

        if (arg_host)
                r = sd_bus_open_system_remote(&bus, arg_host);
        else
                r = sd_bus_open_system(&bus);
        if (r < 0) {
                fprintf(stderr, "Failed to connect to the system bus: %s\n", strerror(-r));
                return r;
        }

        if (streq(verb, "status") && n == 0)
                return verb_status(bus);
        if (streq(verb, "tickets") && n == 0)
                return verb_tickets(bus);
        if (streq(verb, "drain") && n == 0)
                return verb_act(bus, "Drain", NULL, "drain admission");
        if (streq(verb, "resume") && n == 0)
                return verb_act(bus, "Resume", NULL, "resume admission");
        if (streq(verb, "cancel") && n == 1)
                return verb_act(bus, "CancelQuery", argv[optind + 1], "cancel the query");
        if (streq(verb, "unanswered") && n <= 1)
                return verb_unanswered(bus, n == 1 ? argv[optind + 1] : NULL);
        if (streq(verb, "remove-ticket") && n == 1)
                return verb_act(bus, "RemoveTicket", argv[optind + 1], "remove the ticket");
        if (streq(verb, "erase-user") && n == 1)
                return verb_erase_user(bus, argv[optind + 1]);
        if (streq(verb, "tokens") && n == 1)
                return verb_tokens(bus, argv[optind + 1]);
        if (streq(verb, "revoke-tokens") && n == 1)
                return verb_revoke_tokens(bus, argv[optind + 1]);

        fprintf(stderr, "Unknown command or wrong number of arguments: %s (see --help)\n", verb);
        return -EINVAL;
}

int main(int argc, char *argv[]) {
        int r = run(argc, argv);

        pager_close();
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
