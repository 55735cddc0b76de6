/* SP 800-90B §6.3.7: the Multi Most Common in Window (MultiMCW) prediction estimate. */
#include <stdio.h>
#include <stdlib.h>

#include "ea.h"

/* Step 1: window sizes w = (63, 255, 1023, 4095). */
#define MCW_WINDOWS 4
static const size_t mcw_w[MCW_WINDOWS] = {63, 255, 1023, 4095};

typedef struct {
    uint32_t count[256];
    unsigned mode;     /* frequent_j: most common in the window, ties to the most recent */
    uint32_t mode_count;
} window;

/* Re-find the mode after it lost a sample: the most common value; among equally
 * common ones the most recently seen (last[] is the latest index of each value,
 * which lies in the window whenever its count is non-zero). */
static void rescan(window *w, unsigned k, const size_t *last)
{
    unsigned mode = w->mode;
    uint32_t best = 0;
    for (unsigned v = 0; v < k; v++) {
        uint32_t c = w->count[v];
        if (c > best || (c == best && c > 0 && last[v] > last[mode])) {
            best = c;
            mode = v;
        }
    }
    w->mode = mode;
    w->mode_count = best;
}

double ea_multi_mcw(const uint8_t *s, size_t n, unsigned k, ea_info *info)
{
    const size_t w1 = mcw_w[0];
    if (n <= mcw_w[MCW_WINDOWS - 1] || k == 0 || k > 256)
        return EA_NA;

    window *win = ea_xcalloc(MCW_WINDOWS, sizeof(window));
    size_t *last = ea_xcalloc(256, sizeof(size_t));
    uint64_t score[MCW_WINDOWS] = {0};
    unsigned winner = 0; /* step 2: the smallest window */
    uint64_t correct = 0, run = 0, longest = 0;

    for (size_t i = 0; i < n; i++) {
        const unsigned x = s[i];
        /* Step 3, for i = w1+1..L (1-based): window j holds s[i-w_j..i-1] once i > w_j. */
        if (i >= w1) {
            if (win[winner].mode == x) { /* the winner's window is always full here */
                correct++;
                if (++run > longest)
                    longest = run;
            } else {
                run = 0;
            }
            for (unsigned j = 0; j < MCW_WINDOWS; j++) {
                if (i >= mcw_w[j] && win[j].mode == x) {
                    score[j]++;
                    if (score[j] >= score[winner]) /* a larger window takes a tie */
                        winner = j;
                }
            }
        }
        /* Slide every window on by s[i]. */
        last[x] = i;
        for (unsigned j = 0; j < MCW_WINDOWS; j++) {
            window *w = &win[j];
            if (++w->count[x] >= w->mode_count) {
                w->mode = x; /* the newest value wins ties */
                w->mode_count = w->count[x];
            }
            if (i >= mcw_w[j]) {
                unsigned old = s[i - mcw_w[j]];
                w->count[old]--;
                if (old == w->mode)
                    rescan(w, k, last);
            }
        }
    }
    free(last);
    free(win);
    /* Steps 4-7, with N = L - w1 predictions. */
    return ea_prediction_entropy(correct, n - w1, longest, k, info);
}
