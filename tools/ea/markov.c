/* SP 800-90B §6.3.3: the Markov estimate (binary samples only). */
#include <stdio.h>

#include "ea.h"

/* The estimate bounds the probability of the most likely 128-bit output (step 3). */
#define MARKOV_SEQ_BITS 128

/* log2 of a probability, -inf for 0 (a sequence that cannot occur). */
static double lg(double p)
{
    return p > 0.0 ? log2(p) : -INFINITY;
}

double ea_markov(const uint8_t *s, size_t n, ea_info *info)
{
    uint64_t c0 = 0, c00 = 0, c10 = 0;

    if (n < 2)
        return EA_NA;
    /* Step 2 counts transitions out of s[0..n-2]. */
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] == 0) {
            c0++;
            if (s[i + 1] == 0)
                c00++;
        } else if (s[i + 1] == 0) {
            c10++;
        }
    }
    uint64_t c1 = (n - 1) - c0;
    double p00 = c0 ? (double)c00 / (double)c0 : 0.0;
    double p01 = c0 ? 1.0 - p00 : 0.0;
    double p10 = c1 ? (double)c10 / (double)c1 : 0.0;
    double p11 = c1 ? 1.0 - p10 : 0.0;
    /* Step 1: the initial probabilities over the whole sequence. */
    uint64_t zeros = c0 + (s[n - 1] == 0);
    double p0 = (double)zeros / (double)n;
    double p1 = 1.0 - p0;

    /* Step 3: log2 probabilities of the six candidate most likely sequences. */
    const double r = MARKOV_SEQ_BITS;
    double cand[6] = {
        lg(p0) + (r - 1) * lg(p00),                       /* 00...0 */
        lg(p0) + (r / 2) * lg(p01) + (r / 2 - 1) * lg(p10), /* 0101...01 */
        lg(p0) + lg(p01) + (r - 2) * lg(p11),             /* 011...1 */
        lg(p1) + lg(p10) + (r - 2) * lg(p00),             /* 100...0 */
        lg(p1) + (r / 2) * lg(p10) + (r / 2 - 1) * lg(p01), /* 1010...10 */
        lg(p1) + (r - 1) * lg(p11),                       /* 11...1 */
    };
    double best = -INFINITY;
    for (int i = 0; i < 6; i++)
        if (cand[i] > best)
            best = cand[i];

    /* Step 4: min(-log2(p_max)/128, 1). */
    double h = -best / r;
    if (!(h < 1.0))
        h = 1.0;
    if (h < 0.0)
        h = 0.0;
    if (info)
        snprintf(info->note, sizeof info->note,
                 "P0=%.6g P00=%.6g P01=%.6g P10=%.6g P11=%.6g log2(p_max)=%.6g", p0, p00,
                 p01, p10, p11, best);
    return h;
}
