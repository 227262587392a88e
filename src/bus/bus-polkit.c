/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <systemd/sd-bus.h>

#include "bus/bus-polkit.h"
#include "shared/list.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/time-util.h"

/* polkit's CheckAuthorization flag (polkit's PolkitCheckAuthorizationFlags). */
#define POLKIT_CHECK_ALLOW_USER_INTERACTION (UINT32_C(1) << 0)

/* How long an interactive check may take (the user typing a password). */
#define POLKIT_INTERACTIVE_TIMEOUT_USEC (300 * USEC_PER_SEC)

typedef struct PolkitQuery PolkitQuery;

struct PolkitQuery {
        PolkitRegistry *registry;
        sd_bus_message *request; /* referenced; the key */
        sd_bus_slot *slot;       /* the CheckAuthorization call while in flight */
        char *action;

        /* Once polkit answered: 1 allowed, 0 refused, -EBUSY polkit would
         * have asked, another negative errno when the check failed (error
         * then holds what to send). */
        bool done;
        int verdict;
        sd_bus_error error;

        PolkitQuery *queries_prev, *queries_next;
};

struct PolkitRegistry {
        PolkitQuery *queries;
        unsigned n_pending;
};

static PolkitQuery *polkit_query_free(PolkitQuery *q) {
        if (!q)
                return NULL;
        if (q->registry) {
                if (!q->done)
                        q->registry->n_pending--;
                LIST_REMOVE(queries, q->registry->queries, q);
        }
        sd_bus_slot_unref(q->slot);
        sd_bus_message_unref(q->request);
        sd_bus_error_free(&q->error);
        free(q->action);
        free(q);
        return NULL;
}

PolkitRegistry *polkit_registry_free(PolkitRegistry *registry) {
        if (!registry)
                return NULL;
        while (registry->queries)
                polkit_query_free(registry->queries);
        free(registry);
        return NULL;
}

unsigned polkit_registry_pending(const PolkitRegistry *registry) {
        return registry ? registry->n_pending : 0;
}

static PolkitQuery *polkit_registry_find(PolkitRegistry *registry, sd_bus_message *m) {
        if (!registry)
                return NULL;
        for (PolkitQuery *q = registry->queries; q; q = q->queries_next)
                if (q->request == m)
                        return q;
        return NULL;
}

static int polkit_log_create_error(int r) {
        return log_error_errno(r, "polkit: cannot create the CheckAuthorization call");
}

/* CheckAuthorization's answer: (bba{ss}), is_authorized and is_challenge. */
static int polkit_read_answer(sd_bus_message *reply, int *ret_authorized, int *ret_challenge) {
        int r;

        r = sd_bus_message_enter_container(reply, 'r', "bba{ss}");
        if (r < 0)
                return r;
        if (r == 0)
                return -EBADMSG;
        r = sd_bus_message_read(reply, "bb", ret_authorized, ret_challenge);
        if (r < 0)
                return r;
        return r == 0 ? -EBADMSG : 0;
}

/* polkit answered (or the call failed): record the verdict and run the
 * request's handler again. */
static int polkit_on_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        PolkitQuery *q = userdata;
        const sd_bus_error *e;
        int authorized = 0, challenge = 0, r;

        q->slot = sd_bus_slot_unref(q->slot);
        q->done = true;
        q->registry->n_pending--;

        e = sd_bus_message_get_error(reply);
        if (e) {
                if (sd_bus_error_has_names(e, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER)) {
                        /* No polkit on this system: root only (and the
                         * caller is not root, or we would not have asked). */
                        q->verdict = 0;
                } else {
                        log_warning(
                                "polkit: CheckAuthorization for %s failed: %s: %s",
                                q->action,
                                e->name,
                                e->message ? e->message : "");
                        q->verdict = -EACCES;
                        (void) sd_bus_error_setf(
                                &q->error,
                                SD_BUS_ERROR_ACCESS_DENIED,
                                "The authorization check failed (%s); access denied.",
                                e->name);
                }
        } else {
                r = polkit_read_answer(reply, &authorized, &challenge);
                if (r < 0) {
                        log_warning_errno(r, "polkit: cannot parse the answer for %s", q->action);
                        q->verdict = -EACCES;
                        (void) sd_bus_error_set(
                                &q->error,
                                SD_BUS_ERROR_ACCESS_DENIED,
                                "Unexpected answer from polkit; access denied.");
                } else
                        q->verdict = authorized ? 1 : challenge ? -EBUSY : 0;
        }

        /* The handler runs again for the same message and finds the
         * verdict. Without that the caller would wait for its timeout:
         * answer here instead. */
        r = sd_bus_enqueue_for_read(sd_bus_message_get_bus(q->request), q->request);
        if (r < 0) {
                log_warning_errno(r, "polkit: cannot requeue the request for %s", q->action);
                (void) sd_bus_reply_method_errorf(
                        q->request, SD_BUS_ERROR_FAILED, "Cannot complete the authorization check.");
                polkit_query_free(q);
        }
        return 1;
}

