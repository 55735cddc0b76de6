/* SP 800-90B §6.3.2: the Collision estimate (binary samples only). */
#include <stdio.h>

#include "ea.h"

/*
 * For binary data a collision (a repeated value) is seen after 2 samples (00, 11)
 * or after 3 (010, 011, 100, 101): step 1 never needs a longer look-ahead.
 */
#define COLLISION_SHORT 2
#define COLLISION_LONG 3

/*
 * Step 7 solves  X' = p q^-2 (1 + (1/p - 1/q)/2) F(q) - p q^-1 (1/p - 1/q)/2  for p in
 * [1/2, 1], q = 1 - p, with F(1/z) = Gamma(3, z) z^-3 e^z.  Gamma(3, z) =
 * (2 + 2z + z^2) e^-z, so F(q) = q (2q^2 + 2q + 1), and the right-hand side
 * simplifies to the expected collision time of a biased coin, 2 + 2pq (t = 2 with
 * probability p^2 + q^2, else 3).  collision_expect() is the standard's expression;
 * the solver inverts 2 + 2p(1 - p) = X', whose root in [1/2, 1] is
 * p = 1/2 + sqrt(5/4 - X'/2); the -v note prints collision_expect(p) beside X' as a check.
 */
static double collision_expect(double p)
{
    double q = 1.0 - p;
    double f = q * (2.0 * q * q + 2.0 * q + 1.0);
    double half_diff = 0.5 * (1.0 / p - 1.0 / q);
    return p / (q * q) * (1.0 + half_diff) * f - p / q * half_diff;
}

/* Smallest meaningful mean: every collision after 2 samples (p = 1). */
#define COLLISION_MEAN_MIN 2.0
/* Largest mean the model reaches: an unbiased coin, 2 + 2 * 1/4 (p = 1/2). */
#define COLLISION_MEAN_MAX 2.5

double ea_collision(const uint8_t *s, size_t n, ea_info *info)
{
    uint64_t v = 0, sum = 0, sum_sq = 0;
    size_t i = 0;

    /* Steps 1-3: walk the data, recording each time to a collision t_v. */
    while (i + 1 < n) {
        unsigned t;
        if (s[i] == s[i + 1])
            t = COLLISION_SHORT;
        else if (i + 2 < n)
            t = COLLISION_LONG;
        else
            break; /* the data ended before a collision: not counted */
        v++;
        sum += t;
        sum_sq += (uint64_t)t * t;
        i += t;
    }
    if (v < 2)
        return EA_NA;

    /* Step 4: mean and standard deviation of the t_i. */
    double mean = (double)sum / (double)v;
    double var = ((double)sum_sq - (double)sum * mean) / (double)(v - 1);
    double sigma = var > 0.0 ? sqrt(var) : 0.0;
    /* Step 5: lower bound of the mean. */
    double mean_lo = mean - EA_Z_ALPHA * sigma / sqrt((double)v);

    /* Steps 6-7. */
    double p;
    if (mean_lo >= COLLISION_MEAN_MAX) {
        p = 0.5; /* no solution: step 7's "full entropy" */
    } else {
        if (mean_lo < COLLISION_MEAN_MIN)
            mean_lo = COLLISION_MEAN_MIN;
        p = 0.5 + sqrt(1.25 - 0.5 * mean_lo);
        if (p > 1.0)
            p = 1.0;
    }
    if (info)
        snprintf(info->note, sizeof info->note,
                 "v=%llu X=%.6g sigma=%.6g X'=%.6g p=%.6g (check %.6g)",
                 (unsigned long long)v, mean, sigma, mean_lo, p,
                 p < 1.0 && p > 0.5 ? collision_expect(p) : mean_lo);
    return -log2(p);
}
