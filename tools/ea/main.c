/*
 * ea-noniid: SP 800-90B non-IID min-entropy assessment of a file of samples, one
 * sample a byte (the low BITS bits of each byte), on the host.
 *
 *   ea-noniid [-b BITS] [--json] [-v] FILE
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
    fprintf(f, "usage: " PROG " [-b BITS] [--json] [-v] FILE\n"
               "  FILE     samples, one per byte (at least %d; SP 800-90B asks for %d)\n"
               "  -b BITS  use the low BITS bits of each byte, 1..8 (default 8)\n"
               "  --json   print one JSON object instead of the table\n"
               "  -v       add each estimator's intermediate values to the table\n",
            EA_MIN_SAMPLES, EA_FULL_SAMPLES);
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

int main(int argc, char **argv)
{
    unsigned bits = EA_MAX_BITS;
    int json = 0, verbose = 0;
    const char *path = NULL;
    char msg[512];

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "-v") == 0) {
            verbose = 1;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "-b") == 0 || strncmp(a, "-b", 2) == 0) {
            const char *val = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
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
        die_input("no FILE given (usage: " PROG " [-b BITS] [--json] [-v] FILE)");

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
    uint8_t *raw = ea_xmalloc(n);
    if (fread(raw, 1, n, f) != n) {
        snprintf(msg, sizeof msg, "cannot read '%s': %s", path,
                 ferror(f) ? strerror(errno) : "short read");
        die_input(msg);
    }
    fclose(f);

    /* The low BITS bits of each byte; symbols renumbered 0..k-1 in value order (the
     * order keeps the estimators' "largest value" tie-breaks). */
    const unsigned mask = (1u << bits) - 1;
    unsigned map[256], k = 0;
    int seen[256] = {0};
    for (size_t i = 0; i < n; i++) {
        raw[i] &= (uint8_t)mask;
        seen[raw[i]] = 1;
    }
    for (unsigned v = 0; v < 256; v++)
        if (seen[v])
            map[v] = k++;
    uint8_t *sym = ea_xmalloc(n);
    for (size_t i = 0; i < n; i++)
        sym[i] = (uint8_t)map[raw[i]];

    double t_start = now();
    track lit, bit;
    memset(&lit, 0, sizeof lit);
    memset(&bit, 0, sizeof bit);
    int binary = k <= 2;
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

    if (json) {
        printf("{\"file\": ");
        json_string(path);
        printf(", \"samples\": %zu, \"bits_per_sample\": %u, \"distinct_values\": %u",
               n, bits, k);
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
        printf(", \"full_assessment\": %s, \"seconds\": %.3f}\n",
               n >= EA_FULL_SAMPLES ? "true" : "false", elapsed);
    } else {
        printf("file: %s\n", path);
        printf("samples: %zu, %u bit(s) each, %u distinct value(s)%s\n", n, bits, k,
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
    }
    free(sym);
    free(raw);
    return 0;
}
