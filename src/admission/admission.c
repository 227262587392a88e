/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <sys/mman.h>

#include "admission/admission.h"
#include "shared/macro.h"

/* Data layout (everything O(log n) amortised, see admission.h):
 *
 *  - Tickets live in one pool array and refer to each other by 32-bit index,
 *    so a ticket costs 96 bytes with no per-ticket malloc header. Freed
 *    entries form a free list. The pool is allocated once for max_length
 *    tickets (address space only: pages become resident as they are used)
 *    and never moves.
 *  - Sessions find their ticket through an open-addressing hash table of
 *    pool indices and key hashes (linear probing, load at most 1/2,
 *    backward-shift deletion, no tombstones).
 *  - The FIFO is a cell array in join order, a bitmap of the live cells and
 *    a Fenwick tree counting them per bitmap word: a position is a prefix
 *    sum plus a popcount, the head is a Fenwick search.
 *    New tickets take the next cell; when the array is used up the live
 *    tickets are compacted to the front and the tree rebuilt in O(n), which
 *    leaves at least n free cells, so this is amortised O(1) per join.
 *  - Heartbeat deadlines are now + heartbeat_usec with a constant
 *    heartbeat_usec and a clamped, non-decreasing now, so a queue in order of
 *    last heartbeat is also in order of deadline: the earliest is at the
 *    head. A heartbeat marks the ticket's old entry dead and appends a new
 *    one; dead entries are skipped at the head (which is always live, so the
 *    next deadline is exact) and squeezed out when the queue is full, which
 *    is amortised O(1).
 *  - The N slots are a small array beside the tickets. A reserved ticket
 *    is always ahead of every waiting one (each was the first waiting
 *    ticket when it was promoted, and later tickets join behind it), so the
 *    reserved tickets are the first n_reserved live cells of the FIFO: a
 *    waiting ticket's position is its rank less n_reserved, and the first
 *    waiting ticket is a Fenwick search for rank n_reserved + 1. A slot
 *    knows its ticket; a ticket does not know its slot (there is no room
 *    in its 96 bytes), so the few transitions that free a reserved slot
 *    look it up among the N slots. The earliest reservation deadline is
 *    kept, and recomputed over the slots when a reserved slot is freed.
 *    The running slots are kept in claim order (the order of the
 *    Manager's claim times, which the wait estimate takes).
 *  Measured: about 140 bytes per ticket in all, tables included.
 *
 * Cost at scale: at 10^6 tickets the tables span ~130 MB, so an operation
 * on a random session pays at least one cache miss to DRAM (the session's
 * ticket; the hash bucket before it is a second, dependent one). The layout
 * keeps it to that: no neighbour is touched, the position structures stay
 * cached, and the big tables sit on huge pages so that the misses do not
 * add page walks. bench-admission measures it. */

#define IDX_NONE UINT32_MAX
#define CELLS_MIN 64u
#define HASH_MIN 64u
#define HBQ_MIN 64u

#define SLOT_NONE UINT32_MAX

typedef struct Slot {
        AdmissionState state;
        uint32_t ticket;             /* reserved: the pool index of its ticket */
        usec_t reservation_deadline; /* reserved */
        SessionKey session;          /* running: one query per session */
        char query_id[QUERY_ID_MAX]; /* running */
} Slot;

/* A reserved ticket whose deadline is due, as expire_at() collects them. */
typedef struct Due {
        uint32_t slot;
        RemoveReason reason;
        char id[TICKET_ID_MAX];
} Due;

typedef struct Ticket {
        SessionKey key;
        char id[TICKET_ID_MAX];
        usec_t joined;
        usec_t heartbeat_deadline; /* USEC_INFINITY while held (admission_hold()) */
        uint32_t cell;             /* index into Admission.cells; the free-list link while free */
        uint32_t hb_pos;           /* its entry in Admission.hbq, IDX_NONE when not queued */
        char *user;                /* its holder's name (admission_set_user()), NULL: anonymous */
} Ticket;

struct Admission {
        AdmissionSettings settings;

        usec_t last_now; /* the largest "now" seen: earlier ones are clamped to it */

        /* Ticket pool */
        Ticket *pool;
        uint32_t pool_used; /* high-water mark: entries ever handed out */
        uint32_t pool_free; /* head of the free list */
        uint32_t n_tickets;

        /* Session -> pool index */
        struct Bucket *hash;
        uint32_t hash_size; /* power of two, or 0 */

        /* FIFO: cell i is live when bit i of live[] is set, and then
         * cells[i] is its pool index; fenwick[1..n_words] counts the live
         * cells per bitmap word. */
        uint32_t *cells;
        uint64_t *live;
        uint32_t *fenwick;
        uint32_t n_cells;     /* a multiple of 64 */
        uint32_t n_words;     /* n_cells / 64 */
        uint32_t fenwick_top; /* the largest power of two <= n_words */
        uint32_t cells_end;   /* next cell to hand out */

        /* Heartbeat queue: pool indices in order of last heartbeat, so of
         * heartbeat deadline. hbq[hbq_head..hbq_tail) holds them, IDX_NONE
         * for a dead entry; hbq[hbq_head] is live whenever the queue is not
         * empty. hbq_size >= 2 * n_tickets. */
        uint32_t *hbq;
        uint32_t hbq_size;
        uint32_t hbq_head;
        uint32_t hbq_tail;

        bool draining; /* no new tickets, no claim but the reserved one's */

        /* Slots: settings.slots of them. idle_mask has a bit set for each
         * idle slot; running[0..n_running) are the running slots, oldest
         * claim first; promoted[0..n_promoted) the slots promote() reserved
         * and that are not reported yet. */
        Slot *slots;
        uint32_t *running;
        uint32_t *promoted;
        Due *due; /* expire_at()'s scratch list, settings.slots entries */
        uint32_t n_reserved;
        uint32_t n_running;
        uint32_t n_promoted;
        uint64_t idle_mask[ADMISSION_SLOTS_MAX / 64];
        usec_t reservation_deadline; /* the earliest of the reserved slots', or USEC_INFINITY */

        AdmissionCounters counters;

        AdmissionEventHandler event_handler;
        void *event_userdata;
        AdmissionIdGenerator id_generator;
        void *id_userdata;
        uint64_t id_counter;
};

/* ---- table memory ---- */

