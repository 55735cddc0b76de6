/*
 * ea-noniid: the non-IID min-entropy estimators of NIST SP 800-90B (January 2018), §6.3.
 *
 * Every estimator takes a sequence of symbols s[0..n-1], each in 0..k-1, and returns
 * its min-entropy estimate in bits per symbol of that sequence, or EA_NA when the
 * standard's procedure does not apply to the data (for example the t-tuple estimate
 * when no tuple occurs 35 times).  The binary-only estimators (§6.3.2-§6.3.4) take
 * k == 2 sequences; main.c runs them on the bitstring (§3.1.3) of non-binary samples.
 */
#ifndef EA_H
#define EA_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* Returned when the estimator's procedure does not apply to the data. */
#define EA_NA NAN

/*
 * The standard's confidence bounds are 99 %: §6.3.1 step 2, §6.3.2 step 5,
 * §6.3.4 step 5, §6.3.5 step 3, §6.3.6 step 4 and the prediction estimators'
 * Pglobal bound (§6.3.7 step 5 and its siblings) all use z = 2.576.
 */
#define EA_Z_ALPHA 2.576

/* Length of a detail line an estimator may leave for the verbose report. */
#define EA_NOTE_LEN 200

typedef struct {
    char note[EA_NOTE_LEN]; /* intermediate values, for -v */
} ea_info;

/* 6.3.1 */
double ea_mcv(const uint8_t *s, size_t n, unsigned k, ea_info *info);
/* 6.3.2, 6.3.3, 6.3.4: binary input (every s[i] is 0 or 1) */
double ea_collision(const uint8_t *s, size_t n, ea_info *info);
double ea_markov(const uint8_t *s, size_t n, ea_info *info);
double ea_compression(const uint8_t *s, size_t n, ea_info *info);
/* 6.3.5 and 6.3.6 share one suffix array: both are computed by one call. */
int ea_tuple_lrs(const uint8_t *s, size_t n, unsigned k, double *t_tuple, double *lrs,
                 ea_info *t_info, ea_info *lrs_info);
/* 6.3.7 - 6.3.10 */
double ea_multi_mcw(const uint8_t *s, size_t n, unsigned k, ea_info *info);
double ea_lag(const uint8_t *s, size_t n, unsigned k, ea_info *info);
double ea_multi_mmc(const uint8_t *s, size_t n, unsigned k, ea_info *info);
double ea_lz78y(const uint8_t *s, size_t n, unsigned k, ea_info *info);

/*
 * The prediction estimators' common ending (§6.3.7 steps 5-8 and the same steps of
 * §6.3.8-§6.3.10): Pglobal' from C correct predictions out of N, Plocal from the
 * longest run of correct predictions, and min-entropy -log2(max(Pglobal', Plocal, 1/k)).
 */
double ea_prediction_entropy(uint64_t correct, uint64_t n_pred, uint64_t longest_run,
                             unsigned k, ea_info *info);

/* Suffix array (SA-IS) and LCP array (Kasai et al.) of s[0..n-1], symbols < k. */
int ea_suffix_array(const uint8_t *s, size_t n, unsigned k, int32_t *sa);
int ea_lcp_array(const uint8_t *s, size_t n, const int32_t *sa, int32_t *lcp);

/*
 * The suffix array (sais.c) indexes at most this many symbols (int32_t positions with
 * room for the sentinel): 2^31 - 3.  main.c refuses a file whose literal or bitstring
 * track is longer before any estimator runs.
 */
#define EA_SA_MAX_SYMBOLS ((size_t)INT32_MAX - 2)

/* SP 800-90B §5: the IID tests (iid.c). */
#define EA_IID_NSTATS 19       /* §5.1.1-§5.1.11, periodicity and covariance at 5 lags */
#define EA_IID_PERMUTATIONS 10000 /* §5.1 step 2 */

typedef struct {
    const char *key, *section, *title;
    double statistic;          /* on the samples as they are */
    uint32_t greater, equal, less; /* permuted statistics vs the original's */
    uint32_t permutations;     /* permutations it was computed on (stops once decided) */
    int passed;
} ea_perm_result;

typedef struct {
    const char *key, *section, *title;
    double statistic, p_value; /* p_value NaN when not applicable */
    long df;
    int applicable, passed;
    char note[64];
} ea_chi_result;

typedef struct {
    size_t samples;
    unsigned distinct_values;
    int binary;
    double median;
    uint32_t permutations, permutations_run, tail; /* fail: <= tail on one side */
    uint64_t seed;
    unsigned threads;
    ea_perm_result perm[EA_IID_NSTATS];
    ea_chi_result chi[2];      /* independence, goodness of fit */
    int32_t lrs_length;
    double lrs_p_col, lrs_probability;
    int lrs_passed;
    int passed;                /* every test passed: the IID assumption stands */
} ea_iid_report;

/* Runs §5.1 (perms permutations, each shuffled by a PRNG seeded from seed and its
 * number; threads share them out without changing the result), §5.2.1-§5.2.4 and
 * §5.2.5 on the n samples raw[0..n-1]. */
void ea_iid_tests(const uint8_t *raw, size_t n, uint32_t perms, uint64_t seed,
                  unsigned threads, ea_iid_report *r);
/* Upper tail of the chi-square distribution: Q(df/2, t/2). */
double ea_chi_square_p(double t, double df);

/* Allocation that exits with a one-line error on failure. */
void *ea_xmalloc(size_t size);
void *ea_xcalloc(size_t count, size_t size);

/* Bits needed to write symbols 0..k-1 (at least 1). */
unsigned ea_symbol_bits(unsigned k);

#endif
