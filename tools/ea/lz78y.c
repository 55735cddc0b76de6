/* SP 800-90B §6.3.10: the LZ78Y prediction estimate. */
#include <stdio.h>
#include <stdlib.h>

#include "ctxdict.h"
#include "ea.h"

/* Step 1: B = 16, the longest string the dictionary holds. */
#define LZ_B 16
/* Step 1: maxDictionarySize = 65,536 strings across all lengths. */
#define LZ_MAX_DICT 65536

typedef struct {
    uint64_t correct, run, longest;
} lz_state;

static void lz_score(lz_state *st, uint32_t max_count, unsigned prediction, unsigned x)
{
    /* 3c-3d. */
    if (max_count > 0 && prediction == x) {
        st->correct++;
        if (++st->run > st->longest)
            st->longest = st->run;
    } else {
        st->run = 0;
    }
}

/* Binary samples: the strings of length j are the integers of their j bits (newest
 * lowest), with a table of 2^j x 2 follower counts; a string is in the dictionary
 * once either count is non-zero.  Same rules as the general path, only faster. */
static void lz_binary(const uint8_t *s, size_t n, lz_state *st)
{
    uint32_t *cnt[LZ_B + 1];
    for (unsigned j = 1; j <= LZ_B; j++)
        cnt[j] = ea_xcalloc((size_t)2 << j, sizeof(uint32_t));
    uint64_t dict_size = 0;
    uint32_t prev = 0;
    for (size_t i = 0; i < LZ_B; i++)
        prev = (prev << 1) | s[i];
    uint32_t cur = (prev << 1) | s[LZ_B];

    for (size_t i = LZ_B + 1; i < n; i++) {
        const unsigned y = s[i - 1];
        for (unsigned j = LZ_B; j >= 1; j--) {
            uint32_t *c = &cnt[j][(prev & ((1u << j) - 1)) << 1];
            if (!(c[0] | c[1])) {
                if (dict_size >= LZ_MAX_DICT)
                    continue;
                dict_size++;
            }
            c[y]++;
        }
        uint32_t max_count = 0;
        unsigned prediction = 0;
        for (unsigned j = LZ_B; j >= 1; j--) {
            const uint32_t *c = &cnt[j][(cur & ((1u << j) - 1)) << 1];
            uint32_t best = c[0] > c[1] ? c[0] : c[1];
            if (best > max_count) {
                max_count = best;
                prediction = c[0] > c[1] ? 0 : 1; /* a tie goes to the larger symbol */
            }
        }
        lz_score(st, max_count, prediction, s[i]);
        prev = cur;
        cur = (cur << 1) | s[i];
    }
    for (unsigned j = 1; j <= LZ_B; j++)
        free(cnt[j]);
}

static void lz_general(const uint8_t *s, size_t n, unsigned k, lz_state *st)
{
    unsigned bits = ea_symbol_bits(k);
    ctxdict *dict[LZ_B + 1];
    for (unsigned j = 1; j <= LZ_B; j++)
        dict[j] = ctxdict_new(j, bits, k);
    uint64_t dict_size = 0;
    /* Windows of the symbols up to s[i-2] and up to s[i-1], newest lowest. */
    ctx_key win_prev = {0, 0}, win_cur = {0, 0};
    for (size_t i = 0; i < LZ_B; i++)
        win_prev = ctx_push(win_prev, s[i], bits);
    win_cur = ctx_push(win_prev, s[LZ_B], bits);
    /* The string step 3b looks up at step i is the one step 3a updates at step i+1,
     * and that length's dictionary does not change in between: keep its handle. */
    int64_t handle[LZ_B + 1];
    int have_handle = 0;

    for (size_t i = LZ_B + 1; i < n; i++) {
        /* 3a: the strings of length j = B..1 that end at s[i-2], followed by s[i-1]. */
        for (unsigned j = LZ_B; j >= 1; j--) {
            ctx_key key = ctx_mask(win_prev, j, bits);
            int64_t h = have_handle ? handle[j] : ctxdict_find(dict[j], key);
            if (h < 0) {
                if (dict_size >= LZ_MAX_DICT)
                    continue;
                h = ctxdict_add(dict[j], key);
                dict_size++;
            }
            ctxdict_count(dict[j], h, s[i - 1], 1);
        }
        /* 3b: the prediction is the most frequent follower of the longest string that
         * gives the highest count (the scan runs from j = B down, strict >). */
        uint32_t max_count = 0;
        unsigned prediction = 0;
        for (unsigned j = LZ_B; j >= 1; j--) {
            int64_t h = ctxdict_find(dict[j], ctx_mask(win_cur, j, bits));
            handle[j] = h;
            if (h < 0)
                continue;
            uint32_t c;
            unsigned y = ctxdict_best(dict[j], h, &c);
            if (c > max_count) {
                max_count = c;
                prediction = y;
            }
        }
        have_handle = 1;
        lz_score(st, max_count, prediction, s[i]);
        win_prev = win_cur;
        win_cur = ctx_push(win_cur, s[i], bits);
    }
    for (unsigned j = 1; j <= LZ_B; j++)
        ctxdict_free(dict[j]);
}

double ea_lz78y(const uint8_t *s, size_t n, unsigned k, ea_info *info)
{
    if (n < LZ_B + 2 || k == 0 || k > 256)
        return EA_NA;
    lz_state st = {0, 0, 0};
    /* Step 3, for i = B+2..L (1-based); here 0-based i = B+1..n-1 predicts s[i]. */
    if (k <= 2)
        lz_binary(s, n, &st);
    else
        lz_general(s, n, k, &st);
    /* Steps 4-7, with N = L - B - 1 predictions. */
    return ea_prediction_entropy(st.correct, n - LZ_B - 1, st.longest, k, info);
}