/* The tables are indexed at random: at 10^6 tickets they span about 150 MB,
 * and with 4 KiB pages nearly every access misses the TLB as well as the
 * cache (a page walk under virtualisation is itself several dependent
 * memory reads). Tables of 2 MiB or more are therefore allocated 2 MiB
 * aligned, in whole 2 MiB units, and offered to transparent huge pages
 * (honoured when /sys/kernel/mm/transparent_hugepage/enabled is "always"
 * or "madvise"; harmless otherwise). Smaller tables use plain malloc().
 * Either way the memory is released with free(). */
#define HUGE_PAGE_SIZE ((size_t) 2 << 20)

static void *table_alloc(size_t size) {
        void *p;

        if (size < HUGE_PAGE_SIZE)
                return malloc(size);

        size = (size + HUGE_PAGE_SIZE - 1) & ~(HUGE_PAGE_SIZE - 1);
        if (posix_memalign(&p, HUGE_PAGE_SIZE, size) != 0)
                return NULL;
        (void) madvise(p, size, MADV_HUGEPAGE);
        return p;
}

static void *table_calloc(size_t n, size_t size) {
        void *p;

        if (size != 0 && n > SIZE_MAX / size)
                return NULL;
        p = table_alloc(n * size);
        if (p)
                memset(p, 0, n * size);
        return p;
}

static const char *const admission_state_table[_ADMISSION_STATE_MAX] = {
        [ADMISSION_IDLE] = "idle",
        [ADMISSION_RESERVED] = "reserved",
        [ADMISSION_RUNNING] = "running",
};

static const char *const ticket_status_table[_TICKET_STATUS_MAX] = {
        [TICKET_WAITING] = "waiting",
        [TICKET_RESERVED] = "reserved",
};

