/*
 * ea-noniid: SP 800-90B non-IID min-entropy assessment of a file of samples, one
 * sample a byte, on the host; with --iid, also the §5 tests of the IID assumption.
 *
 *   ea-noniid [-b BITS] [--json] [-v] [--iid [--iid-perms P] [--iid-samples N]
 *             [--iid-threads T]] FILE
 *
 * BITS, the sample width, is inferred when not given, as NIST's tool does: the fewest
 * bits that hold the largest sample.  A -b narrower than a sample is refused.
 *
 * Following §3.1.3: for non-binary samples the estimators that apply to them
 * (§6.3.1, §6.3.5-§6.3.10) run on the samples ("literal" track, H_original), and all ten
 * run on the bitstring of the samples, BITS bits each, most significant first
 * ("bitstring" track, H_bitstring per bit).  The assessment is
 * min(H_original, BITS x H_bitstring), never more than BITS.  When the samples take at
 * most two values they are binary: all ten run on them and there is no bitstring track.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ea.h"

#define PROG "ea-noniid"

/*
 * Fewest samples accepted.  The binding needs: the compression estimate needs more
 * than d = 1000 blocks of b = 6 bits (§6.3.4), 6006 bits, which with -b 1 is 6006
 * samples; MultiMCW's largest window is 4095 samples (§6.3.7).  Rounded up so every
 * estimator has some thousands of predictions or blocks to work from.
 */
#define EA_MIN_SAMPLES 10000
/* §3.1.1: a full assessment uses at least 1,000,000 samples; fewer are assessed but
 * flagged. */
#define EA_FULL_SAMPLES 1000000
/* Widest sample: one byte. */
#define EA_MAX_BITS 8
/* --iid: by default the first 1,000,000 samples (SP 800-90B's full data set) are
 * tested; at most 10,000,000 (the excursion statistic is exact in 64 bits up to there). */
#define EA_IID_DEFAULT_SAMPLES 1000000
#define EA_IID_MAX_SAMPLES 10000000
#define EA_IID_MAX_PERMUTATIONS 1000000
#define EA_IID_MAX_THREADS 64
/* The permutations' PRNG seed: fixed, so every run gives the same result. */
#define EA_IID_SEED 0x90b5eedULL

/* Exit statuses. */
#define EXIT_BAD_INPUT 2

enum { E_MCV, E_COLLISION, E_MARKOV, E_COMPRESSION, E_TTUPLE, E_LRS, E_MULTI_MCW, E_LAG,
       E_MULTI_MMC, E_LZ78Y, E_COUNT };

static const struct {
    const char *key, *section, *title;
    int binary_only;
} est[E_COUNT] = {
    {"mcv", "6.3.1", "Most Common Value", 0},
    {"collision", "6.3.2", "Collision", 1},
    {"markov", "6.3.3", "Markov", 1},
    {"compression", "6.3.4", "Compression", 1},
    {"t_tuple", "6.3.5", "t-Tuple", 0},
    {"lrs", "6.3.6", "Longest Repeated Substring", 0},
    {"multi_mcw", "6.3.7", "MultiMCW prediction", 0},
    {"lag", "6.3.8", "Lag prediction", 0},
    {"multi_mmc", "6.3.9", "MultiMMC prediction", 0},
    {"lz78y", "6.3.10", "LZ78Y prediction", 0},
};

typedef struct {
    int ran;
    double h[E_COUNT]; /* per symbol of the track; NaN when not applicable or not run */
    ea_info info[E_COUNT];
    double seconds[E_COUNT];
} track;

void *ea_xmalloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (!p) {
        fprintf(stderr, PROG ": out of memory (%zu bytes)\n", size);
        exit(1);
    }
    return p;
}

void *ea_xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, PROG ": out of memory (%zu x %zu bytes)\n", count, size);
        exit(1);
    }
    return p;
}

