/*
 * SP 800-90B §6.3.5 (t-Tuple) and §6.3.6 (Longest Repeated Substring).
 *
 * Both need, for every tuple length W, the count of the most common W-tuple (Q[W])
 * and the number of pairs of equal W-tuples (sum over tuples of C(count, 2)).  In the
 * suffix array, the occurrences of one W-tuple are a run of adjacent suffixes whose
 * LCPs are all >= W: an lcp-interval.  One left-to-right pass over the LCP array with
 * a stack (Abouelhoda, Kurtz and Ohlebusch, 2004) visits every lcp-interval with its
 * size and the LCP of its parent; an interval of lcp l, parent lcp p and size c is the
 * group of one W-tuple for every W in (p, l].
 */
#include <stdio.h>
#include <stdlib.h>

#include "ea.h"

/* §6.3.5 step 1 and §6.3.6 step 1: t-tuples are counted while the most common one
 * occurs at least 35 times. */
#define TUPLE_MIN_COUNT 35

typedef struct {
    int32_t lcp;
    int32_t lb;
} interval;

static double upper_bound(double p_hat, size_t n)
{
    double p_u = p_hat + EA_Z_ALPHA * sqrt(p_hat * (1.0 - p_hat) / (double)(n - 1));
    return p_u > 1.0 ? 1.0 : p_u;
}

int ea_tuple_lrs(const uint8_t *s, size_t n, unsigned k, double *t_tuple, double *lrs,
                 ea_info *t_info, ea_info *lrs_info)
{
    *t_tuple = EA_NA;
    *lrs = EA_NA;
    if (n < 2)
        return 0;

    int32_t *sa = ea_xmalloc(sizeof(int32_t) * n);
    if (ea_suffix_array(s, n, k, sa) != 0) {
        free(sa);
        return -1;
    }
    int32_t *lcp = ea_xmalloc(sizeof(int32_t) * (n + 1));
    ea_lcp_array(s, n, sa, lcp);
    free(sa);
    lcp[n] = 0; /* closes every open interval */

    /* v: the length of the longest repeated substring (§6.3.6 step 2). */
    int32_t v = 0;
    for (size_t i = 1; i < n; i++)
        if (lcp[i] > v)
            v = lcp[i];

    /* best[l]: the largest interval of lcp exactly l; pairs_diff: a difference array
     * over W of the C(size, 2) contributions. */
    uint64_t *best = ea_xcalloc((size_t)v + 2, sizeof(uint64_t));
    int64_t *pairs_diff = ea_xcalloc((size_t)v + 2, sizeof(int64_t));
    interval *stack = ea_xmalloc(sizeof(interval) * (n + 1));
    size_t top = 0;
    stack[0].lcp = 0;
    stack[0].lb = 0;
    for (size_t i = 1; i <= n; i++) {
        int32_t lb = (int32_t)i - 1;
        while (lcp[i] < stack[top].lcp) {
            interval iv = stack[top--];
            int32_t parent = lcp[i] > stack[top].lcp ? lcp[i] : stack[top].lcp;
            uint64_t size = (uint64_t)((int32_t)i - iv.lb); /* suffixes lb..i-1 */
            if (size > best[iv.lcp])
                best[iv.lcp] = size;
            int64_t pairs = (int64_t)(size * (size - 1) / 2);
            pairs_diff[parent + 1] += pairs;
            pairs_diff[iv.lcp + 1] -= pairs;
            lb = iv.lb;
        }
        if (lcp[i] > stack[top].lcp) {
            stack[++top].lcp = lcp[i];
            stack[top].lb = lb;
        }
    }
    free(stack);
    free(lcp);

    /* Q[W] = the largest group at any level >= W (nested groups only shrink). */
    uint64_t *q = best; /* in place: suffix maximum */
    for (int32_t w = v - 1; w >= 1; w--)
        if (q[w + 1] > q[w])
            q[w] = q[w + 1];
    for (int32_t w = 1; w <= v; w++)
        if (q[w] == 0)
            q[w] = 1; /* every length has a tuple that occurs at least once */

    /* §6.3.5 step 1: t, the largest length whose most common tuple occurs >= 35 times. */
    int32_t t = 0;
    while (t < v && q[t + 1] >= TUPLE_MIN_COUNT)
        t++;
    if (t > 0) {
        /* Steps 2-3: P_max[i] = (Q[i] / (L - i + 1))^(1/i); p-hat is the largest. */
        double p_hat = 0.0;
        for (int32_t i = 1; i <= t; i++) {
            double p = (double)q[i] / (double)(n - (size_t)i + 1);
            double pm = pow(p, 1.0 / i);
            if (pm > p_hat)
                p_hat = pm;
        }
        double p_u = upper_bound(p_hat, n);
        *t_tuple = -log2(p_u);
        if (t_info)
            snprintf(t_info->note, sizeof t_info->note, "t=%d p_hat=%.6g p_u=%.6g", t, p_hat,
                     p_u);
    } else if (t_info) {
        snprintf(t_info->note, sizeof t_info->note, "no tuple occurs %d times",
                 TUPLE_MIN_COUNT);
    }

    /* §6.3.6: u = t + 1 (the smallest length whose most common tuple occurs fewer than
     * 35 times), lengths u..v. */
    int32_t u = t + 1;
    if (u <= v) {
        double p_hat = 0.0;
        int64_t pairs = 0;
        for (int32_t w = 1; w <= v; w++) {
            pairs += pairs_diff[w];
            if (w < u)
                continue;
            /* Step 3: P_W = sum C(C_i, 2) / C(L - W + 1, 2). */
            double m = (double)(n - (size_t)w + 1);
            double p = (double)pairs / (m * (m - 1.0) / 2.0);
            double pm = p > 0.0 ? pow(p, 1.0 / w) : 0.0;
            if (pm > p_hat)
                p_hat = pm;
        }
        double p_u = upper_bound(p_hat, n);
        *lrs = -log2(p_u);
        if (lrs_info)
            snprintf(lrs_info->note, sizeof lrs_info->note, "u=%d v=%d p_hat=%.6g p_u=%.6g",
                     u, v, p_hat, p_u);
    } else if (lrs_info) {
        snprintf(lrs_info->note, sizeof lrs_info->note, "v=%d < u=%d: no repeated %d-tuple", v,
                 u, u);
    }
    free(best);
    free(pairs_diff);
    return 0;
}
