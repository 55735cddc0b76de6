/* SP 800-90B §6.3.8: the Lag prediction estimate. */
#include <stdio.h>
#include <stdlib.h>

#include "ea.h"

/* Step 1: D = 128 lag predictors. */
#define LAG_D 128

double ea_lag(const uint8_t *s, size_t n, unsigned k, ea_info *info)
{
    if (n < 3 || k == 0 || k > 256)
        return EA_NA;
    /* prev[i]: the index of the previous occurrence of s[i] (or SIZE_MAX): walking it
     * from i visits exactly the lags d whose prediction s[i-d] equals s[i], smallest
     * first, so each step costs the number of matching lags, not D. */
    size_t *prev = ea_xmalloc(sizeof(size_t) * n);
    size_t last[256];
    for (unsigned v = 0; v < 256; v++)
        last[v] = SIZE_MAX;
    uint64_t score[LAG_D + 1] = {0};
    unsigned winner = 1; /* step 2 */
    uint64_t correct = 0, run = 0, longest = 0;

    prev[0] = SIZE_MAX;
    last[s[0]] = 0;
    /* Step 3, for i = 2..L (1-based); 0-based i = 1..n-1 predicts s[i]. */
    for (size_t i = 1; i < n; i++) {
        const unsigned x = s[i];
        prev[i] = last[x];
        last[x] = i;
        /* 3a-3c: the winner predicts s[i - winner] (winner <= i always holds: a lag
         * only scores once it exists). */
        if (s[i - winner] == x) {
            correct++;
            if (++run > longest)
                longest = run;
        } else {
            run = 0;
        }
        /* 3d: scoreboard, lags in increasing order, a longer lag takes a tie. */
        for (size_t j = prev[i]; j != SIZE_MAX && i - j <= LAG_D; j = prev[j]) {
            unsigned d = (unsigned)(i - j);
            score[d]++;
            if (score[d] >= score[winner])
                winner = d;
        }
    }
    free(prev);
    /* Steps 4-7, with N = L - 1 predictions. */
    return ea_prediction_entropy(correct, n - 1, longest, k, info);
}
