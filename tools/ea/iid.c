/*
 * SP 800-90B §5: the tests of the IID assumption.
 *
 *   §5.1    permutation testing: 19 statistics (§5.1.1-§5.1.11, periodicity and
 *           covariance at lags 1, 2, 8, 16, 32), each computed on the samples and on
 *           shuffled copies of them (Fisher-Yates, a fixed-seed xoshiro256**), ranked;
 *   §5.2.1-§5.2.4  the chi-square tests of independence and goodness of fit;
 *   §5.2.5  the length of the longest repeated substring test.
 *
 * Where the standard leaves a choice, NIST's reference tool (SP800-90B_EntropyAssessment)
 * was followed: symbols are the sample values renumbered 0..k-1 in value order; the
 * excursion, covariance (non-binary) and compression statistics use the raw values;
 * binary data (k == 2) go through Conversion I (ones per 8-bit block) for the
 * directional runs, periodicity and covariance statistics and Conversion II (the
 * 8-bit blocks' values) for the collision statistics, with the median 0.5; a final
 * partial block is padded with zeros.  One deliberate difference: §5.1.11 compresses
 * with bzip2; this tool links no compression library, so the compression statistic is
 * the size of an LZ77 coding of the samples (see lz77_bytes).
 *
 * The permutations are shared out among threads; each is seeded from its own number,
 * and the counts are taken in permutation order, so the result is that of one thread.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ea.h"

/* §5.1 step 3: a statistic fails when at most 5 of the 10,000 permuted values are
 * >= (or <=) the original's, i.e. its rank is in the top or bottom 0.05 %. */
#define IID_TAIL_PER_10000 5
/* §5.2: a chi-square test fails when its p-value is below 0.001; §5.2.5 fails when
 * Pr(X >= 1) is below 0.001. */
#define IID_CHI_ALPHA 0.001
#define IID_LRS_ALPHA 0.001
/* §5.2.1/§5.2.2: bins are filled until their expected count is at least 5. */
#define IID_MIN_BIN_EXPECTATION 5.0
/* §5.2.3: m, the binary tuple length, is at most 11. */
#define IID_BINARY_MAX_M 11
/* Iterations for the incomplete gamma function's series and continued fraction. */
#define IID_GAMMA_ITERS 100000

static const int lags[5] = {1, 2, 8, 16, 32};

static const struct {
    const char *key, *section, *title;
} stat_names[EA_IID_NSTATS] = {
    {"excursion", "5.1.1", "Excursion"},
    {"directional_runs", "5.1.2", "Number of directional runs"},
    {"directional_run_length", "5.1.3", "Length of directional runs"},
    {"increases_decreases", "5.1.4", "Number of increases/decreases"},
    {"median_runs", "5.1.5", "Number of runs (median)"},
    {"median_run_length", "5.1.6", "Length of runs (median)"},
    {"average_collision", "5.1.7", "Average collision"},
    {"maximum_collision", "5.1.8", "Maximum collision"},
    {"periodicity_1", "5.1.9", "Periodicity, p = 1"},
    {"periodicity_2", "5.1.9", "Periodicity, p = 2"},
    {"periodicity_8", "5.1.9", "Periodicity, p = 8"},
    {"periodicity_16", "5.1.9", "Periodicity, p = 16"},
    {"periodicity_32", "5.1.9", "Periodicity, p = 32"},
    {"covariance_1", "5.1.10", "Covariance, p = 1"},
    {"covariance_2", "5.1.10", "Covariance, p = 2"},
    {"covariance_8", "5.1.10", "Covariance, p = 8"},
    {"covariance_16", "5.1.10", "Covariance, p = 16"},
    {"covariance_32", "5.1.10", "Covariance, p = 32"},
    {"compression", "5.1.11", "Compression (LZ77 size)"},
};

enum { S_EXCURSION, S_DIR_RUNS, S_DIR_LEN, S_INC_DEC, S_MED_RUNS, S_MED_LEN, S_AVG_COLL,
       S_MAX_COLL, S_PERIOD, S_COV = S_PERIOD + 5, S_COMPRESSION = S_COV + 5 };

/* ---- xoshiro256** (Blackman and Vigna), seeded by splitmix64 ---- */

