/* SP 800-90B §6.3.9: the Multi Markov Model with Counting (MultiMMC) prediction estimate. */
#include <stdio.h>
#include <stdlib.h>

#include "ctxdict.h"
#include "ea.h"

/* Step 2: D = 16 models, of orders 1..16. */
#define MMC_D 16
/* Step 2: each model M_d keeps at most maxEntries = 100,000 (context, follower) entries. */
#define MMC_MAX_ENTRIES 100000

/* The prediction bookkeeping of steps 4c-4e, shared by both paths. */
typedef struct {
    uint64_t score[MMC_D + 1];
    unsigned winner;
    uint64_t correct, run, longest;
} mmc_state;

static void mmc_score(mmc_state *st, const int *predicted, const unsigned *sub, unsigned x)
{
    /* 4c-4d: the winner's prediction is the estimator's. */
    if (predicted[st->winner] && sub[st->winner] == x) {
        st->correct++;
        if (++st->run > st->longest)
            st->longest = st->run;
    } else {
        st->run = 0;
    }
    /* 4e: scoreboard; a later (higher-order) model takes a tie. */
    for (unsigned d = 1; d <= MMC_D; d++) {
        if (predicted[d] && sub[d] == x) {
            st->score[d]++;
            if (st->score[d] >= st->score[st->winner])
                st->winner = d;
        }
    }
}

/*
 * Binary samples: M_d is a plain table of 2^d contexts x 2 followers, a context is
 * the integer of its d bits (newest lowest), and it exists once either count is
 * non-zero.  Same rules as the general path, only faster.
 */
static void mmc_binary(const uint8_t *s, size_t n, mmc_state *st)
{
    uint32_t *cnt[MMC_D + 1];
    uint64_t entries[MMC_D + 1] = {0};
    for (unsigned d = 1; d <= MMC_D; d++)
        cnt[d] = ea_xcalloc((size_t)2 << d, sizeof(uint32_t));
    uint32_t prev = s[0], cur = (uint32_t)(s[0] << 1) | s[1];
    int predicted[MMC_D + 1] = {0};
    unsigned sub[MMC_D + 1] = {0};

    for (size_t i = 2; i < n; i++) {
        const unsigned y = s[i - 1];
        for (unsigned d = 1; d <= MMC_D && d + 1 <= i; d++) {
            uint32_t *c = &cnt[d][((prev & ((1u << d) - 1)) << 1) | y];
            if (*c)
                (*c)++;
            else if (entries[d] < MMC_MAX_ENTRIES) {
                *c = 1;
                entries[d]++;
            }
        }
        for (unsigned d = 1; d <= MMC_D; d++) {
            predicted[d] = 0;
            if (d > i)
                continue;
            const uint32_t *c = &cnt[d][(cur & ((1u << d) - 1)) << 1];
            if (c[0] | c[1]) {
                predicted[d] = 1;
                sub[d] = c[0] > c[1] ? 0 : 1; /* a tie goes to the larger symbol */
            }
        }
        mmc_score(st, predicted, sub, s[i]);
        prev = cur;
        cur = (cur << 1) | s[i];
    }
    for (unsigned d = 1; d <= MMC_D; d++)
        free(cnt[d]);
}

static void mmc_general(const uint8_t *s, size_t n, unsigned k, mmc_state *st)
{
    unsigned bits = ea_symbol_bits(k);
    ctxdict *m[MMC_D + 1];
    uint64_t entries[MMC_D + 1] = {0};
    for (unsigned d = 1; d <= MMC_D; d++)
        m[d] = ctxdict_new(d, bits, k);
    /* win_prev: the symbols up to s[i-2]; win_cur: up to s[i-1]; newest lowest. */
    ctx_key win_prev = {0, 0}, win_cur = {0, 0};
    win_prev = ctx_push(win_prev, s[0], bits);
    win_cur = ctx_push(win_prev, s[1], bits);
    /* The context step 4b looks up at step i is the one step 4a updates at step i+1,
     * and M_d does not change in between: its handle is kept for reuse. */
    int64_t handle[MMC_D + 1];
    int have_handle[MMC_D + 1] = {0};
    int predicted[MMC_D + 1] = {0};
    unsigned sub[MMC_D + 1] = {0};

    for (size_t i = 2; i < n; i++) {
        /* 4a: count s[i-1] after the d symbols before it, for every d that fits. */
        for (unsigned d = 1; d <= MMC_D && d + 1 <= i; d++) {
            ctx_key key = ctx_mask(win_prev, d, bits);
            int64_t h = have_handle[d] ? handle[d] : ctxdict_find(m[d], key);
            int room = entries[d] < MMC_MAX_ENTRIES;
            if (h < 0) {
                if (!room)
                    continue;
                h = ctxdict_add(m[d], key);
            }
            if (ctxdict_count(m[d], h, s[i - 1], room) == 1)
                entries[d]++;
        }
        /* 4b: each model's prediction from the d symbols before s[i]. */
        for (unsigned d = 1; d <= MMC_D; d++) {
            predicted[d] = 0;
            have_handle[d] = 0;
            if (d > i)
                continue;
            int64_t h = ctxdict_find(m[d], ctx_mask(win_cur, d, bits));
            handle[d] = h;
            have_handle[d] = 1;
            if (h >= 0) {
                uint32_t c;
                sub[d] = ctxdict_best(m[d], h, &c);
                predicted[d] = 1;
            }
        }
        mmc_score(st, predicted, sub, s[i]);
        win_prev = win_cur;
        win_cur = ctx_push(win_cur, s[i], bits);
    }
    for (unsigned d = 1; d <= MMC_D; d++)
        ctxdict_free(m[d]);
}

double ea_multi_mmc(const uint8_t *s, size_t n, unsigned k, ea_info *info)
{
    if (n < 3 || k == 0 || k > 256)
        return EA_NA;
    mmc_state st = {{0}, 1, 0, 0, 0}; /* step 3: winner = 1 */
    /* Step 4, for i = 3..L (1-based); here 0-based i = 2..n-1 predicts s[i]. */
    if (k <= 2)
        mmc_binary(s, n, &st);
    else
        mmc_general(s, n, k, &st);
    /* Steps 5-8, with N = L - 2 predictions. */
    return ea_prediction_entropy(st.correct, n - 2, st.longest, k, info);
}