unsigned ea_symbol_bits(unsigned k)
{
    unsigned b = 1;
    while ((1u << b) < k)
        b++;
    return b;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: " PROG " [-b BITS] [--json] [-v] [--iid [--iid-perms P] [--iid-samples N]\n"
               "                 [--iid-threads T]] FILE\n"
               "  FILE     samples, one per byte (at least %d; SP 800-90B asks for %d)\n"
               "  -b BITS  bits per sample, 1..8; every sample must fit (default: the\n"
               "           fewest bits that hold the largest sample)\n"
               "  --json   print one JSON object instead of the table\n"
               "  -v       add each estimator's intermediate values to the table\n"
               "  --iid    also run SP 800-90B section 5's IID tests (permutation tests,\n"
               "           chi-square tests, longest repeated substring test)\n"
               "  --iid-perms P    permutations for section 5.1 (default %d)\n"
               "  --iid-samples N  test the first N samples (default %d, at most %d)\n"
               "  --iid-threads T  threads for the permutations (default: one per CPU);\n"
               "                   the result does not depend on T\n",
            EA_MIN_SAMPLES, EA_FULL_SAMPLES, EA_IID_PERMUTATIONS, EA_IID_DEFAULT_SAMPLES,
            EA_IID_MAX_SAMPLES);
}

static void die_input(const char *msg)
{
    fprintf(stderr, PROG ": %s\n", msg);
    exit(EXIT_BAD_INPUT);
}

/* Run the estimators on one track: binary tracks run all ten. */
static void run_track(track *t, const uint8_t *s, size_t n, unsigned k, int binary)
{
    double t0;
    t->ran = 1;
    for (int e = 0; e < E_COUNT; e++) {
        t->h[e] = EA_NA;
        t->info[e].note[0] = '\0';
        t->seconds[e] = 0.0;
    }
#define TIMED(e, expr)                                                                    \
    do {                                                                                  \
        t0 = now();                                                                       \
        t->h[e] = (expr);                                                                 \
        t->seconds[e] = now() - t0;                                                       \
    } while (0)
    TIMED(E_MCV, ea_mcv(s, n, k, &t->info[E_MCV]));
    if (binary) {
        TIMED(E_COLLISION, ea_collision(s, n, &t->info[E_COLLISION]));
        TIMED(E_MARKOV, ea_markov(s, n, &t->info[E_MARKOV]));
        TIMED(E_COMPRESSION, ea_compression(s, n, &t->info[E_COMPRESSION]));
    }
    t0 = now();
    if (ea_tuple_lrs(s, n, k, &t->h[E_TTUPLE], &t->h[E_LRS], &t->info[E_TTUPLE],
                     &t->info[E_LRS]) != 0) {
        /* main() checks the sizes before any estimator runs: not reached. */
        fprintf(stderr, PROG ": %zu symbols are too many for the suffix array\n", n);
        exit(1);
    }
    t->seconds[E_TTUPLE] = now() - t0;
    TIMED(E_MULTI_MCW, ea_multi_mcw(s, n, k, &t->info[E_MULTI_MCW]));
    TIMED(E_LAG, ea_lag(s, n, k, &t->info[E_LAG]));
    TIMED(E_MULTI_MMC, ea_multi_mmc(s, n, k, &t->info[E_MULTI_MMC]));
    TIMED(E_LZ78Y, ea_lz78y(s, n, k, &t->info[E_LZ78Y]));
#undef TIMED
    for (int e = 0; e < E_COUNT; e++)
        t->h[e] += 0.0; /* -log2(1) is -0: print it as 0 */
}

static void json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

static void json_number(double v)
{
    if (isnan(v))
        printf("null");
    else
        printf("%.6f", v);
}

static void print_num(double v, int width)
{
    if (isnan(v))
        printf("%*s", width, "n/a");
    else
        printf("%*.4f", width, v);
}

/* A whole-number option value in lo..hi, or a one-line error. */
static unsigned long option_number(const char *opt, const char *val, unsigned long lo,
                                   unsigned long hi)
{
    char msg[256], *end;
    unsigned long v;
    if (!val) {
        snprintf(msg, sizeof msg, "%s needs a value (%lu..%lu)", opt, lo, hi);
        die_input(msg);
    }
    errno = 0;
    v = strtoul(val, &end, 10);
    if (errno || *end || end == val || val[0] == '-' || v < lo || v > hi) {
        snprintf(msg, sizeof msg, "bad %s '%s': must be %lu..%lu", opt, val, lo, hi);
        die_input(msg);
    }
    return v;
}

