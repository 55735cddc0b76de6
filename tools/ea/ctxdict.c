/* Context dictionaries for §6.3.9 and §6.3.10: see ctxdict.h. */
#include <stdlib.h>
#include <string.h>

#include "ctxdict.h"
#include "ea.h"

/* Direct tables are used while (context, follower) pairs fit in 2^20 slots (4 MiB of
 * counts): all binary contexts up to length 16 and the short contexts of small
 * alphabets. */
#define DIRECT_MAX_BITS 20
/* Hash tables start at 2^12 slots and double when half full. */
#define HASH_INITIAL_BITS 12

typedef struct {
    ctx_key key;
    int32_t id; /* -1: empty slot */
} ctx_slot;

typedef struct {
    uint64_t key; /* (context id << 8) | follower; UINT64_MAX: empty */
    uint32_t count;
} pair_slot;

struct ctxdict {
    unsigned len, bits, k;
    int direct;
    /* direct */
    uint32_t *pair_counts; /* [(ctx << bits) | y] */
    /* hash */
    ctx_slot *ctx_tab;
    size_t ctx_cap, ctx_used;
    pair_slot *pair_tab;
    size_t pair_cap, pair_used;
    /* per context id (direct: per context value) */
    uint32_t *best_count;
    uint16_t *best_sym;
    size_t ids, id_cap;
};

static uint64_t mix(uint64_t x)
{
    /* The splitmix64 finalizer: a fast, well-spread 64-bit hash. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static uint64_t key_hash(ctx_key k)
{
    return mix(k.lo ^ mix(k.hi + 0x9e3779b97f4a7c15ULL));
}

ctx_key ctx_mask(ctx_key w, unsigned len, unsigned bits)
{
    unsigned total = len * bits;
    if (total < 64) {
        w.lo &= (1ULL << total) - 1;
        w.hi = 0;
    } else if (total == 64) {
        w.hi = 0;
    } else if (total < 128) {
        w.hi &= (1ULL << (total - 64)) - 1;
    }
    return w;
}

ctx_key ctx_push(ctx_key w, unsigned sym, unsigned bits)
{
    w.hi = (w.hi << bits) | (w.lo >> (64 - bits));
    w.lo = (w.lo << bits) | sym;
    return w;
}

ctxdict *ctxdict_new(unsigned len, unsigned bits, unsigned k)
{
    ctxdict *d = ea_xcalloc(1, sizeof *d);
    d->len = len;
    d->bits = bits;
    d->k = k;
    d->direct = (len + 1) * bits <= DIRECT_MAX_BITS;
    if (d->direct) {
        size_t ctxs = (size_t)1 << (len * bits);
        d->pair_counts = ea_xcalloc(ctxs << bits, sizeof(uint32_t));
        d->best_count = ea_xcalloc(ctxs, sizeof(uint32_t));
        d->best_sym = ea_xcalloc(ctxs, sizeof(uint16_t));
    } else {
        d->ctx_cap = (size_t)1 << HASH_INITIAL_BITS;
        d->ctx_tab = ea_xmalloc(sizeof(ctx_slot) * d->ctx_cap);
        for (size_t i = 0; i < d->ctx_cap; i++)
            d->ctx_tab[i].id = -1;
        d->pair_cap = (size_t)1 << HASH_INITIAL_BITS;
        d->pair_tab = ea_xmalloc(sizeof(pair_slot) * d->pair_cap);
        for (size_t i = 0; i < d->pair_cap; i++)
            d->pair_tab[i].key = UINT64_MAX;
        d->id_cap = (size_t)1 << HASH_INITIAL_BITS;
        d->best_count = ea_xcalloc(d->id_cap, sizeof(uint32_t));
        d->best_sym = ea_xcalloc(d->id_cap, sizeof(uint16_t));
    }
    return d;
}

void ctxdict_free(ctxdict *d)
{
    if (!d)
        return;
    free(d->pair_counts);
    free(d->ctx_tab);
    free(d->pair_tab);
    free(d->best_count);
    free(d->best_sym);
    free(d);
}

int64_t ctxdict_find(ctxdict *d, ctx_key key)
{
    if (d->direct) {
        /* A direct context exists once some follower has been counted after it. */
        return d->best_count[key.lo] ? (int64_t)key.lo : -1;
    }
    size_t mask = d->ctx_cap - 1;
    for (size_t i = key_hash(key) & mask;; i = (i + 1) & mask) {
        ctx_slot *sl = &d->ctx_tab[i];
        if (sl->id < 0)
            return -1;
        if (sl->key.lo == key.lo && sl->key.hi == key.hi)
            return sl->id;
    }
}