typedef struct {
    uint64_t s[4];
} prng;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void prng_seed(prng *g, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        g->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t prng_next(prng *g)
{
    uint64_t *s = g->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, bound), bound <= 2^32, without bias (Lemire's multiply-and-reject). */
static uint32_t prng_below(prng *g, uint64_t bound)
{
    uint64_t m = (prng_next(g) >> 32) * bound;
    uint32_t low = (uint32_t)m;
    if (low < bound) {
        uint32_t floor_ = (uint32_t)((0x100000000ULL - bound) % bound);
        while (low < floor_) {
            m = (prng_next(g) >> 32) * bound;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

/* Fisher-Yates: every permutation of x[0..n-1] equally likely. */
static void shuffle(uint8_t *x, size_t n, prng *g)
{
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = prng_below(g, (uint64_t)i + 1);
        uint8_t t = x[i];
        x[i] = x[j];
        x[j] = t;
    }
}

/* ---- the §5.1 statistics ---- */

typedef struct {
    size_t n;
    unsigned k;
    int binary;
    uint8_t map[256];     /* raw value -> symbol 0..k-1 */
    int64_t total;        /* sum of the raw values (the same for every permutation) */
    int median2;          /* twice the median of the symbols */
    uint8_t *conv1, *conv2; /* Conversions I and II of binary data */
    size_t nconv;
    uint8_t *seq;         /* symbols of non-binary data */
    int32_t *lz_head;     /* the compression statistic's hash table */
} stat_ctx;

/* Symbols of non-binary data, or the conversions of binary data. */
static void prepare(stat_ctx *c, const uint8_t *x)
{
    if (c->binary) {
        memset(c->conv1, 0, c->nconv);
        memset(c->conv2, 0, c->nconv);
        for (size_t i = 0; i < c->n; i++) {
            uint8_t b = c->map[x[i]];
            c->conv1[i / 8] += b;
            c->conv2[i / 8] |= (uint8_t)(b << (7 - i % 8));
        }
    } else {
        for (size_t i = 0; i < c->n; i++)
            c->seq[i] = c->map[x[i]];
    }
}

/* §5.1.1: max over i of |sum_{j<=i} x_j - i * mean|, kept as n times that (exact). */
static long double excursion(const stat_ctx *c, const uint8_t *x)
{
    int64_t run = 0, best = 0, n = (int64_t)c->n;
    for (size_t i = 0; i < c->n; i++) {
        run += x[i];
        int64_t d = n * run - (int64_t)(i + 1) * c->total;
        if (d < 0)
            d = -d;
        if (d > best)
            best = d;
    }
    return (long double)best;
}

/* §5.1.2-§5.1.4 on y[0..m-1]: s'_i = -1 if y_i > y_{i+1}, else +1.  (The loops here
 * are written without branches on the data: random signs defeat branch prediction.) */
static void directional(const uint8_t *y, size_t m, long double *runs, long double *longest,
                        long double *incdec)
{
    if (m < 2) {
        *runs = *longest = *incdec = 0;
        return;
    }
    uint64_t nruns = 0, best = 0, len = 0, down = 0;
    unsigned prev = 2; /* neither sign */
    for (size_t i = 0; i + 1 < m; i++) {
        unsigned s = y[i] > y[i + 1];
        uint64_t change = s != prev;
        down += s;
        nruns += change;
        len = change ? 1 : len + 1;
        best = len > best ? len : best;
        prev = s;
    }
    uint64_t up = (uint64_t)(m - 1) - down;
    *runs = (long double)nruns;
    *longest = (long double)best;
    *incdec = (long double)(up > down ? up : down);
}

/* §5.1.5-§5.1.6: s'_i = -1 if the sample is below the median, else +1 (the median
 * of binary data is 0.5). */
static void median_runs(const stat_ctx *c, const uint8_t *x, long double *runs,
                        long double *longest)
{
    uint8_t below[256];
    for (int v = 0; v < 256; v++)
        below[v] = 2 * (int)c->map[v] < c->median2;
    uint64_t nruns = 0, best = 0, len = 0;
    unsigned prev = 2;
    for (size_t i = 0; i < c->n; i++) {
        unsigned s = below[x[i]];
        uint64_t change = s != prev;
        nruns += change;
        len = change ? 1 : len + 1;
        best = len > best ? len : best;
        prev = s;
    }
    *runs = (long double)nruns;
    *longest = (long double)best;
}

/* §5.1.7-§5.1.8: lengths of successive windows that end at their first repeated value. */
static void collisions(const uint8_t *y, size_t m, long double *average, long double *maximum)
{
    uint32_t seen[256] = {0}, gen = 0;
    uint64_t count = 0, sum = 0, best = 0;
    size_t i = 0;
    while (i < m) {
        gen++;
        size_t j = i;
        while (j < m && seen[y[j]] != gen) {
            seen[y[j]] = gen;
            j++;
        }
        if (j == m)
            break; /* no repeat in the rest */
        uint64_t len = (uint64_t)(j - i + 1);
        count++;
        sum += len;
        if (len > best)
            best = len;
        i = j + 1;
    }
    *average = count ? (long double)sum / (long double)count : 0.0L;
    *maximum = (long double)best;
}

/* §5.1.9 and §5.1.10 at the five lags p, in one pass: the number of i with
 * y_i == y_{i+p}, and the sum of y_i y_{i+p}. */
static void lag_stats(const uint8_t *y, size_t m, long double *per, long double *cov)
{
    uint64_t eq[5] = {0}, prod[5] = {0};
    const size_t maxlag = 32;
    size_t head = m > maxlag ? m - maxlag : 0;
    for (size_t i = 0; i < head; i++) {
        unsigned a = y[i], b1 = y[i + 1], b2 = y[i + 2], b8 = y[i + 8], b16 = y[i + 16],
                 b32 = y[i + 32];
        eq[0] += a == b1;
        eq[1] += a == b2;
        eq[2] += a == b8;
        eq[3] += a == b16;
        eq[4] += a == b32;
        prod[0] += a * b1;
        prod[1] += a * b2;
        prod[2] += a * b8;
        prod[3] += a * b16;
        prod[4] += a * b32;
    }
    for (size_t i = head; i < m; i++)
        for (int l = 0; l < 5; l++)
            if (i + (size_t)lags[l] < m) {
                eq[l] += y[i] == y[i + (size_t)lags[l]];
                prod[l] += (uint64_t)y[i] * y[i + (size_t)lags[l]];
            }
    for (int l = 0; l < 5; l++) {
        per[l] = (long double)eq[l];
        cov[l] = (long double)prod[l];
    }
}

/*
 * §5.1.11 with a substitute compressor.  The standard compresses the samples' decimal
 * text with bzip2; this tool links libc and libm only, so the statistic is the size in
 * bytes of a greedy LZ77 coding of the samples (one byte each): at each position the
 * most recent earlier occurrence of the next three samples within 65,535 positions
 * (found through a hash of those three) is extended to at most 258 samples; a match
 * costs 25 bits (a flag, a 16-bit distance, an 8-bit length), a literal 9 bits (a flag
 * and the byte).  Like bzip2's output size it shrinks with repeated structure; the
 * permutation test compares it only with itself on shuffled data, so any fixed
 * compressor gives a valid test, though not NIST's numbers.
 */
#define LZ_HASH_BITS 16
#define LZ_WINDOW 65535
#define LZ_MIN_MATCH 3
#define LZ_MAX_MATCH 258
#define LZ_LITERAL_BITS 9
#define LZ_MATCH_BITS 25

static long double lz77_bytes(stat_ctx *c, const uint8_t *x)
{
    int32_t *head = c->lz_head;
    const size_t n = c->n;
    uint64_t bits = 0;
    size_t i = 0;
    memset(head, 0xff, sizeof(int32_t) << LZ_HASH_BITS);
    while (i < n) {
        size_t len = 0;
        if (i + LZ_MIN_MATCH <= n) {
            uint32_t key = (uint32_t)x[i] << 16 | (uint32_t)x[i + 1] << 8 | x[i + 2];
            uint32_t h = (key * 2654435761u) >> (32 - LZ_HASH_BITS);
            int32_t cand = head[h];
            head[h] = (int32_t)i;
            if (cand >= 0 && i - (size_t)cand <= LZ_WINDOW) {
                size_t lim = n - i < LZ_MAX_MATCH ? n - i : LZ_MAX_MATCH, m = 0;
                while (m < lim && x[(size_t)cand + m] == x[i + m])
                    m++;
                if (m >= LZ_MIN_MATCH)
                    len = m;
            }
        }
        if (len) {
            bits += LZ_MATCH_BITS;
            i += len;
        } else {
            bits += LZ_LITERAL_BITS;
            i++;
        }
    }
    return (long double)((bits + 7) / 8);
}

/* The statistics whose need[] is set, on the samples x (a permutation of the input). */
static void statistics(stat_ctx *c, const uint8_t *x, const int *need, long double *t)
{
    int lag = 0;
    for (int l = 0; l < 5; l++)
        lag |= need[S_PERIOD + l] || need[S_COV + l];
    int prep = need[S_DIR_RUNS] || need[S_DIR_LEN] || need[S_INC_DEC] || need[S_AVG_COLL] ||
               need[S_MAX_COLL] || (c->binary && lag);
    if (prep)
        prepare(c, x);
    const uint8_t *y1 = c->binary ? c->conv1 : c->seq; /* directional runs */
    const uint8_t *y2 = c->binary ? c->conv2 : c->seq; /* collisions */
    size_t m = c->binary ? c->nconv : c->n;

    if (need[S_EXCURSION])
        t[S_EXCURSION] = excursion(c, x);
    if (need[S_DIR_RUNS] || need[S_DIR_LEN] || need[S_INC_DEC])
        directional(y1, m, &t[S_DIR_RUNS], &t[S_DIR_LEN], &t[S_INC_DEC]);
    if (need[S_MED_RUNS] || need[S_MED_LEN])
        median_runs(c, x, &t[S_MED_RUNS], &t[S_MED_LEN]);
    if (need[S_AVG_COLL] || need[S_MAX_COLL])
        collisions(y2, m, &t[S_AVG_COLL], &t[S_MAX_COLL]);
    /* Periodicity and covariance: of Conversion I for binary data, else of the raw
     * values (equal raw values are equal symbols, so periodicity is the same). */
    if (lag) {
        if (c->binary)
            lag_stats(c->conv1, c->nconv, &t[S_PERIOD], &t[S_COV]);
        else
            lag_stats(x, c->n, &t[S_PERIOD], &t[S_COV]);
    }
    if (need[S_COMPRESSION])
        t[S_COMPRESSION] = lz77_bytes(c, x);
}

/* ---- §5.2: chi-square p-values ---- */

/* Q(a, x), the regularized upper incomplete gamma function (series below a + 1,
 * Lentz's continued fraction above). */
static double gamma_q(double a, double x)
{
    if (x <= 0.0)
        return 1.0;
    double log_front = a * log(x) - x - lgamma(a);
    if (x < a + 1.0) {
        double term = 1.0 / a, sum = term;
        for (int i = 1; i < IID_GAMMA_ITERS; i++) {
            term *= x / (a + i);
            sum += term;
            if (term < sum * 1e-16)
                break;
        }
        double p = sum * exp(log_front);
        return p >= 1.0 ? 0.0 : 1.0 - p;
    }
    const double tiny = 1e-300;
    double b = x + 1.0 - a, cc = 1.0 / tiny, d = 1.0 / b, h = d;
    for (int i = 1; i < IID_GAMMA_ITERS; i++) {
        double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        if (fabs(d) < tiny)
            d = tiny;
        cc = b + an / cc;
        if (fabs(cc) < tiny)
            cc = tiny;
        d = 1.0 / d;
        double del = d * cc;
        h *= del;
        if (fabs(del - 1.0) < 1e-16)
            break;
    }
    return exp(log_front) * h;
}

/* p-value of a chi-square statistic with df degrees of freedom. */
double ea_chi_square_p(double t, double df)
{
    return gamma_q(df / 2.0, t / 2.0);
}

typedef struct {
    double e;
    uint32_t id;
} expect;

static int expect_order(const void *pa, const void *pb)
{
    const expect *a = pa, *b = pb;
    if (a->e != b->e)
        return a->e < b->e ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/*
 * §5.2.1 step 2 / §5.2.2 step 2: the cells sorted by expectation (then by index, as
 * NIST's tool does) fill bins in turn, a bin closing once its expectation reaches 5;
 * a last bin short of 5 joins the one before.  bin[id] and the bins' expectations.
 */
static size_t make_bins(expect *e, size_t cells, uint32_t *bin, double *bin_e)
{
    qsort(e, cells, sizeof *e, expect_order);
    size_t nb = 0;
    double cur = 0.0;
    size_t first_of_cur = 0;
    for (size_t i = 0; i < cells; i++) {
        if (cur >= IID_MIN_BIN_EXPECTATION) {
            bin_e[nb++] = cur;
            cur = 0.0;
            first_of_cur = i;
        }
        bin[e[i].id] = (uint32_t)nb;
        cur += e[i].e;
    }
    if (nb > 0 && cur < IID_MIN_BIN_EXPECTATION) {
        for (size_t i = first_of_cur; i < cells; i++)
            bin[e[i].id] = (uint32_t)(nb - 1);
        bin_e[nb - 1] += cur;
    } else {
        bin_e[nb++] = cur;
    }
    return nb;
}

static void chi_finish(ea_chi_result *r, double t, long df)
{
    r->statistic = t;
    r->df = df;
    if (df < 1) {
        r->applicable = 0;
        r->p_value = EA_NA;
        r->passed = 1;
        return;
    }
    r->applicable = 1;
    r->p_value = ea_chi_square_p(t, (double)df);
    r->passed = r->p_value >= IID_CHI_ALPHA;
}

/* §5.2.1 (non-binary independence) and §5.2.2 (non-binary goodness of fit). */
static void chi_nonbinary(const uint8_t *s, size_t n, unsigned k, ea_iid_report *r)
{
    uint64_t counts[256] = {0};
    for (size_t i = 0; i < n; i++)
        counts[s[i]]++;
    double p[256];
    for (unsigned v = 0; v < k; v++)
        p[v] = (double)counts[v] / (double)n;

    /* §5.2.1: pairs (s_1, s_2), (s_3, s_4), ...; e_ij = p_i p_j floor(L/2). */
    size_t cells = (size_t)k * k, pairs = n / 2;
    expect *e = ea_xmalloc(sizeof *e * cells);
    uint32_t *bin = ea_xmalloc(sizeof *bin * cells);
    double *bin_e = ea_xmalloc(sizeof *bin_e * cells);
    for (unsigned i = 0; i < k; i++)
        for (unsigned j = 0; j < k; j++) {
            e[i * k + j].e = p[i] * p[j] * (double)pairs;
            e[i * k + j].id = i * k + j;
        }
    size_t nb = make_bins(e, cells, bin, bin_e);
    uint64_t *o = ea_xcalloc(nb, sizeof *o);
    for (size_t i = 0; i < pairs; i++)
        o[bin[s[2 * i] * k + s[2 * i + 1]]]++;
    double t = 0.0;
    for (size_t b = 0; b < nb; b++)
        t += ((double)o[b] - bin_e[b]) * ((double)o[b] - bin_e[b]) / bin_e[b];
    chi_finish(&r->chi[0], t, (long)nb - (long)k); /* df as NIST's tool computes it */
    snprintf(r->chi[0].note, sizeof r->chi[0].note, "%zu cells in %zu bins", cells, nb);
    free(o);

    /* §5.2.2: ten consecutive parts of floor(L/10) samples; e_i = p_i floor(L/10). */
    size_t part = n / 10;
    for (unsigned v = 0; v < k; v++) {
        e[v].e = p[v] * (double)part;
        e[v].id = v;
    }
    nb = make_bins(e, k, bin, bin_e);
    o = ea_xcalloc(nb, sizeof *o);
    t = 0.0;
    for (int d = 0; d < 10; d++) {
        memset(o, 0, nb * sizeof *o);
        for (size_t i = (size_t)d * part; i < (size_t)(d + 1) * part; i++)
            o[bin[s[i]]]++;
        for (size_t b = 0; b < nb; b++)
            t += ((double)o[b] - bin_e[b]) * ((double)o[b] - bin_e[b]) / bin_e[b];
    }
    chi_finish(&r->chi[1], t, 9 * ((long)nb - 1));
    snprintf(r->chi[1].note, sizeof r->chi[1].note, "%u values in %zu bins", k, nb);
    free(o);
    free(e);
    free(bin);
    free(bin_e);
}

/* §5.2.3 (binary independence) and §5.2.4 (binary goodness of fit); s is 0/1. */
static void chi_binary(const uint8_t *s, size_t n, ea_iid_report *r)
{
    uint64_t ones = 0;
    for (size_t i = 0; i < n; i++)
        ones += s[i];
    double p1 = (double)ones / (double)n, p0 = 1.0 - p1;
    double pmin = p0 < p1 ? p0 : p1;

    /* §5.2.3: the largest m <= 11 with pmin^m floor(L/m) >= 5; m-bit blocks. */
    int m = IID_BINARY_MAX_M;
    while (m > 1 && pow(pmin, m) * (double)(n / (size_t)m) < IID_MIN_BIN_EXPECTATION)
        m--;
    if (m < 2) {
        chi_finish(&r->chi[0], 0.0, 0);
        snprintf(r->chi[0].note, sizeof r->chi[0].note, "m < 2: too few of the rarer bit");
    } else {
        size_t blocks = n / (size_t)m, cells = (size_t)1 << m;
        uint64_t *occ = ea_xcalloc(cells, sizeof *occ);
        for (size_t b = 0; b < blocks; b++) {
            unsigned v = 0;
            for (int j = 0; j < m; j++)
                v = (v << 1) | s[b * (size_t)m + (size_t)j];
            occ[v]++;
        }
        double t = 0.0;
        for (size_t v = 0; v < cells; v++) {
            int w = __builtin_popcount((unsigned)v);
            double ex = pow(p1, w) * pow(p0, m - w) * (double)blocks;
            t += ((double)occ[v] - ex) * ((double)occ[v] - ex) / ex;
        }
        free(occ);
        chi_finish(&r->chi[0], t, (long)cells - 2);
        snprintf(r->chi[0].note, sizeof r->chi[0].note, "m=%d", m);
    }

    /* §5.2.4: ten parts of floor(L/10) bits; zeros and ones against L/10 (1-p), L/10 p. */
    size_t part = n / 10;
    double e0 = p0 * (double)part, e1 = p1 * (double)part, t = 0.0;
    for (int d = 0; d < 10; d++) {
        uint64_t o1 = 0;
        for (size_t i = (size_t)d * part; i < (size_t)(d + 1) * part; i++)
            o1 += s[i];
        double o0 = (double)(part - o1);
        t += (o0 - e0) * (o0 - e0) / e0 + ((double)o1 - e1) * ((double)o1 - e1) / e1;
    }
    chi_finish(&r->chi[1], t, 9);
}

/* §5.2.5: W, the longest repeated substring; fail if Pr(X >= 1) < 0.001, X the number
 * of pairs of equal W-tuples among the C(L - W + 1, 2) pairs, each equal with
 * probability P_col^W. */
static void lrs_test(const uint8_t *s, size_t n, unsigned k, ea_iid_report *r)
{
    uint64_t counts[256] = {0};
    for (size_t i = 0; i < n; i++)
        counts[s[i]]++;
    double p_col = 0.0;
    for (unsigned v = 0; v < k; v++) {
        double p = (double)counts[v] / (double)n;
        p_col += p * p;
    }
    int32_t *sa = ea_xmalloc(sizeof(int32_t) * n);
    int32_t *lcp = ea_xmalloc(sizeof(int32_t) * n);
    if (ea_suffix_array(s, n, k ? k : 1, sa) != 0) {
        fprintf(stderr, "ea-noniid: %zu samples are too many for the suffix array\n", n);
        exit(1);
    }
    ea_lcp_array(s, n, sa, lcp);
    int32_t w = 0;
    for (size_t i = 1; i < n; i++)
        if (lcp[i] > w)
            w = lcp[i];
    free(sa);
    free(lcp);
    double m = (double)(n - (size_t)w + 1);
    double pairs = m * (m - 1.0) / 2.0;
    double pw = pow(p_col, w);
    double prob = pw >= 1.0 ? 1.0 : -expm1(pairs * log1p(-pw));
    r->lrs_length = w;
    r->lrs_p_col = p_col;
    r->lrs_probability = prob;
    r->lrs_passed = prob >= IID_LRS_ALPHA;
}

/* ---- §5.1's permutations, shared out among threads ---- */

/* Permutations handed out per round: each thread takes every nthreads-th one. */
#define IID_ROUND_PER_THREAD 8

typedef struct {
    stat_ctx c;                /* private scratch; the shared fields copied */
    uint8_t *x;
    const uint8_t *raw;
    uint64_t seed;
    uint32_t first, end, stride;
    const int *need;
    long double (*out)[EA_IID_NSTATS]; /* out[j - round start] */
    uint32_t round_start;
} worker;

static void ctx_alloc(stat_ctx *c)
{
    if (c->binary) {
        c->conv1 = ea_xmalloc(c->nconv);
        c->conv2 = ea_xmalloc(c->nconv);
    } else {
        c->seq = ea_xmalloc(c->n);
    }
    c->lz_head = ea_xmalloc(sizeof(int32_t) << LZ_HASH_BITS);
}

static void ctx_free(stat_ctx *c)
{
    free(c->conv1);
    free(c->conv2);
    free(c->seq);
    free(c->lz_head);
}

/*
 * Permutation j is the raw samples shuffled by Fisher-Yates with a PRNG seeded from
 * (seed, j) alone, so the results do not depend on the number of threads or on their
 * timing.
 */
static void *worker_run(void *arg)
{
    worker *w = arg;
    for (uint32_t j = w->first; j < w->end; j += w->stride) {
        prng g;
        prng_seed(&g, w->seed + (uint64_t)j * 0xd1b54a32d192ed03ULL);
        memcpy(w->x, w->raw, w->c.n);
        shuffle(w->x, w->c.n, &g);
        statistics(&w->c, w->x, w->need, w->out[j - w->round_start]);
    }
    return NULL;
}

/* ---- the whole of §5 ---- */

void ea_iid_tests(const uint8_t *raw, size_t n, uint32_t perms, uint64_t seed,
                  unsigned threads, ea_iid_report *r)
{
    memset(r, 0, sizeof *r);
    if (threads < 1)
        threads = 1;
    r->samples = n;
    r->permutations = perms;
    r->seed = seed;
    r->threads = threads;
    /* §5.1 step 3, scaled: at most 5 in 10,000 on either side fails. */
    r->tail = (uint32_t)((uint64_t)perms * IID_TAIL_PER_10000 / 10000);

    stat_ctx c;
    memset(&c, 0, sizeof c);
    c.n = n;
    int seen[256] = {0};
    for (size_t i = 0; i < n; i++) {
        seen[raw[i]] = 1;
        c.total += raw[i];
    }
    for (unsigned v = 0; v < 256; v++)
        if (seen[v])
            c.map[v] = (uint8_t)c.k++;
    c.binary = c.k == 2;
    c.nconv = c.binary ? (n + 7) / 8 : 0;
    r->distinct_values = c.k;
    r->binary = c.binary;

    uint8_t *sym = ea_xmalloc(n);
    for (size_t i = 0; i < n; i++)
        sym[i] = c.map[raw[i]];
    if (c.binary) {
        c.median2 = 1; /* §5.1.5: 0.5 for binary data */
    } else {
        /* The median of the symbols (the mean of the middle two for even L). */
        uint64_t counts[256] = {0};
        for (size_t i = 0; i < n; i++)
            counts[sym[i]]++;
        size_t lo = (n - 1) / 2, hi = n / 2, seen_so_far = 0;
        int vlo = -1, vhi = -1;
        for (unsigned v = 0; v < c.k; v++) {
            seen_so_far += counts[v];
            if (vlo < 0 && seen_so_far > lo)
                vlo = (int)v;
            if (vhi < 0 && seen_so_far > hi)
                vhi = (int)v;
        }
        c.median2 = vlo + vhi;
    }
    r->median = c.median2 / 2.0;

    /* §5.1 step 1: the statistics of the samples as they are. */
    int need[EA_IID_NSTATS], need_round[EA_IID_NSTATS];
    long double t0[EA_IID_NSTATS];
    for (int i = 0; i < EA_IID_NSTATS; i++)
        need[i] = 1;
    worker *w = ea_xcalloc(threads, sizeof *w);
    pthread_t *tid = ea_xcalloc(threads, sizeof *tid);
    int *running = ea_xcalloc(threads, sizeof *running);
    uint32_t round = threads * IID_ROUND_PER_THREAD;
    long double (*out)[EA_IID_NSTATS] = ea_xcalloc(round, sizeof *out);
    for (unsigned t = 0; t < threads; t++) {
        w[t].c = c;
        ctx_alloc(&w[t].c);
        w[t].x = ea_xmalloc(n);
        w[t].raw = raw;
        w[t].seed = seed;
        w[t].stride = threads;
        w[t].need = need_round;
        w[t].out = out;
    }
    statistics(&w[0].c, raw, need, t0);

    /* §5.1 step 2, in rounds; the results are counted in permutation order, and a
     * statistic is no longer counted once it has more than the tail on both sides: it
     * can no longer fail (NIST's tool stops there too).  So the counts are those of
     * one thread taking the permutations in turn. */
    int open = EA_IID_NSTATS;
    uint32_t start = 0;
    while (start < perms && open > 0) {
        uint32_t end = perms - start < round ? perms : start + round;
        memcpy(need_round, need, sizeof need);
        for (unsigned t = 0; t < threads; t++) {
            w[t].first = start + t;
            w[t].end = end;
            w[t].round_start = start;
            running[t] = 0;
            if (t > 0 && w[t].first < end)
                running[t] = pthread_create(&tid[t], NULL, worker_run, &w[t]) == 0;
        }
        worker_run(&w[0]);
        for (unsigned t = 1; t < threads; t++) {
            if (running[t])
                pthread_join(tid[t], NULL);
            else if (w[t].first < end)
                worker_run(&w[t]); /* no thread: its share done here */
        }
        for (uint32_t j = start; j < end && open > 0; j++) {
            const long double *t = out[j - start];
            for (int i = 0; i < EA_IID_NSTATS; i++) {
                if (!need[i])
                    continue;
                ea_perm_result *p = &r->perm[i];
                if (t[i] > t0[i])
                    p->greater++;
                else if (t[i] == t0[i])
                    p->equal++;
                else
                    p->less++;
                p->permutations++;
                if (p->greater + p->equal > r->tail && p->less + p->equal > r->tail) {
                    need[i] = 0;
                    open--;
                }
            }
            r->permutations_run = j + 1;
        }
        start = end;
    }
    for (unsigned t = 0; t < threads; t++) {
        ctx_free(&w[t].c);
        free(w[t].x);
    }
    free(w);
    free(tid);
    free(running);
    free(out);

    r->passed = 1;
    for (int i = 0; i < EA_IID_NSTATS; i++) {
        ea_perm_result *p = &r->perm[i];
        p->key = stat_names[i].key;
        p->section = stat_names[i].section;
        p->title = stat_names[i].title;
        p->statistic = (double)t0[i];
        if (i == S_EXCURSION)
            p->statistic = (double)(t0[i] / (long double)n);
        p->passed = p->greater + p->equal > r->tail && p->less + p->equal > r->tail;
        r->passed &= p->passed;
    }

    /* §5.2. */
    r->chi[0].key = "independence";
    r->chi[1].key = "goodness_of_fit";
    if (c.binary) {
        r->chi[0].section = "5.2.3";
        r->chi[1].section = "5.2.4";
        chi_binary(sym, n, r);
    } else {
        r->chi[0].section = "5.2.1";
        r->chi[1].section = "5.2.2";
        chi_nonbinary(sym, n, c.k, r);
    }
    r->chi[0].title = "Chi-square independence";
    r->chi[1].title = "Chi-square goodness of fit";
    lrs_test(sym, n, c.k, r);
    r->passed &= r->chi[0].passed && r->chi[1].passed && r->lrs_passed;
    free(sym);
}