/* The verdict of a finished query as the handler's result. */
static int polkit_query_verdict(PolkitQuery *q, sd_bus_error *error) {
        int verdict = q->verdict;

        if (verdict > 0)
                return 1;
        if (sd_bus_error_is_set(&q->error))
                return sd_bus_error_copy(error, &q->error);
        if (verdict == -EBUSY)
                return sd_bus_error_set(
                        error,
                        SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED,
                        "Interactive authentication required.");
        return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED, "Access denied by polkit (%s).", q->action);
}

int bus_sender_euid(sd_bus_message *m, uid_t *ret_euid) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        uid_t euid;
        int r;

        assert(m);
        assert(ret_euid);

        r = sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID, &creds);
        if (r < 0)
                return r;
        r = sd_bus_creds_get_euid(creds, &euid);
        if (r < 0)
                return r;
        *ret_euid = euid;
        return 0;
}

int bus_sender_is_root(sd_bus_message *m) {
        uid_t euid;
        int r;

        r = bus_sender_euid(m, &euid);
        if (r < 0)
                return r;
        return euid == 0;
}

int bus_verify_polkit_async(
        sd_bus_message *call, const char *action, PolkitRegistry **registry, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *pk = NULL;
        PolkitQuery *q;
        const char *sender;
        uint32_t flags = 0;
        int r;

        assert(call);
        assert(action);
        assert(registry);

        /* The second run of the handler, after polkit's answer. */
        q = polkit_registry_find(*registry, call);
        if (q) {
                if (!q->done)
                        /* Delivered again before polkit answered: still waiting. */
                        return 0;
                r = polkit_query_verdict(q, error);
                polkit_query_free(q);
                return r;
        }

        r = bus_sender_is_root(call);
        if (r > 0)
                return 1;
        if (r < 0)
                return sd_bus_error_set(
                        error, SD_BUS_ERROR_ACCESS_DENIED, "Cannot determine the caller's user; access denied.");

        sender = sd_bus_message_get_sender(call);
        if (!sender)
                /* A direct connection: nobody to ask polkit about. */
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED, "No sender; access denied.");

        if (!*registry) {
                *registry = calloc(1, sizeof **registry);
                if (!*registry)
                        return -ENOMEM;
        }

        if (sd_bus_message_get_allow_interactive_authorization(call) > 0)
                flags |= POLKIT_CHECK_ALLOW_USER_INTERACTION;

        r = sd_bus_message_new_method_call(
                sd_bus_message_get_bus(call),
                &pk,
                "org.freedesktop.PolicyKit1",
                "/org/freedesktop/PolicyKit1/Authority",
                "org.freedesktop.PolicyKit1.Authority",
                "CheckAuthorization");
        if (r < 0)
                return polkit_log_create_error(r);
        r = sd_bus_message_append(
                pk, "(sa{sv})sa{ss}us", "system-bus-name", 1, "name", "s", sender, action, 0, flags, "");
        if (r < 0)
                return polkit_log_create_error(r);

        q = calloc(1, sizeof *q);
        if (!q)
                return -ENOMEM;
        q->action = strdup(action);
        if (!q->action) {
                free(q);
                return -ENOMEM;
        }
        q->error = SD_BUS_ERROR_NULL;

        /* polkit may wait for the user to authenticate: give an interactive
         * check longer than sd-bus's default 25 s. */
        r = sd_bus_call_async(
                sd_bus_message_get_bus(call),
                &q->slot,
                pk,
                polkit_on_reply,
                q,
                flags & POLKIT_CHECK_ALLOW_USER_INTERACTION ? POLKIT_INTERACTIVE_TIMEOUT_USEC : 0);
        if (r < 0) {
                log_error_errno(r, "polkit: cannot call CheckAuthorization");
                free(q->action);
                free(q);
                return r;
        }

        q->request = sd_bus_message_ref(call);
        q->registry = *registry;
        LIST_PREPEND(queries, (*registry)->queries, q);
        (*registry)->n_pending++;
        return 0;
}