static void ctx_insert_slot(ctx_slot *tab, size_t cap, ctx_key key, int32_t id)
{
    size_t mask = cap - 1;
    size_t i = key_hash(key) & mask;
    while (tab[i].id >= 0)
        i = (i + 1) & mask;
    tab[i].key = key;
    tab[i].id = id;
}

int64_t ctxdict_add(ctxdict *d, ctx_key key)
{
    if (d->direct)
        return (int64_t)key.lo; /* exists once counted: see ctxdict_find */
    if (2 * (d->ctx_used + 1) > d->ctx_cap) {
        size_t cap = d->ctx_cap * 2;
        ctx_slot *tab = ea_xmalloc(sizeof(ctx_slot) * cap);
        for (size_t i = 0; i < cap; i++)
            tab[i].id = -1;
        for (size_t i = 0; i < d->ctx_cap; i++)
            if (d->ctx_tab[i].id >= 0)
                ctx_insert_slot(tab, cap, d->ctx_tab[i].key, d->ctx_tab[i].id);
        free(d->ctx_tab);
        d->ctx_tab = tab;
        d->ctx_cap = cap;
    }
    if (d->ids == d->id_cap) {
        size_t cap = d->id_cap * 2;
        uint32_t *bc = ea_xcalloc(cap, sizeof(uint32_t));
        uint16_t *bs = ea_xcalloc(cap, sizeof(uint16_t));
        memcpy(bc, d->best_count, sizeof(uint32_t) * d->ids);
        memcpy(bs, d->best_sym, sizeof(uint16_t) * d->ids);
        free(d->best_count);
        free(d->best_sym);
        d->best_count = bc;
        d->best_sym = bs;
        d->id_cap = cap;
    }
    int32_t id = (int32_t)d->ids++;
    ctx_insert_slot(d->ctx_tab, d->ctx_cap, key, id);
    d->ctx_used++;
    return id;
}

static void pair_insert_slot(pair_slot *tab, size_t cap, uint64_t key, uint32_t count)
{
    size_t mask = cap - 1;
    size_t i = mix(key) & mask;
    while (tab[i].key != UINT64_MAX)
        i = (i + 1) & mask;
    tab[i].key = key;
    tab[i].count = count;
}

static void note_count(ctxdict *d, int64_t h, unsigned y, uint32_t c)
{
    /* Most frequent follower; among equally frequent ones the largest symbol. */
    if (c > d->best_count[h] || (c == d->best_count[h] && y > d->best_sym[h])) {
        d->best_count[h] = c;
        d->best_sym[h] = (uint16_t)y;
    }
}

int ctxdict_count(ctxdict *d, int64_t h, unsigned y, int may_create)
{
    if (d->direct) {
        uint32_t *c = &d->pair_counts[((size_t)h << d->bits) | y];
        if (*c == 0 && !may_create)
            return -1;
        int created = *c == 0;
        note_count(d, h, y, ++*c);
        return created;
    }
    uint64_t key = ((uint64_t)h << 8) | y;
    size_t mask = d->pair_cap - 1;
    size_t i = mix(key) & mask;
    for (;; i = (i + 1) & mask) {
        if (d->pair_tab[i].key == key) {
            note_count(d, h, y, ++d->pair_tab[i].count);
            return 0;
        }
        if (d->pair_tab[i].key == UINT64_MAX)
            break;
    }
    if (!may_create)
        return -1;
    if (2 * (d->pair_used + 1) > d->pair_cap) {
        size_t cap = d->pair_cap * 2;
        pair_slot *tab = ea_xmalloc(sizeof(pair_slot) * cap);
        for (size_t j = 0; j < cap; j++)
            tab[j].key = UINT64_MAX;
        for (size_t j = 0; j < d->pair_cap; j++)
            if (d->pair_tab[j].key != UINT64_MAX)
                pair_insert_slot(tab, cap, d->pair_tab[j].key, d->pair_tab[j].count);
        free(d->pair_tab);
        d->pair_tab = tab;
        d->pair_cap = cap;
    }
    pair_insert_slot(d->pair_tab, d->pair_cap, key, 1);
    d->pair_used++;
    note_count(d, h, y, 1);
    return 1;
}

unsigned ctxdict_best(const ctxdict *d, int64_t h, uint32_t *count)
{
    *count = d->best_count[h];
    return d->best_sym[h];
}
