/* SP 800-90B §6.3.4: the Compression estimate (binary samples only, Maurer-style). */
#include <stdio.h>
#include <stdlib.h>

#include "ea.h"

/* Step 1: the bits are read as b-bit blocks, b = 6. */
#define COMP_B 6
/* Step 1: the first d = 1000 blocks only fill the dictionary. */
#define COMP_D 1000
/* Step 4: the standard deviation's correction factor c = 0.5907. */
#define COMP_C 0.5907
/* Bisection steps for step 7: enough to pin p to double precision. */
#define COMP_BISECT_STEPS 200

/*
 * G(z) of step 7: (1/nu) sum_{t=d+1}^{V} sum_{u=1}^{t} log2(u) F(z, t, u), with
 * F = z^2 (1-z)^(u-1) for u < t and z (1-z)^(t-1) for u = t; V blocks, nu = V - d.
 * Regrouped by u: the u < t terms of block u appear once for every t in
 * [max(d, u) + 1, V], so the double sum is one pass over u (O(V) per evaluation).
 */
static double comp_g(double z, long V, const double *log2u)
{
    const long d = COMP_D;
    long double inner = 0.0L, diag = 0.0L;
    long double pw = 1.0L; /* (1-z)^(u-1) */
    const long double step = 1.0L - (long double)z;

    for (long u = 1; u <= V; u++) {
        long double a = (long double)log2u[u] * pw;
        if (u > 1 && pw == 0.0L)
            break; /* every later term has underflowed to 0 */
        if (u < V)
            inner += a * (long double)(V - (u > d ? u : d));
        if (u > d)
            diag += a;
        pw *= step;
    }
    return (double)(((long double)z * (long double)z * inner + (long double)z * diag) /
                    (long double)(V - d));
}

/* Step 7's right-hand side: G(p) + (2^b - 1) G(q), q = (1 - p) / (2^b - 1). */
static double comp_expect(double p, long V, const double *log2u)
{
    const double others = (double)((1 << COMP_B) - 1);
    double q = (1.0 - p) / others;
    return comp_g(p, V, log2u) + others * comp_g(q, V, log2u);
}

double ea_compression(const uint8_t *s, size_t n, ea_info *info)
{
    const long V = (long)(n / COMP_B);
    const long d = COMP_D;
    long dict[1 << COMP_B];

    if (V <= d)
        return EA_NA;

    /* Steps 2-3: last-seen index of each block value over the first d blocks, then
     * the distances D_i for the remaining nu blocks. */
    for (int j = 0; j < (1 << COMP_B); j++)
        dict[j] = 0;
    long double sum = 0.0L, sum_sq = 0.0L;
    for (long i = 0; i < V; i++) {
        unsigned block = 0;
        for (int j = 0; j < COMP_B; j++)
            block = (block << 1) | (s[(size_t)i * COMP_B + (size_t)j] & 1u);
        if (i >= d) {
            long dist = (i + 1) - dict[block]; /* dict is 1-based; 0 = never seen: D = i */
            double l = log2((double)dist);
            sum += l;
            sum_sq += (long double)l * l;
        }
        dict[block] = i + 1;
    }
    const long nu = V - d;
    /* Step 4. */
    double mean = (double)(sum / nu);
    double var = (double)(sum_sq / (nu - 1)) - mean * mean;
    double sigma = COMP_C * sqrt(var > 0.0 ? var : 0.0);
    /* Step 5. */
    double mean_lo = mean - EA_Z_ALPHA * sigma / sqrt((double)nu);

    double *log2u = ea_xmalloc(sizeof(double) * (size_t)(V + 1));
    log2u[0] = 0.0;
    for (long u = 1; u <= V; u++)
        log2u[u] = log2((double)u);

    /* Steps 6-7: the expectation falls from its maximum at p = 2^-b (all block
     * values alike) to 0 at p = 1; bisect for the p that gives mean_lo. */
    const double p_min = 1.0 / (double)(1 << COMP_B);
    double p;
    if (mean_lo >= comp_expect(p_min, V, log2u)) {
        p = p_min; /* no solution: step 8's full entropy */
    } else if (mean_lo <= 0.0) {
        p = 1.0;
    } else {
        double lo = p_min, hi = 1.0;
        for (int it = 0; it < COMP_BISECT_STEPS && hi - lo > 1e-15; it++) {
            double mid = 0.5 * (lo + hi);
            if (comp_expect(mid, V, log2u) > mean_lo)
                lo = mid;
            else
                hi = mid;
        }
        p = 0.5 * (lo + hi);
    }
    free(log2u);

    double h = -log2(p) / COMP_B;
    if (info)
        snprintf(info->note, sizeof info->note, "blocks=%ld X=%.6g sigma=%.6g X'=%.6g p=%.6g",
                 V, mean, sigma, mean_lo, p);
    return h > 1.0 ? 1.0 : h;
}
