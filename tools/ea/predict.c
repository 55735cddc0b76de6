/*
 * The common ending of the prediction estimators, SP 800-90B §6.3.7 steps 5-8 (and
 * the same steps of §6.3.8, §6.3.9 and §6.3.10).
 */
#include <float.h>
#include <stdio.h>

#include "ea.h"

/* Plocal is the probability at which a longest run of r - 1 successes in N trials
 * is at the 99 % level: the equation's left-hand side is 0.99 (step 7). */
#define PRED_LOCAL_LEVEL 0.99
/* Step 6: with no correct prediction, Pglobal' = 1 - 0.01^(1/N) (the 99 % bound). */
#define PRED_ZERO_LEVEL 0.01
/* Fixed-point iterations for x in step 7 (it converges monotonically upward). */
#define PRED_X_ITERS 1000
/* Bisection steps for Plocal: enough for double precision on [0, 1]. */
#define PRED_BISECT_STEPS 200

/*
 * log of step 7's right-hand side, (1 - p x) / ((r + 1 - r x) q) * x^-(N+1), where x
 * is the positive root of 1 - x + q p^r x^(r+1) = 0 found by iterating
 * x <- 1 + q p^r x^(r+1) from x = 1.  It falls as p grows.
 */
static double local_rhs_log(long double p, long double r, long double n_pred)
{
    long double q = 1.0L - p, x = 1.0L, last = 0.0L;
    long double log_qpr = logl(q) + r * logl(p);

    for (int i = 0; i < PRED_X_ITERS && x - last > LDBL_EPSILON * x; i++) {
        last = x;
        x = 1.0L + expl(log_qpr + (r + 1.0L) * logl(x));
        if (p * x >= 1.0L) { /* the root lies at or beyond 1/p: no run-free tail */
            x = 1.0L / p;
            break;
        }
    }
    long double num = 1.0L - p * x;
    long double den = (r + 1.0L - r * x) * q;
    if (num <= 0.0L || den <= 0.0L)
        return -INFINITY;
    return (double)(logl(num) - logl(den) - (n_pred + 1.0L) * logl(x));
}

double ea_prediction_entropy(uint64_t correct, uint64_t n_pred, uint64_t longest_run,
                             unsigned k, ea_info *info)
{
    if (n_pred < 2 || k == 0)
        return EA_NA;
    double floor_p = 1.0 / (double)k; /* step 8: no better than guessing */

    /* Steps 5-6: Pglobal and its 99 % upper bound. */
    double p_global = (double)correct / (double)n_pred;
    double p_global_u;
    if (correct == 0)
        p_global_u = 1.0 - pow(PRED_ZERO_LEVEL, 1.0 / (double)n_pred);
    else
        p_global_u = p_global + EA_Z_ALPHA * sqrt(p_global * (1.0 - p_global) /
                                                  (double)(n_pred - 1));
    if (p_global_u > 1.0)
        p_global_u = 1.0;

    double p_max = p_global_u > floor_p ? p_global_u : floor_p;

    /* Step 7: r is one more than the longest run of correct predictions; Plocal
     * solves the run equation.  The root only matters when it exceeds p_max, i.e.
     * when the equation's right-hand side at p_max is still above 0.99. */
    long double r = (long double)longest_run + 1.0L;
    double target = log(PRED_LOCAL_LEVEL);
    double p_local = -1.0;
    if (p_max < 1.0 && local_rhs_log(p_max, r, (long double)n_pred) > target) {
        double lo = p_max, hi = 1.0;
        for (int it = 0; it < PRED_BISECT_STEPS && hi - lo > DBL_EPSILON; it++) {
            double mid = 0.5 * (lo + hi);
            if (mid <= lo || mid >= hi)
                break;
            if (local_rhs_log(mid, r, (long double)n_pred) > target)
                lo = mid;
            else
                hi = mid;
        }
        p_local = hi;
        if (p_local > p_max)
            p_max = p_local;
    }

    if (info) {
        if (p_local >= 0.0)
            snprintf(info->note, sizeof info->note,
                     "N=%llu C=%llu Pglobal'=%.6g r=%llu Plocal=%.6g",
                     (unsigned long long)n_pred, (unsigned long long)correct, p_global_u,
                     (unsigned long long)longest_run + 1, p_local);
        else
            snprintf(info->note, sizeof info->note,
                     "N=%llu C=%llu Pglobal'=%.6g r=%llu Plocal below Pglobal'",
                     (unsigned long long)n_pred, (unsigned long long)correct, p_global_u,
                     (unsigned long long)longest_run + 1);
    }
    /* Step 8. */
    return -log2(p_max);
}