/* "--name VALUE" or "--name=VALUE": the value, advancing *i past it; NULL if a is not
 * the option. */
static const char *long_option(const char *name, int argc, char **argv, int *i, int *matched)
{
    const char *a = argv[*i];
    size_t len = strlen(name);
    *matched = 0;
    if (strncmp(a, name, len) != 0)
        return NULL;
    if (a[len] == '=') {
        *matched = 1;
        return a + len + 1;
    }
    if (a[len] != '\0')
        return NULL;
    *matched = 1;
    return *i + 1 < argc ? argv[++*i] : NULL;
}

static void print_iid_table(const ea_iid_report *r, double h_mcv)
{
    printf("\nIID tests (SP 800-90B section 5) on the first %zu samples (%u distinct%s):\n",
           r->samples, r->distinct_values, r->binary ? ", binary" : "");
    printf("5.1 permutation tests: %u permutations asked, %u run (a statistic fails when at "
           "most %u permuted values are >= or <= the original's)\n",
           r->permutations, r->permutations_run, r->tail);
    printf("%-9s %-31s %14s %8s %8s %8s %7s\n", "SP800-90B", "statistic", "value", "greater",
           "equal", "less", "result");
    for (int i = 0; i < EA_IID_NSTATS; i++) {
        const ea_perm_result *p = &r->perm[i];
        printf("%-9s %-31s %14.4f %8u %8u %8u %7s\n", p->section, p->title, p->statistic,
               p->greater, p->equal, p->less, p->passed ? "pass" : "FAIL");
    }
    for (int i = 0; i < 2; i++) {
        const ea_chi_result *c = &r->chi[i];
        if (c->applicable)
            printf("%-9s %-31s T=%.4g df=%ld p=%.4g%s%s %s\n", c->section, c->title,
                   c->statistic, c->df, c->p_value, c->note[0] ? " " : "", c->note,
                   c->passed ? "pass" : "FAIL");
        else
            printf("%-9s %-31s not applicable (df=%ld%s%s) pass\n", c->section, c->title,
                   c->df, c->note[0] ? "; " : "", c->note);
    }
    printf("%-9s %-31s W=%d P_col=%.6g Pr(X>=1)=%.4g %s\n", "5.2.5",
           "Longest repeated substring", r->lrs_length, r->lrs_p_col, r->lrs_probability,
           r->lrs_passed ? "pass" : "FAIL");
    if (r->passed) {
        printf("IID assumption: not rejected (every test passed); for IID samples SP 800-90B "
               "section 6.1 estimates with MCV alone: %.4f bits per sample\n", h_mcv);
    } else {
        printf("IID assumption: rejected (failed:");
        for (int i = 0; i < EA_IID_NSTATS; i++)
            if (!r->perm[i].passed)
                printf(" %s", r->perm[i].key);
        for (int i = 0; i < 2; i++)
            if (!r->chi[i].passed)
                printf(" chi_square_%s", r->chi[i].key);
        if (!r->lrs_passed)
            printf(" lrs");
        printf(")\n");
    }
}

