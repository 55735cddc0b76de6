/*
 * Context dictionaries for MultiMMC (§6.3.9) and LZ78Y (§6.3.10): for one context
 * length, a map from a context (a tuple of symbols) to counts of the symbol that
 * followed it, with the most frequent follower kept up to date.
 *
 * A context is packed into 128 bits, newest symbol lowest, `bits` bits a symbol, so
 * up to 16 symbols of 8 bits fit.  Small key spaces are plain arrays ("direct");
 * larger ones an open-addressing hash table that grows as needed.  The standard's
 * bounds on the number of entries are enforced by the callers.
 */
#ifndef CTXDICT_H
#define CTXDICT_H

#include <stdint.h>

typedef struct {
    uint64_t lo, hi;
} ctx_key;

typedef struct ctxdict ctxdict;

/* A dictionary for contexts of `len` symbols of `bits` bits each, followers < k. */
ctxdict *ctxdict_new(unsigned len, unsigned bits, unsigned k);
void ctxdict_free(ctxdict *d);

/* The context's handle, or -1 if it has no entry yet. */
int64_t ctxdict_find(ctxdict *d, ctx_key key);
/* Create the context (it must not exist); returns its handle. */
int64_t ctxdict_add(ctxdict *d, ctx_key key);
/*
 * Count one more `y` after context `h`.  If (h, y) has no entry yet it is created only
 * when `may_create` is set.  Returns 1 if a new (h, y) entry was created, 0 if an
 * existing one was incremented, -1 if nothing was done.
 */
int ctxdict_count(ctxdict *d, int64_t h, unsigned y, int may_create);
/* The most frequent follower of `h` (ties: the largest symbol) and its count. */
unsigned ctxdict_best(const ctxdict *d, int64_t h, uint32_t *count);

/* Keep the low `len` symbols of a packed window. */
ctx_key ctx_mask(ctx_key w, unsigned len, unsigned bits);
/* Shift a new symbol into a packed window. */
ctx_key ctx_push(ctx_key w, unsigned sym, unsigned bits);

#endif