static const char *const remove_reason_table[_REMOVE_REASON_MAX] = {
        [REMOVE_LEFT] = "left",           [REMOVE_CLAIMED] = "claimed",
        [REMOVE_HEARTBEAT] = "heartbeat", [REMOVE_RESERVATION] = "reservation",
        [REMOVE_ADMIN] = "admin",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(admission_state, AdmissionState)

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(ticket_status, TicketStatus)

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(remove_reason, RemoveReason)

/* The 8 lowercase hex digits of v, most significant first, as 8 bytes in
 * memory order: the nibbles are spread into bytes and turned into ASCII
 * with a few 64-bit operations rather than one table lookup each. */
static uint64_t hex8(uint32_t v) {
        uint64_t x = v;

        x = (x | (x << 16)) & UINT64_C(0x0000ffff0000ffff);
        x = (x | (x << 8)) & UINT64_C(0x00ff00ff00ff00ff);
        x = (x | (x << 4)) & UINT64_C(0x0f0f0f0f0f0f0f0f);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* The least significant nibble is in the first byte now. */
        x = __builtin_bswap64(x);
#endif
        /* Each byte is a digit d <= 15: '0' + d, plus 'a' - '0' - 10 if d >= 10. */
        return x + UINT64_C(0x3030303030303030) +
                (((x + UINT64_C(0x0606060606060606)) >> 4) & UINT64_C(0x0101010101010101)) * ('a' - '0' - 10);
}

/* The default id generator: a counter, so ids are unique and predictable
 * (tests rely on it). The daemon installs one that reads the kernel's random
 * source, so that ids do not tell how many tickets were issued. Formatted by
 * hand: snprintf() would be the most expensive part of a join. */
static void admission_default_id_generator(char buf[static TICKET_ID_MAX], void *userdata) {
        Admission *a = userdata;
        uint64_t n = ++a->id_counter, hi = hex8((uint32_t) (n >> 32)), lo = hex8((uint32_t) n);

        memcpy(buf, "tk_", 3);
        memset(buf + 3, '0', 16);
        memcpy(buf + 3 + 16, &hi, 8);
        memcpy(buf + 3 + 24, &lo, 8);
        buf[3 + 32] = '\0';
}

static bool settings_valid(const AdmissionSettings *s) {
        return s->reservation_usec >= 1 * USEC_PER_SEC && s->reservation_usec <= 3600 * USEC_PER_SEC &&
                s->heartbeat_usec >= 1 * USEC_PER_SEC && s->heartbeat_usec <= 3600 * USEC_PER_SEC &&
                s->max_length <= 1000000 && s->slots >= 1 && s->slots <= ADMISSION_SLOTS_MAX;
}

int admission_new(const AdmissionSettings *settings, Admission **ret) {
        _cleanup_(admission_freep) Admission *a = NULL;

        assert(settings);
        assert(ret);

        /* The values come from the configuration: checked, not asserted. */
        if (!settings_valid(settings))
                return -EINVAL;

        a = calloc(1, sizeof(Admission));
        if (!a)
                return -ENOMEM;

        *a = (Admission){
                .settings = *settings,
                .pool_free = IDX_NONE,
                .reservation_deadline = USEC_INFINITY,
                .id_generator = admission_default_id_generator,
        };
        a->id_userdata = a;

        a->slots = calloc(settings->slots, sizeof(Slot));
        a->running = calloc(settings->slots, sizeof(uint32_t));
        a->promoted = calloc(settings->slots, sizeof(uint32_t));
        a->due = calloc(settings->slots, sizeof(Due));
        if (!a->slots || !a->running || !a->promoted || !a->due)
                return -ENOMEM;
        for (unsigned i = 0; i < settings->slots; i++) {
                a->slots[i] = (Slot){
                        .state = ADMISSION_IDLE,
                        .ticket = IDX_NONE,
                        .reservation_deadline = USEC_INFINITY,
                };
                a->idle_mask[i / 64] |= UINT64_C(1) << (i % 64);
        }

        /* The pool is allocated once for max_length tickets: it never
         * moves, so growing it costs no copy and no transient second copy
         * (which a 2 MiB aligned block could not get from realloc()). Pages
         * are only touched, and so only resident, as tickets use them. */
        if (settings->max_length > 0) {
                a->pool = table_alloc(sizeof(Ticket) * settings->max_length);
                if (!a->pool)
                        return -ENOMEM;
        }

        *ret = TAKE_PTR(a);
        return 0;
}

Admission *admission_free(Admission *a) {
        if (!a)
                return NULL;

        /* The live tickets' names (a free entry's is NULL, or stale). */
        for (uint32_t w = 0; w < a->n_words; w++)
                for (uint64_t bits = a->live[w]; bits != 0; bits &= bits - 1)
                        free(a->pool[a->cells[w * 64 + (uint32_t) __builtin_ctzll(bits)]].user);
        free(a->pool);
        free(a->hash);
        free(a->cells);
        free(a->live);
        free(a->fenwick);
        free(a->hbq);
        free(a->slots);
        free(a->running);
        free(a->promoted);
        free(a->due);
        free(a);
        return NULL;
}

void admission_set_event_handler(Admission *a, AdmissionEventHandler handler, void *userdata) {
        assert(a);

        a->event_handler = handler;
        a->event_userdata = userdata;
}

void admission_set_id_generator(Admission *a, AdmissionIdGenerator generator, void *userdata) {
        assert(a);

        if (generator) {
                a->id_generator = generator;
                a->id_userdata = userdata;
        } else {
                a->id_generator = admission_default_id_generator;
                a->id_userdata = a;
        }
}

/* ---- slots ---- */

static uint32_t idle_count(const Admission *a) {
        return a->settings.slots - a->n_reserved - a->n_running;
}

/* The controller's state: running when any slot runs, else reserved when
 * any is reserved, else idle. */
static AdmissionState controller_state(const Admission *a) {
        if (a->n_running > 0)
                return ADMISSION_RUNNING;
        if (a->n_reserved > 0)
                return ADMISSION_RESERVED;
        return ADMISSION_IDLE;
}

/* The lowest idle slot. Only called with at least one. */
static uint32_t first_idle(const Admission *a) {
        for (uint32_t w = 0;; w++)
                if (a->idle_mask[w] != 0)
                        return w * 64 + (uint32_t) __builtin_ctzll(a->idle_mask[w]);
}

/* The slot reserved for the ticket idx, SLOT_NONE when it waits. */
static uint32_t slot_of_ticket(const Admission *a, uint32_t idx) {
        if (a->n_reserved == 0)
                return SLOT_NONE;
        for (uint32_t i = 0; i < a->settings.slots; i++)
                if (a->slots[i].state == ADMISSION_RESERVED && a->slots[i].ticket == idx)
                        return i;
        return SLOT_NONE;
}

/* The running slot of query_id, SLOT_NONE when it does not run. */
static uint32_t slot_of_query(const Admission *a, const char *query_id) {
        for (uint32_t k = 0; k < a->n_running; k++)
                if (streq(a->slots[a->running[k]].query_id, query_id))
                        return a->running[k];
        return SLOT_NONE;
}

static bool session_runs(const Admission *a, const SessionKey *session) {
        for (uint32_t k = 0; k < a->n_running; k++)
                if (memcmp(a->slots[a->running[k]].session.bytes, session->bytes, sizeof(session->bytes)) == 0)
                        return true;
        return false;
}

static void slot_reserve(Admission *a, uint32_t i, uint32_t idx, usec_t now) {
        Slot *s = &a->slots[i];

        assert(s->state == ADMISSION_IDLE);
        s->state = ADMISSION_RESERVED;
        s->ticket = idx;
        s->reservation_deadline = usec_add(now, a->settings.reservation_usec);
        a->idle_mask[i / 64] &= ~(UINT64_C(1) << (i % 64));
        a->n_reserved++;
        a->reservation_deadline = MIN(a->reservation_deadline, s->reservation_deadline);
}

static void slot_run(Admission *a, uint32_t i, const SessionKey *session, const char *query_id, usec_t now) {
        Slot *s = &a->slots[i];

        assert(s->state == ADMISSION_IDLE);
        s->state = ADMISSION_RUNNING;
        s->session = *session;
        memcpy(s->query_id, query_id, strlen(query_id) + 1);
        a->idle_mask[i / 64] &= ~(UINT64_C(1) << (i % 64));
        /* Claims come at non-decreasing times: appending keeps the order. */
        a->running[a->n_running++] = i;
}

/* A reserved or running slot becomes idle. Its ticket, if any, is the
 * caller's. */
static void slot_release(Admission *a, uint32_t i) {
        Slot *s = &a->slots[i];

        if (s->state == ADMISSION_RESERVED) {
                usec_t d = s->reservation_deadline;

                a->n_reserved--;
                s->ticket = IDX_NONE;
                s->reservation_deadline = USEC_INFINITY;
                if (d == a->reservation_deadline) {
                        a->reservation_deadline = USEC_INFINITY;
                        for (uint32_t j = 0; a->n_reserved > 0 && j < a->settings.slots; j++)
                                if (a->slots[j].state == ADMISSION_RESERVED)
                                        a->reservation_deadline = MIN(
                                                a->reservation_deadline, a->slots[j].reservation_deadline);
                }
        } else if (s->state == ADMISSION_RUNNING) {
                uint32_t k = 0;

                while (a->running[k] != i)
                        k++;
                memmove(&a->running[k], &a->running[k + 1], sizeof(uint32_t) * (a->n_running - k - 1));
                a->n_running--;
                s->query_id[0] = '\0';
        }
        s->state = ADMISSION_IDLE;
        a->idle_mask[i / 64] |= UINT64_C(1) << (i % 64);
}

/* ---- events ---- */

static void emit(Admission *a, const AdmissionEvent *ev) {
        if (a->event_handler)
                a->event_handler(ev, a->event_userdata);
}

static void emit_ticket(Admission *a, AdmissionEventType type, const char *id, RemoveReason reason) {
        if (!a->event_handler)
                return;
        emit(a,
             &(const AdmissionEvent){
                     .type = type,
                     .ticket_id = id,
                     .reason = type == ADMISSION_EVENT_TICKET_REMOVED ? reason : _REMOVE_REASON_INVALID,
                     .state = controller_state(a),
                     .duration_usec = 0,
             });
}

static void emit_state(Admission *a) {
        if (!a->event_handler)
                return;
        emit(a,
             &(const AdmissionEvent){
                     .type = ADMISSION_EVENT_STATE_CHANGED,
                     .reason = _REMOVE_REASON_INVALID,
                     .state = controller_state(a),
             });
}

/* ---- time ---- */

/* Callers pass CLOCK_MONOTONIC readings, but nothing stops one from passing
 * a stale value it read earlier. A time going backwards would break the
 * sorted heartbeat list, so treat it as the latest time seen. */
static usec_t clamp_now(Admission *a, usec_t now) {
        if (now < a->last_now)
                return a->last_now;
        a->last_now = now;
        return now;
}

/* ---- hash table ---- */

/* The key's 32-bit hash is stored next to the index: probing past other
 * entries, the backward shift on removal and rehashing never have to read
 * the tickets themselves, which matters once the pool no longer fits in the
 * cache (each miss there costs more than the rest of the operation). */
typedef struct Bucket {
        uint32_t idx; /* pool index, IDX_NONE when empty */
        uint32_t hash;
} Bucket;

static uint32_t key_hash(const SessionKey *key) {
        uint64_t h;

        /* The key is a SHA-256 already, so its first 8 bytes are uniform;
         * the multiply (Fibonacci hashing) only protects against test keys
         * and other structured inputs. */
        memcpy(&h, key->bytes, sizeof(h));
        return (uint32_t) ((h * UINT64_C(0x9E3779B97F4A7C15)) >> 32);
}

static uint32_t home_bucket(const Admission *a, uint32_t hash) {
        /* The top bits, which the multiply mixed best. */
        return hash >> (32 - __builtin_ctz(a->hash_size));
}

/* The pool index of key's ticket, or IDX_NONE; then *ret_bucket (if not
 * NULL) is the empty bucket where key would be inserted. */
static uint32_t hash_find_bucket(const Admission *a, const SessionKey *key, uint32_t *ret_bucket) {
        uint32_t hash, mask;

        if (a->hash_size == 0)
                return IDX_NONE;

        hash = key_hash(key);
        mask = a->hash_size - 1;
        for (uint32_t b = home_bucket(a, hash);; b = (b + 1) & mask) {
                const Bucket *e = &a->hash[b];
                if (e->idx == IDX_NONE) {
                        if (ret_bucket)
                                *ret_bucket = b;
                        return IDX_NONE;
                }
                if (e->hash == hash && memcmp(a->pool[e->idx].key.bytes, key->bytes, sizeof(key->bytes)) == 0)
                        return e->idx;
        }
}

static uint32_t hash_find(const Admission *a, const SessionKey *key) {
        return hash_find_bucket(a, key, NULL);
}

static void hash_insert_raw(Admission *a, uint32_t idx, uint32_t hash) {
        uint32_t mask = a->hash_size - 1;
        uint32_t b = home_bucket(a, hash);

        while (a->hash[b].idx != IDX_NONE)
                b = (b + 1) & mask;
        a->hash[b] = (Bucket){ .idx = idx, .hash = hash };
}

/* Make room for n entries, keeping the load factor at most 1/2. */
static int hash_reserve(Admission *a, uint32_t n) {
        uint32_t size, old_size = a->hash_size;
        Bucket *h, *old = a->hash;

        if ((uint64_t) n * 2 <= a->hash_size)
                return 0;

        size = MAX(a->hash_size * 2, HASH_MIN);
        while ((uint64_t) n * 2 > size)
                size *= 2;

        h = table_alloc(sizeof(Bucket) * size);
        if (!h)
                return -ENOMEM;
        for (uint32_t i = 0; i < size; i++)
                h[i] = (Bucket){ .idx = IDX_NONE };

        a->hash = h;
        a->hash_size = size;
        for (uint32_t i = 0; i < old_size; i++)
                if (old[i].idx != IDX_NONE)
                        hash_insert_raw(a, old[i].idx, old[i].hash);
        free(old);
        return 0;
}

static void hash_remove(Admission *a, uint32_t idx) {
        uint32_t mask = a->hash_size - 1;
        uint32_t b = home_bucket(a, key_hash(&a->pool[idx].key));

        while (a->hash[b].idx != idx)
                b = (b + 1) & mask;

        /* Backward-shift deletion: pull later members of the probe run into
         * the hole, so lookups never need tombstones. */
        for (uint32_t j = (b + 1) & mask;; j = (j + 1) & mask) {
                Bucket e = a->hash[j];
                if (e.idx == IDX_NONE)
                        break;
                uint32_t home = home_bucket(a, e.hash);
                /* It stays when its home lies cyclically in (b, j]: moved
                 * to b it would sit before its home and not be found. */
                bool stays = b <= j ? (home > b && home <= j) : (home > b || home <= j);
                if (!stays) {
                        a->hash[b] = e;
                        b = j;
                }
        }
        a->hash[b] = (Bucket){ .idx = IDX_NONE };
}

/* ---- FIFO cells: a bitmap of the live ones, and a Fenwick tree over its
 * words ----
 *
 * A position needs the number of live cells up to a ticket's cell. A
 * Fenwick tree over the cells themselves would be 4 bytes per cell, and at
 * 10^6 tickets its lower levels alone are far larger than the caches: each
 * position would cost a few misses. Here the tree counts per 64-cell bitmap
 * word, and the rest is a popcount within the word: at 2 * 10^6 cells the
 * bitmap is 256 KiB and the tree 128 KiB, both small enough to stay in the
 * cache, and the cell array itself (cell -> pool index, for the head and
 * for listing) is only read for the head, written only at the tail, and
 * never cleared: the bitmap says which entries are meaningful. */

static unsigned popcount64(uint64_t x) {
#ifdef __POPCNT__
        return (unsigned) __builtin_popcountll(x);
#else
        /* Without -mpopcnt, __builtin_popcountll() is a library call. */
        x = x - ((x >> 1) & UINT64_C(0x5555555555555555));
        x = (x & UINT64_C(0x3333333333333333)) + ((x >> 2) & UINT64_C(0x3333333333333333));
        x = (x + (x >> 4)) & UINT64_C(0x0f0f0f0f0f0f0f0f);
        return (unsigned) ((x * UINT64_C(0x0101010101010101)) >> 56);
#endif
}

static void fenwick_add(Admission *a, uint32_t word, int32_t delta) {
        for (uint32_t i = word + 1; i <= a->n_words; i += i & (~i + 1))
                a->fenwick[i] += (uint32_t) delta;
}

/* Number of live cells in the words [0, word). */
static uint32_t fenwick_prefix(const Admission *a, uint32_t word) {
        uint32_t sum = 0;

        for (uint32_t i = word; i > 0; i -= i & (~i + 1))
                sum += a->fenwick[i];
        return sum;
}

static void cell_set(Admission *a, uint32_t cell) {
        a->live[cell / 64] |= UINT64_C(1) << (cell % 64);
        fenwick_add(a, cell / 64, +1);
}

static void cell_clear(Admission *a, uint32_t cell) {
        a->live[cell / 64] &= ~(UINT64_C(1) << (cell % 64));
        fenwick_add(a, cell / 64, -1);
}

/* Number of live cells in [0, cell]. */
static uint32_t cell_rank(const Admission *a, uint32_t cell) {
        uint32_t w = cell / 64;

        return fenwick_prefix(a, w) + popcount64(a->live[w] & (UINT64_MAX >> (63 - cell % 64)));
}

/* The k-th live cell (k >= 1). Only called with at least k tickets. */
static uint32_t cell_select(const Admission *a, uint32_t k) {
        uint32_t pos = 0;
        uint64_t bits;

        /* The largest pos with fewer than k live cells in the words [0, pos). */
        for (uint32_t step = a->fenwick_top; step > 0; step /= 2)
                if (pos + step <= a->n_words && a->fenwick[pos + step] < k) {
                        pos += step;
                        k -= a->fenwick[pos];
                }
        bits = a->live[pos];
        while (--k > 0)
                bits &= bits - 1;
        return pos * 64 + (uint32_t) __builtin_ctzll(bits);
}

/* Make sure cells_end < n_cells, compacting (and resizing to max(64, 2n),
 * rounded up to whole words) when the cell array is used up. On failure
 * nothing is changed. */
static int cells_reserve(Admission *a) {
        uint32_t n = a->n_tickets, size, n_words, top, *cells, *fen, k = 0;
        uint64_t *live;

        if (a->cells_end < a->n_cells)
                return 0;

        size = (MAX(CELLS_MIN, 2 * n) + 63) & ~UINT32_C(63);
        n_words = size / 64;
        cells = table_alloc(sizeof(uint32_t) * size);
        live = table_calloc(n_words, sizeof(uint64_t));
        fen = table_calloc((size_t) n_words + 1, sizeof(uint32_t));
        if (!cells || !live || !fen) {
                free(cells);
                free(live);
                free(fen);
                return -ENOMEM;
        }

        for (uint32_t w = 0; w < a->n_words; w++)
                for (uint64_t bits = a->live[w]; bits != 0; bits &= bits - 1) {
                        uint32_t idx = a->cells[w * 64 + (uint32_t) __builtin_ctzll(bits)];

                        cells[k] = idx;
                        a->pool[idx].cell = k;
                        k++;
                }

        for (uint32_t i = 0; i < k / 64; i++)
                live[i] = UINT64_MAX;
        if (k % 64 != 0)
                live[k / 64] = UINT64_MAX >> (64 - k % 64);

        /* O(n) build: every node passes its total to its parent. */
        for (uint32_t i = 1; i <= n_words; i++) {
                fen[i] += popcount64(live[i - 1]);
                uint32_t parent = i + (i & (~i + 1));
                if (parent <= n_words)
                        fen[parent] += fen[i];
        }
        for (top = 1; top * 2 <= n_words; top *= 2)
                ;

        free(a->cells);
        free(a->live);
        free(a->fenwick);
        a->cells = cells;
        a->live = live;
        a->fenwick = fen;
        a->n_cells = size;
        a->n_words = n_words;
        a->fenwick_top = top;
        a->cells_end = k;
        return 0;
}

/* ---- ticket pool ---- */

/* Only with fewer than max_length tickets. */
static uint32_t pool_take(Admission *a) {
        uint32_t idx;

        if (a->pool_free != IDX_NONE) {
                idx = a->pool_free;
                a->pool_free = a->pool[idx].cell;
        } else
                idx = a->pool_used++;
        return idx;
}

static void pool_put(Admission *a, uint32_t idx) {
        a->pool[idx].cell = a->pool_free;
        a->pool_free = idx;
}

/* ---- heartbeat list ---- */

static void hbq_skip_dead(Admission *a) {
        while (a->hbq_head < a->hbq_tail && a->hbq[a->hbq_head] == IDX_NONE)
                a->hbq_head++;
        if (a->hbq_head == a->hbq_tail)
                a->hbq_head = a->hbq_tail = 0;
}

/* Move the live entries to the front of hbq (of the given size), in order,
 * and tell their tickets where they went. */
static void hbq_compact_into(Admission *a, uint32_t *hbq, uint32_t size) {
        uint32_t k = 0;

        for (uint32_t i = a->hbq_head; i < a->hbq_tail; i++) {
                uint32_t idx = a->hbq[i];
                if (idx == IDX_NONE)
                        continue;
                hbq[k] = idx;
                a->pool[idx].hb_pos = k;
                k++;
        }
        a->hbq = hbq;
        a->hbq_size = size;
        a->hbq_head = 0;
        a->hbq_tail = k;
}

/* Make room for the entries of n tickets, keeping hbq_size >= 2n. On
 * failure nothing is changed. */
static int hbq_reserve(Admission *a, uint32_t n) {
        uint32_t *old = a->hbq, *hbq, size;

        if ((uint64_t) n * 2 <= a->hbq_size)
                return 0;

        size = MAX(a->hbq_size * 2, HBQ_MIN);
        while ((uint64_t) n * 2 > size)
                size *= 2;
        hbq = table_alloc(sizeof(uint32_t) * size);
        if (!hbq)
                return -ENOMEM;
        hbq_compact_into(a, hbq, size);
        free(old);
        return 0;
}

static void hb_unlink(Admission *a, uint32_t idx) {
        Ticket *t = &a->pool[idx];
        uint32_t pos = t->hb_pos;

        if (pos == IDX_NONE)
                return;
        /* Only the entry itself is touched, never the neighbours: a
         * doubly-linked list would cost two more cache misses here. */
        a->hbq[pos] = IDX_NONE;
        t->hb_pos = IDX_NONE;
        if (pos == a->hbq_head)
                hbq_skip_dead(a);
}

static void hb_append(Admission *a, uint32_t idx) {
        /* Full: at most n_tickets <= hbq_size / 2 entries are live, so
         * compacting in place frees at least half the queue, and the O(n)
         * compaction is paid for by the hbq_size / 2 appends before the
         * next one. No allocation, so a heartbeat cannot fail. */
        if (a->hbq_tail == a->hbq_size)
                hbq_compact_into(a, a->hbq, a->hbq_size);
        a->hbq[a->hbq_tail] = idx;
        a->pool[idx].hb_pos = a->hbq_tail++;
}

static bool held(const Admission *a, uint32_t idx) {
        return a->pool[idx].heartbeat_deadline == USEC_INFINITY;
}

static void heartbeat(Admission *a, uint32_t idx, usec_t now) {
        if (held(a, idx))
                /* Its open stream is its heartbeat, for as long as it lasts. */
                return;
        hb_unlink(a, idx);
        a->pool[idx].heartbeat_deadline = usec_add(now, a->settings.heartbeat_usec);
        hb_append(a, idx);
}

/* ---- transitions ---- */

/* Take a ticket out of every table; slot is the slot reserved for it (it
 * becomes idle) or SLOT_NONE. The caller copies its id first if it wants
 * to report it, and promotes. */
static void ticket_unlink(Admission *a, uint32_t idx, uint32_t slot) {
        Ticket *t = &a->pool[idx];

        free(t->user);
        t->user = NULL;
        hash_remove(a, idx);
        hb_unlink(a, idx);
        cell_clear(a, t->cell);
        a->n_tickets--;
        if (slot != SLOT_NONE)
                slot_release(a, slot);
        pool_put(a, idx);
}

static uint64_t waiting_count(const Admission *a) {
        return a->n_tickets - a->n_reserved;
}

/* promote: while a slot is idle and a ticket waits, the first waiting
 * ticket gets a reservation on the lowest idle slot. The slots reserved
 * are noted in promoted[]; nothing is emitted: callers report once the
 * whole transition is done (emit_promotion()). */
static void promote(Admission *a, usec_t now) {
        while (idle_count(a) > 0 && waiting_count(a) > 0) {
                uint32_t idx = a->cells[cell_select(a, a->n_reserved + 1)], slot = first_idle(a);

                slot_reserve(a, slot, idx, now);
                a->promoted[a->n_promoted++] = slot;
        }
}

/* Report what promote() did, and the state change if the transition as a
 * whole changed the state. A step through "idle" that promotion undoes at
 * once is not reported: the controller is never observably idle while a
 * ticket waits (API.md 5), so e.g. the reserved ticket leaving with another
 * one waiting emits TICKET_REMOVED and TICKET_PROMOTED, but no
 * STATE_CHANGED. */
static void emit_promotion(Admission *a, AdmissionState old_state) {
        if (!a->event_handler) {
                a->n_promoted = 0;
                return;
        }
        for (uint32_t k = 0; k < a->n_promoted; k++) {
                uint32_t slot = a->promoted[k];

                emit(a,
                     &(const AdmissionEvent){
                             .type = ADMISSION_EVENT_TICKET_PROMOTED,
                             .ticket_id = a->pool[a->slots[slot].ticket].id,
                             .reason = _REMOVE_REASON_INVALID,
                             .state = controller_state(a),
                             .slot = slot,
                     });
        }
        a->n_promoted = 0;
        if (controller_state(a) != old_state)
                emit_state(a);
}

/* Remove a ticket that leaves or whose reservation (or heartbeat) ran out
 * while it was reserved, promote the next one at "now", and report. */
static void ticket_remove(Admission *a, uint32_t idx, RemoveReason reason, usec_t now) {
        AdmissionState old_state = controller_state(a);
        char id[TICKET_ID_MAX];

        memcpy(id, a->pool[idx].id, sizeof(id));
        ticket_unlink(a, idx, slot_of_ticket(a, idx));
        if (reason == REMOVE_HEARTBEAT || reason == REMOVE_RESERVATION)
                a->counters.tickets_expired++;
        promote(a, now);

        emit_ticket(a, ADMISSION_EVENT_TICKET_REMOVED, id, reason);
        emit_promotion(a, old_state);
}

/* Everything due at exactly time t: first the waiting tickets whose
 * heartbeat deadline passed (each removal leaves the machine consistent, so
 * it is reported at once), then the reserved tickets whose heartbeat or
 * reservation deadline passed (heartbeat wins a tie), then promotion at t.
 * Promoting at the deadline rather than at the caller's "now" makes the
 * result independent of how late the timer fired. */
static size_t expire_at(Admission *a, usec_t t) {
        AdmissionState old_state = controller_state(a);
        uint32_t n_due = 0;
        size_t removed = 0;

        for (uint32_t i = 0; a->n_reserved > 0 && i < a->settings.slots; i++) {
                const Slot *s = &a->slots[i];
                RemoveReason reason;

                if (s->state != ADMISSION_RESERVED)
                        continue;
                if (a->pool[s->ticket].heartbeat_deadline <= t)
                        reason = REMOVE_HEARTBEAT;
                else if (s->reservation_deadline <= t)
                        reason = REMOVE_RESERVATION;
                else
                        continue;
                /* Keep it out of the loop below; it goes last. */
                hb_unlink(a, s->ticket);
                a->due[n_due++] = (Due){ .slot = i, .reason = reason };
        }

        while (a->hbq_head < a->hbq_tail && a->pool[a->hbq[a->hbq_head]].heartbeat_deadline <= t) {
                uint32_t idx = a->hbq[a->hbq_head];
                char id[TICKET_ID_MAX];

                memcpy(id, a->pool[idx].id, sizeof(id));
                ticket_unlink(a, idx, SLOT_NONE);
                a->counters.tickets_expired++;
                removed++;
                emit_ticket(a, ADMISSION_EVENT_TICKET_REMOVED, id, REMOVE_HEARTBEAT);
        }

        /* The reserved ones: all unlinked and the slots filled again
         * before anything is reported, so that no handler sees an idle
         * slot while a ticket waits. */
        for (uint32_t k = 0; k < n_due; k++) {
                uint32_t slot = a->due[k].slot;

                memcpy(a->due[k].id, a->pool[a->slots[slot].ticket].id, TICKET_ID_MAX);
                ticket_unlink(a, a->slots[slot].ticket, slot);
                a->counters.tickets_expired++;
                removed++;
        }
        promote(a, t);
        for (uint32_t k = 0; k < n_due; k++)
                emit_ticket(a, ADMISSION_EVENT_TICKET_REMOVED, a->due[k].id, a->due[k].reason);
        emit_promotion(a, old_state);

        return removed;
}

static usec_t next_deadline(const Admission *a) {
        usec_t d = a->reservation_deadline;

        if (a->hbq_head < a->hbq_tail)
                d = MIN(d, a->pool[a->hbq[a->hbq_head]].heartbeat_deadline);
        return d;
}

usec_t admission_next_deadline(const Admission *a) {
        assert(a);

        return next_deadline(a);
}

/* Walk the deadlines up to now in time order. Each step removes at least
 * one ticket (the earliest deadline is a heartbeat of a linked ticket or the
 * reservation), so this ends after at most n steps. */
static size_t expire(Admission *a, usec_t now) {
        size_t removed = 0;

        for (;;) {
                usec_t t = next_deadline(a);
                if (t > now)
                        break;
                removed += expire_at(a, t);
        }
        return removed;
}

size_t admission_expire(Admission *a, usec_t now) {
        assert(a);

        return expire(a, clamp_now(a, now));
}

/* Apply expiries and return the time to use for the operation. */
static usec_t begin(Admission *a, usec_t now) {
        now = clamp_now(a, now);
        (void) expire(a, now);
        return now;
}

int admission_join(Admission *a, const SessionKey *session, usec_t now) {
        AdmissionState old_state;
        uint32_t idx, bucket = 0, hash_size;
        Ticket *t;
        int r;

        assert(a);
        assert(session);

        now = begin(a, now);

        idx = hash_find_bucket(a, session, &bucket);
        if (idx != IDX_NONE) {
                heartbeat(a, idx, now);
                return 0;
        }

        if (a->draining)
                return -ESHUTDOWN;
        if (a->n_tickets >= a->settings.max_length)
                return -ENOSPC;

        /* Allocate everything first, so that -ENOMEM changes nothing. */
        hash_size = a->hash_size;
        r = hash_reserve(a, a->n_tickets + 1);
        if (r < 0)
                return r;
        r = cells_reserve(a);
        if (r < 0)
                return r;
        r = hbq_reserve(a, a->n_tickets + 1);
        if (r < 0)
                return r;

        idx = pool_take(a);
        t = &a->pool[idx];
        *t = (Ticket){
                .key = *session,
                .joined = now,
                .cell = a->cells_end++,
                .hb_pos = IDX_NONE,
        };
        a->id_generator(t->id, a->id_userdata);
        t->id[TICKET_ID_MAX - 1] = '\0';

        a->cells[t->cell] = idx;
        cell_set(a, t->cell);
        if (a->hash_size == hash_size)
                /* Not rehashed: the empty bucket the search ended at. */
                a->hash[bucket] = (Bucket){ .idx = idx, .hash = key_hash(session) };
        else
                hash_insert_raw(a, idx, key_hash(session));
        heartbeat(a, idx, now);
        a->n_tickets++;

        old_state = controller_state(a);
        promote(a, now);

        emit_ticket(a, ADMISSION_EVENT_TICKET_ADDED, a->pool[idx].id, 0);
        emit_promotion(a, old_state);
        return 1;
}

/* slot: the slot reserved for the ticket, SLOT_NONE when it waits. */
static void fill_view(const Admission *a, uint32_t idx, uint32_t slot, uint64_t position, TicketView *v) {
        const Ticket *t = &a->pool[idx];

        memcpy(v->id, t->id, sizeof(v->id));
        v->status = slot != SLOT_NONE ? TICKET_RESERVED : TICKET_WAITING;
        v->position = position;
        v->joined = t->joined;
        /* A held ticket shows the deadline it would get from a poll now (as
         * of the latest time the machine has seen), which is what it has
         * in effect: it is renewed continuously. */
        v->heartbeat_deadline = held(a, idx) ? usec_add(a->last_now, a->settings.heartbeat_usec) :
                                               t->heartbeat_deadline;
        v->reservation_deadline = slot != SLOT_NONE ? a->slots[slot].reservation_deadline : USEC_INFINITY;
        v->user = t->user;
}

static void slot_counts(const Admission *a, AdmissionSlotCounts *ret) {
        *ret = (AdmissionSlotCounts){
                .total = a->settings.slots,
                .idle = idle_count(a),
                .reserved = a->n_reserved,
                .running = a->n_running,
        };
}

/* The estimate and the average are not the admission's: they stay
 * unknown here (the Manager fills them, wait_estimate_status()). */
static void fill_status(const Admission *a, uint32_t idx, AdmissionStatus *ret) {
        *ret = (AdmissionStatus){
                .state = controller_state(a),
                .queue_length = a->n_tickets,
                .max_length = a->settings.max_length,
                .has_ticket = idx != IDX_NONE,
        };

        if (idx == IDX_NONE)
                ret->ticket.status = _TICKET_STATUS_INVALID;
        else {
                /* The reserved tickets are the first n_reserved in the
                 * FIFO; a waiting one's position is its rank after them. */
                uint64_t rank = cell_rank(a, a->pool[idx].cell);
                uint32_t slot = rank <= a->n_reserved ? slot_of_ticket(a, idx) : SLOT_NONE;

                fill_view(a, idx, slot, slot != SLOT_NONE ? 0 : rank - a->n_reserved, &ret->ticket);
        }
        slot_counts(a, &ret->slots);
}

int admission_status(Admission *a, const SessionKey *session, usec_t now, AdmissionStatus *ret) {
        uint32_t idx;

        assert(a);
        assert(ret);

        now = begin(a, now);

        idx = session ? hash_find(a, session) : IDX_NONE;
        if (idx != IDX_NONE)
                heartbeat(a, idx, now);

        fill_status(a, idx, ret);
        return 0;
}

void admission_peek(Admission *a, const SessionKey *session, usec_t now, AdmissionStatus *ret) {
        assert(a);
        assert(ret);

        now = begin(a, now);
        fill_status(a, session ? hash_find(a, session) : IDX_NONE, ret);
}

int admission_leave(Admission *a, const SessionKey *session, usec_t now) {
        uint32_t idx;

        assert(a);
        assert(session);

        now = begin(a, now);

        idx = hash_find(a, session);
        if (idx == IDX_NONE)
                return -ENOENT;

        ticket_remove(a, idx, REMOVE_LEFT, now);
        return 0;
}

int admission_hold(Admission *a, const SessionKey *session, const char *ticket_id, bool hold, usec_t now) {
        uint32_t idx;

        assert(a);
        assert(session);
        assert(ticket_id);

        now = begin(a, now);

        idx = hash_find(a, session);
        if (idx == IDX_NONE || !streq(a->pool[idx].id, ticket_id))
                return -ENOENT;
        if (hold == held(a, idx))
                return 0;
        if (hold) {
                /* Out of the heartbeat queue: nothing to expire. */
                hb_unlink(a, idx);
                a->pool[idx].heartbeat_deadline = USEC_INFINITY;
        } else {
                a->pool[idx].heartbeat_deadline = 0;
                heartbeat(a, idx, now);
        }
        return 0;
}

int admission_claim(Admission *a, const SessionKey *session, const char *query_id, usec_t now) {
        AdmissionState old_state;
        char id[TICKET_ID_MAX];
        uint32_t idx, slot;
        size_t len;

        assert(a);
        assert(session);

        /* Checked before anything changes: a bad id is the caller's bug. */
        if (!query_id)
                return -EINVAL;
        len = strnlen(query_id, QUERY_ID_MAX);
        if (len >= QUERY_ID_MAX)
                return -EINVAL;
        if (slot_of_query(a, query_id) != SLOT_NONE)
                return -EINVAL;

        now = begin(a, now);
        old_state = controller_state(a);

        idx = hash_find(a, session);
        slot = idx != IDX_NONE ? slot_of_ticket(a, idx) : SLOT_NONE;
        if (slot != SLOT_NONE) {
                /* S holds a reservation: its slot runs, unless S already
                 * runs a query elsewhere (one per session). */
                if (session_runs(a, session))
                        return -EBUSY;

                memcpy(id, a->pool[idx].id, sizeof(id));
                /* The ticket's user goes with it: the query's record is
                 * the caller's. */
                ticket_unlink(a, idx, slot);
                /* ticket_unlink() left the slot idle: it is not
                 * observable, it goes straight on to running. */
        } else if (a->draining)
                return -ESHUTDOWN;
        else if (idx == IDX_NONE && waiting_count(a) == 0 && idle_count(a) > 0 && !session_runs(a, session)) {
                /* Implicit join and claim in one step: the join is subject
                 * to the queue length, so max_length 0 refuses it. The
                 * ticket would be added and claimed in the same instant,
                 * so no TICKET_ADDED/PROMOTED/REMOVED is reported for it:
                 * nobody could ever have seen it. */
                if (a->settings.max_length == 0)
                        return -ENOSPC;
                slot = first_idle(a);
                id[0] = '\0';
        } else
                return -EBUSY;

        slot_run(a, slot, session, query_id, now);
        a->counters.queries_started++;

        if (id[0] != '\0')
                emit_ticket(a, ADMISSION_EVENT_TICKET_REMOVED, id, REMOVE_CLAIMED);
        if (controller_state(a) != old_state)
                emit_state(a);
        return (int) slot;
}

int admission_remove_ticket(Admission *a, const char *ticket_id, usec_t now) {
        assert(a);

        if (!ticket_id)
                return -ENOENT;

        now = begin(a, now);

        for (uint32_t w = 0; w < a->n_words; w++)
                for (uint64_t bits = a->live[w]; bits != 0; bits &= bits - 1) {
                        uint32_t idx = a->cells[w * 64 + (uint32_t) __builtin_ctzll(bits)];

                        if (strneq(a->pool[idx].id, ticket_id, TICKET_ID_MAX)) {
                                ticket_remove(a, idx, REMOVE_ADMIN, now);
                                return 0;
                        }
                }
        return -ENOENT;
}

void admission_set_draining(Admission *a, bool draining) {
        assert(a);
        a->draining = draining;
}

bool admission_is_draining(const Admission *a) {
        assert(a);
        return a->draining;
}

int admission_finish(Admission *a, unsigned slot, usec_t duration, usec_t now) {
        AdmissionState old_state;
        char id[QUERY_ID_MAX];

        assert(a);

        now = begin(a, now);

        if (slot >= a->settings.slots || a->slots[slot].state != ADMISSION_RUNNING)
                return -ESRCH;

        memcpy(id, a->slots[slot].query_id, sizeof(id));
        old_state = controller_state(a);
        slot_release(a, slot);
        promote(a, now);

        emit(a,
             &(const AdmissionEvent){
                     .type = ADMISSION_EVENT_QUERY_FINISHED,
                     .reason = _REMOVE_REASON_INVALID,
                     .state = controller_state(a),
                     .query_id = id,
                     .duration_usec = duration,
                     .slot = slot,
             });
        emit_promotion(a, old_state);
        return 0;
}

AdmissionState admission_get_state(const Admission *a) {
        return controller_state(a);
}

uint64_t admission_queue_length(const Admission *a) {
        return a->n_tickets;
}

uint64_t admission_waiting_count(const Admission *a) {
        return waiting_count(a);
}

const AdmissionSettings *admission_get_settings(const Admission *a) {
        return &a->settings;
}

/* *p becomes a copy of user (NULL: none), unless it already is one. */
static int replace_user(char **p, const char *user) {
        char *copy = NULL;

        if (user ? *p && streq(*p, user) : !*p)
                return 0;
        if (user) {
                copy = strdup(user);
                if (!copy)
                        return -ENOMEM;
        }
        free(*p);
        *p = copy;
        return 0;
}

int admission_set_user(Admission *a, const SessionKey *session, const char *user) {
        uint32_t idx;

        assert(a);
        assert(session);

        idx = hash_find(a, session);
        if (idx == IDX_NONE)
                return -ENOENT;
        return replace_user(&a->pool[idx].user, user);
}

void admission_heartbeat(Admission *a, const SessionKey *session, usec_t now) {
        uint32_t idx;

        assert(a);

        now = begin(a, now);
        idx = session ? hash_find(a, session) : IDX_NONE;
        if (idx != IDX_NONE)
                heartbeat(a, idx, now);
}

bool admission_is_running(const Admission *a, const char *query_id) {
        assert(a);

        return query_id && slot_of_query(a, query_id) != SLOT_NONE;
}

void admission_get_slot_counts(const Admission *a, AdmissionSlotCounts *ret) {
        assert(a);
        assert(ret);

        slot_counts(a, ret);
}

void admission_foreach_running(const Admission *a, AdmissionRunningVisitor f, void *userdata) {
        assert(a);
        assert(f);

        for (uint32_t k = 0; k < a->n_running; k++) {
                const Slot *s = &a->slots[a->running[k]];

                f(s->query_id, a->running[k], userdata);
        }
}

void admission_get_counters(const Admission *a, AdmissionCounters *ret) {
        assert(a);
        assert(ret);

        *ret = a->counters;
}

void admission_foreach_ticket(const Admission *a, AdmissionTicketVisitor f, void *userdata) {
        uint64_t position;

        assert(a);
        assert(f);

        /* Cells are in FIFO order; the reserved tickets are the first
         * n_reserved live ones, all at position 0. */
        position = 0;
        for (uint32_t w = 0; w < a->n_words; w++)
                for (uint64_t bits = a->live[w]; bits != 0; bits &= bits - 1) {
                        uint32_t idx = a->cells[w * 64 + (uint32_t) __builtin_ctzll(bits)];
                        uint32_t slot = position < a->n_reserved ? slot_of_ticket(a, idx) : SLOT_NONE;
                        TicketView v;

                        fill_view(a, idx, slot, slot != SLOT_NONE ? 0 : position + 1 - a->n_reserved, &v);
                        position++;
                        f(&v, userdata);
                }
}