static void print_iid_json(const ea_iid_report *r, double h_mcv, double seconds)
{
    printf("{\"samples\": %zu, \"distinct_values\": %u, \"binary\": %s, \"median\": %.1f",
           r->samples, r->distinct_values, r->binary ? "true" : "false", r->median);
    printf(", \"permutations\": %u, \"permutations_run\": %u, \"tail\": %u, \"seed\": %llu"
           ", \"threads\": %u",
           r->permutations, r->permutations_run, r->tail, (unsigned long long)r->seed,
           r->threads);
    printf(", \"permutation_tests\": {");
    for (int i = 0; i < EA_IID_NSTATS; i++) {
        const ea_perm_result *p = &r->perm[i];
        printf("%s\"%s\": {\"section\": \"%s\", \"statistic\": ", i ? ", " : "", p->key,
               p->section);
        json_number(p->statistic);
        printf(", \"greater\": %u, \"equal\": %u, \"less\": %u, \"permutations\": %u"
               ", \"passed\": %s}",
               p->greater, p->equal, p->less, p->permutations, p->passed ? "true" : "false");
    }
    printf("}, \"chi_square\": {");
    for (int i = 0; i < 2; i++) {
        const ea_chi_result *c = &r->chi[i];
        printf("%s\"%s\": {\"section\": \"%s\", \"statistic\": ", i ? ", " : "", c->key,
               c->section);
        json_number(c->statistic);
        printf(", \"df\": %ld, \"p_value\": ", c->df);
        if (isnan(c->p_value))
            printf("null");
        else
            printf("%.6g", c->p_value);
        printf(", \"applicable\": %s, \"passed\": %s, \"note\": ",
               c->applicable ? "true" : "false", c->passed ? "true" : "false");
        json_string(c->note);
        printf("}");
    }
    printf("}, \"lrs\": {\"section\": \"5.2.5\", \"length\": %d, \"p_col\": %.6g"
           ", \"probability\": %.6g, \"passed\": %s}",
           r->lrs_length, r->lrs_p_col, r->lrs_probability, r->lrs_passed ? "true" : "false");
    printf(", \"passed\": %s, \"mcv_min_entropy\": %.6f, \"seconds\": %.3f}",
           r->passed ? "true" : "false", h_mcv, seconds);
}

