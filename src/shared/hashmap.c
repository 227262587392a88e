/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shared/hashmap.h"

#define HASHMAP_MIN_BUCKETS 8u

typedef struct Bucket {
        const char *key; /* NULL: empty */
        void *value;
        uint32_t hash;
} Bucket;

struct StringHashmap {
        Bucket *buckets;
        uint32_t n_buckets; /* a power of two, or 0 */
        size_t n;
};

/* FNV-1a: the keys are the daemon's own random ids, so no keyed hash is
 * needed against chosen collisions; a lookup by a client's id only
 * compares. */
static uint32_t string_hash(const char *s) {
        uint32_t h = 2166136261u;

        for (; *s; s++)
                h = (h ^ (uint8_t) *s) * 16777619u;
        return h;
}

int string_hashmap_new(StringHashmap **ret) {
        StringHashmap *h;

        assert(ret);
        h = calloc(1, sizeof *h);
        if (!h)
                return -ENOMEM;
        *ret = h;
        return 0;
}

StringHashmap *string_hashmap_free(StringHashmap *h) {
        if (!h)
                return NULL;
        free(h->buckets);
        free(h);
        return NULL;
}

static void string_hashmap_insert_raw(Bucket *buckets, uint32_t n_buckets, const Bucket *e) {
        uint32_t mask = n_buckets - 1;
        uint32_t b = e->hash & mask;

        while (buckets[b].key)
                b = (b + 1) & mask;
        buckets[b] = *e;
}

/* Room for one more entry at load <= 1/2. */
static int string_hashmap_reserve(StringHashmap *h) {
        uint32_t size;
        Bucket *b;

        if ((h->n + 1) * 2 <= h->n_buckets)
                return 0;
        if (h->n_buckets > UINT32_MAX / 2)
                return -ENOMEM;
        size = h->n_buckets ? h->n_buckets * 2 : HASHMAP_MIN_BUCKETS;
        b = calloc(size, sizeof *b);
        if (!b)
                return -ENOMEM;
        for (uint32_t i = 0; i < h->n_buckets; i++)
                if (h->buckets[i].key)
                        string_hashmap_insert_raw(b, size, &h->buckets[i]);
        free(h->buckets);
        h->buckets = b;
        h->n_buckets = size;
        return 0;
}

/* The bucket holding key, or UINT32_MAX. */
static uint32_t string_hashmap_find(const StringHashmap *h, const char *key) {
        uint32_t hash, mask;

        if (!key || h->n == 0)
                return UINT32_MAX;
        hash = string_hash(key);
        mask = h->n_buckets - 1;
        for (uint32_t b = hash & mask;; b = (b + 1) & mask) {
                const Bucket *e = &h->buckets[b];

                if (!e->key)
                        return UINT32_MAX;
                if (e->hash == hash && strcmp(e->key, key) == 0)
                        return b;
        }
}

int string_hashmap_put(StringHashmap *h, const char *key, void *value) {
        int r;

        assert(h);
        assert(key);

        if (string_hashmap_find(h, key) != UINT32_MAX)
                return -EEXIST;
        r = string_hashmap_reserve(h);
        if (r < 0)
                return r;
        string_hashmap_insert_raw(
                h->buckets, h->n_buckets, &(Bucket){ .key = key, .value = value, .hash = string_hash(key) });
        h->n++;
        return 0;
}

void *string_hashmap_get(const StringHashmap *h, const char *key) {
        uint32_t b;

        assert(h);
        b = string_hashmap_find(h, key);
        return b == UINT32_MAX ? NULL : h->buckets[b].value;
}

void *string_hashmap_remove(StringHashmap *h, const char *key) {
        uint32_t b, mask;
        void *value;

        assert(h);
        b = string_hashmap_find(h, key);
        if (b == UINT32_MAX)
                return NULL;
        value = h->buckets[b].value;
        mask = h->n_buckets - 1;
        /* Backward shift: move each later entry of the run into the hole
         * unless its home lies cyclically in (hole, entry]. */
        for (uint32_t j = (b + 1) & mask; h->buckets[j].key; j = (j + 1) & mask) {
                uint32_t home = h->buckets[j].hash & mask;

                if (((j - home) & mask) >= ((j - b) & mask)) {
                        h->buckets[b] = h->buckets[j];
                        b = j;
                }
        }
        h->buckets[b] = (Bucket){ 0 };
        h->n--;
        return value;
}

size_t string_hashmap_size(const StringHashmap *h) {
        assert(h);
        return h->n;
}