int main(int argc, char **argv)
{
    unsigned bits = 0; /* 0: infer */
    int json = 0, verbose = 0, iid = 0;
    unsigned long iid_perms = EA_IID_PERMUTATIONS, iid_samples = EA_IID_DEFAULT_SAMPLES;
    unsigned long iid_threads = 0; /* 0: one per online CPU */
    const char *path = NULL;
    char msg[512];

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        int matched;
        if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "-v") == 0) {
            verbose = 1;
        } else if (strcmp(a, "--iid") == 0) {
            iid = 1;
        } else if (val = long_option("--iid-perms", argc, argv, &i, &matched), matched) {
            iid_perms = option_number("--iid-perms", val, 1, EA_IID_MAX_PERMUTATIONS);
        } else if (val = long_option("--iid-samples", argc, argv, &i, &matched), matched) {
            iid_samples = option_number("--iid-samples", val, EA_MIN_SAMPLES,
                                        EA_IID_MAX_SAMPLES);
        } else if (val = long_option("--iid-threads", argc, argv, &i, &matched), matched) {
            iid_threads = option_number("--iid-threads", val, 1, EA_IID_MAX_THREADS);
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strncmp(a, "-b", 2) == 0) {
            val = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
            char *end;
            long b;
            if (!val)
                die_input("-b needs a value: the bits per sample, 1..8");
            errno = 0;
            b = strtol(val, &end, 10);
            if (errno || *end || end == val || b < 1 || b > EA_MAX_BITS) {
                snprintf(msg, sizeof msg, "bad -b '%s': bits per sample must be 1..%d", val,
                         EA_MAX_BITS);
                die_input(msg);
            }
            bits = (unsigned)b;
        } else if (a[0] == '-' && a[1] != '\0') {
            snprintf(msg, sizeof msg, "unknown option '%s' (try --help)", a);
            die_input(msg);
        } else if (path) {
            snprintf(msg, sizeof msg, "one FILE only (got '%s' and '%s')", path, a);
            die_input(msg);
        } else {
            path = a;
        }
    }
    if (!path)
        die_input("no FILE given (usage: " PROG " [-b BITS] [--json] [-v] [--iid] FILE)");

    /* Read the samples. */
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(msg, sizeof msg, "cannot open '%s': %s", path, strerror(errno));
        die_input(msg);
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(msg, sizeof msg, "'%s' is not a regular file", path);
        die_input(msg);
    }
    size_t n = (size_t)st.st_size;
    if (n == 0) {
        snprintf(msg, sizeof msg, "'%s' is empty", path);
        die_input(msg);
    }
    if (n < EA_MIN_SAMPLES) {
        snprintf(msg, sizeof msg, "'%s' has %zu samples; at least %d are needed", path, n,
                 EA_MIN_SAMPLES);
        die_input(msg);
    }
    /* The literal track's suffix array: checked on the size alone, before reading. */
    if (n > EA_SA_MAX_SYMBOLS) {
        snprintf(msg, sizeof msg,
                 "'%s' has %zu samples; the suffix array (t-Tuple, LRS) takes at most %zu",
                 path, n, EA_SA_MAX_SYMBOLS);
        die_input(msg);
    }
    uint8_t *raw = ea_xmalloc(n);
    if (fread(raw, 1, n, f) != n) {
        snprintf(msg, sizeof msg, "cannot read '%s': %s", path,
                 ferror(f) ? strerror(errno) : "short read");
        die_input(msg);
    }
    fclose(f);

    /* The sample width: the fewest bits that hold every sample (at least 1).  As NIST's
     * tool does, that is the width when -b is not given, and a -b narrower than it is
     * refused rather than masking the samples' high bits. */
    unsigned all_bits = 0, k = 0;
    int seen[256] = {0};
    for (size_t i = 0; i < n; i++) {
        all_bits |= raw[i];
        seen[raw[i]] = 1;
    }
    unsigned need_bits = 1;
    while (need_bits < EA_MAX_BITS && (all_bits >> need_bits) != 0)
        need_bits++;
    int bits_inferred = bits == 0;
    if (bits_inferred) {
        bits = need_bits;
    } else if (need_bits > bits) {
        size_t i = 0;
        while ((raw[i] >> bits) == 0)
            i++;
        snprintf(msg, sizeof msg,
                 "'%s': the sample at byte offset %zu is %u, which does not fit in -b %u "
                 "(0..%u); the samples need %u bits",
                 path, i, raw[i], bits, (1u << bits) - 1, need_bits);
        die_input(msg);
    }

    /* Symbols renumbered 0..k-1 in value order (the order keeps the estimators'
     * "largest value" tie-breaks). */
    unsigned map[256];
    for (unsigned v = 0; v < 256; v++)
        if (seen[v])
            map[v] = k++;
    int binary = k <= 2;
    /* The bitstring track's suffix array: BITS symbols a sample.  Checked before any
     * estimator runs. */
    if (!binary && (uint64_t)n * bits > EA_SA_MAX_SYMBOLS) {
        snprintf(msg, sizeof msg,
                 "'%s' has %zu samples of %u bits: the bitstring's %llu bits exceed the "
                 "suffix array's limit of %zu",
                 path, n, bits, (unsigned long long)n * bits, EA_SA_MAX_SYMBOLS);
        die_input(msg);
    }
    uint8_t *sym = ea_xmalloc(n);
    for (size_t i = 0; i < n; i++)
        sym[i] = (uint8_t)map[raw[i]];

    double t_start = now();
    track lit, bit;
    memset(&lit, 0, sizeof lit);
    memset(&bit, 0, sizeof bit);
    run_track(&lit, sym, n, binary ? 2 : k, binary);
    if (!binary) {
        /* §3.1.3: the bitstring, each sample's BITS bits most significant first. */
        size_t nb = n * bits;
        uint8_t *bs = ea_xmalloc(nb);
        for (size_t i = 0; i < n; i++)
            for (unsigned j = 0; j < bits; j++)
                bs[i * bits + j] = (raw[i] >> (bits - 1 - j)) & 1u;
        run_track(&bit, bs, nb, 2, 1);
        free(bs);
    }
    double elapsed = now() - t_start;

    /* Per estimator: the lower of its literal estimate and BITS x its bitstring
     * estimate; the assessment is the lowest of those, at most BITS. */
    double per_sample[E_COUNT];
    const char *source[E_COUNT];
    double h_min = bits;
    int limiting = -1;
    const char *limiting_track = "none";
    for (int e = 0; e < E_COUNT; e++) {
        per_sample[e] = EA_NA;
        source[e] = "none";
        if (!isnan(lit.h[e])) {
            per_sample[e] = lit.h[e];
            source[e] = "literal";
        }
        if (bit.ran && !isnan(bit.h[e]) &&
            (isnan(per_sample[e]) || bits * bit.h[e] < per_sample[e])) {
            per_sample[e] = bits * bit.h[e];
            source[e] = "bitstring";
        }
        if (!isnan(per_sample[e]) && per_sample[e] < h_min) {
            h_min = per_sample[e];
            limiting = e;
            limiting_track = source[e];
        }
    }
    if (!(h_min > 0.0))
        h_min = 0.0;

    ea_iid_report iid_report;
    double iid_seconds = 0.0;
    if (iid) {
        double t0 = now();
        if (iid_threads == 0) {
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            iid_threads = cpus < 1 ? 1 : cpus > EA_IID_MAX_THREADS ? EA_IID_MAX_THREADS
                                                                  : (unsigned long)cpus;
        }
        ea_iid_tests(raw, n < iid_samples ? n : iid_samples, (uint32_t)iid_perms, EA_IID_SEED,
                     (unsigned)iid_threads, &iid_report);
        iid_seconds = now() - t0;
    }

    if (json) {
        printf("{\"file\": ");
        json_string(path);
        printf(", \"samples\": %zu, \"bits_per_sample\": %u, \"bits_inferred\": %s"
               ", \"bits_needed\": %u, \"distinct_values\": %u",
               n, bits, bits_inferred ? "true" : "false", need_bits, k);
        printf(", \"estimators\": {");
        for (int e = 0; e < E_COUNT; e++) {
            printf("%s\"%s\": ", e ? ", " : "", est[e].key);
            json_number(per_sample[e]);
        }
        printf("}, \"literal\": {");
        for (int e = 0; e < E_COUNT; e++) {
            printf("%s\"%s\": ", e ? ", " : "", est[e].key);
            json_number(lit.h[e]);
        }
        printf("}, \"bitstring\": ");
        if (bit.ran) {
            printf("{");
            for (int e = 0; e < E_COUNT; e++) {
                printf("%s\"%s\": ", e ? ", " : "", est[e].key);
                json_number(bit.h[e]);
            }
            printf("}");
        } else {
            printf("null");
        }
        printf(", \"min_entropy\": %.6f, \"limiting\": ", h_min);
        if (limiting >= 0)
            json_string(est[limiting].key);
        else
            printf("null");
        printf(", \"limiting_track\": ");
        json_string(limiting_track);
        printf(", \"full_assessment\": %s, \"seconds\": %.3f, \"iid\": ",
               n >= EA_FULL_SAMPLES ? "true" : "false", elapsed);
        if (iid)
            print_iid_json(&iid_report, per_sample[E_MCV], iid_seconds);
        else
            printf("null");
        printf("}\n");
    } else {
        printf("file: %s\n", path);
        printf("samples: %zu, %u bit(s) each (%s), %u distinct value(s)%s\n", n, bits,
               bits_inferred ? "inferred: the fewest bits that hold the largest sample"
                             : (need_bits < bits ? "given by -b; the samples need fewer"
                                                 : "given by -b"),
               k,
               n >= EA_FULL_SAMPLES ? ""
                                    : " (fewer than SP 800-90B's 1,000,000: not a full assessment)");
        printf("%-6s  %-27s %9s %10s %11s\n", "SP800-90B", "estimator", "literal",
               bit.ran ? "bitstring" : "", "per sample");
        for (int e = 0; e < E_COUNT; e++) {
            printf("%-9s %-27s", est[e].section, est[e].title);
            print_num(lit.h[e], 9);
            if (bit.ran)
                print_num(bit.h[e], 11);
            else
                printf("%11s", "");
            print_num(per_sample[e], 12);
            printf("%s\n", e == limiting ? "  <- limiting" : "");
            if (verbose) {
                if (lit.info[e].note[0])
                    printf("          literal: %s (%.2f s)\n", lit.info[e].note,
                           lit.seconds[e]);
                if (bit.ran && bit.info[e].note[0])
                    printf("          bitstring: %s (%.2f s)\n", bit.info[e].note,
                           bit.seconds[e]);
            }
        }
        if (bit.ran)
            printf("bitstring column: bits per bit; per sample = min(literal, %u x bitstring)\n",
                   bits);
        printf("min-entropy: %.4f bits per sample (limited by %s, %s track; %.1f s)\n", h_min,
               limiting >= 0 ? est[limiting].key : "the sample width", limiting_track, elapsed);
        if (iid) {
            print_iid_table(&iid_report, per_sample[E_MCV]);
            printf("(IID tests: %.1f s)\n", iid_seconds);
        }
    }
    free(sym);
    free(raw);
    return 0;
}
