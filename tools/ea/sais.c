/*
 * Suffix array by induced sorting (SA-IS: Nong, Zhang and Chan, "Two Efficient
 * Algorithms for Linear Time Suffix Array Construction", 2011) and the LCP array by
 * Kasai et al. (2001).  Both are O(n); the t-tuple and LRS estimates (§6.3.5, §6.3.6)
 * need tuple counts for every length, which these give without an O(n^2) scan.
 */
#include <stdlib.h>
#include <string.h>

#include "ea.h"

#define TYPE_L 0
#define TYPE_S 1

static int is_lms(const uint8_t *type, int32_t i)
{
    return i > 0 && type[i] == TYPE_S && type[i - 1] == TYPE_L;
}

static void bucket_bounds(const int32_t *t, int32_t n, int32_t k, int32_t *bkt, int ends)
{
    memset(bkt, 0, sizeof(int32_t) * (size_t)k);
    for (int32_t i = 0; i < n; i++)
        bkt[t[i]]++;
    int32_t sum = 0;
    for (int32_t c = 0; c < k; c++) {
        sum += bkt[c];
        bkt[c] = ends ? sum : sum - bkt[c];
    }
}

static void induce(const int32_t *t, int32_t *sa, const uint8_t *type, int32_t n, int32_t k,
                   int32_t *bkt)
{
    bucket_bounds(t, n, k, bkt, 0);
    for (int32_t i = 0; i < n; i++) {
        int32_t j = sa[i] - 1;
        if (sa[i] > 0 && type[j] == TYPE_L)
            sa[bkt[t[j]]++] = j;
    }
    bucket_bounds(t, n, k, bkt, 1);
    for (int32_t i = n - 1; i >= 0; i--) {
        int32_t j = sa[i] - 1;
        if (sa[i] > 0 && type[j] == TYPE_S)
            sa[--bkt[t[j]]] = j;
    }
}

/* t[0..n-1] over 0..k-1 with t[n-1] == 0 the unique smallest symbol. */
static void sais(const int32_t *t, int32_t *sa, int32_t n, int32_t k)
{
    uint8_t *type = ea_xmalloc((size_t)n);
    int32_t *bkt = ea_xmalloc(sizeof(int32_t) * (size_t)k);

    type[n - 1] = TYPE_S;
    for (int32_t i = n - 2; i >= 0; i--)
        type[i] = (t[i] < t[i + 1] || (t[i] == t[i + 1] && type[i + 1] == TYPE_S)) ? TYPE_S
                                                                                  : TYPE_L;

    /* Stage 1: sort the LMS substrings by one induced sort. */
    bucket_bounds(t, n, k, bkt, 1);
    for (int32_t i = 0; i < n; i++)
        sa[i] = -1;
    for (int32_t i = 1; i < n; i++)
        if (is_lms(type, i))
            sa[--bkt[t[i]]] = i;
    induce(t, sa, type, n, k, bkt);

    /* Compact the sorted LMS positions into sa[0..n1-1]. */
    int32_t n1 = 0;
    for (int32_t i = 0; i < n; i++)
        if (is_lms(type, sa[i]))
            sa[n1++] = sa[i];

    /* Name the LMS substrings: equal substrings share a name. */
    int32_t *name = ea_xmalloc(sizeof(int32_t) * (size_t)n);
    for (int32_t i = 0; i < n; i++)
        name[i] = -1;
    int32_t names = 0, prev = -1;
    for (int32_t i = 0; i < n1; i++) {
        int32_t pos = sa[i];
        int diff = 0;
        for (int32_t d = 0; d < n; d++) {
            if (prev == -1 || t[pos + d] != t[prev + d] || type[pos + d] != type[prev + d]) {
                diff = 1;
                break;
            }
            if (d > 0 && (is_lms(type, pos + d) || is_lms(type, prev + d)))
                break;
        }
        if (diff) {
            names++;
            prev = pos;
        }
        name[pos] = names - 1;
    }

    /* The reduced string, in text order. */
    int32_t *t1 = ea_xmalloc(sizeof(int32_t) * (size_t)n1);
    int32_t *pos1 = ea_xmalloc(sizeof(int32_t) * (size_t)n1);
    for (int32_t i = 0, j = 0; i < n; i++)
        if (name[i] >= 0) {
            t1[j] = name[i];
            pos1[j++] = i;
        }
    free(name);

    /* Stage 2: sort the LMS suffixes, recursively if names repeat. */
    int32_t *sa1 = ea_xmalloc(sizeof(int32_t) * (size_t)n1);
    if (names < n1) {
        sais(t1, sa1, n1, names);
    } else {
        for (int32_t i = 0; i < n1; i++)
            sa1[t1[i]] = i;
    }
    free(t1);

    /* Stage 3: place the sorted LMS suffixes at their buckets' ends, induce the rest. */
    bucket_bounds(t, n, k, bkt, 1);
    for (int32_t i = 0; i < n; i++)
        sa[i] = -1;
    for (int32_t i = n1 - 1; i >= 0; i--) {
        int32_t j = pos1[sa1[i]];
        sa[--bkt[t[j]]] = j;
    }
    free(sa1);
    free(pos1);
    induce(t, sa, type, n, k, bkt);

    free(bkt);
    free(type);
}

int ea_suffix_array(const uint8_t *s, size_t n, unsigned k, int32_t *sa)
{
    if (n == 0 || n > EA_SA_MAX_SYMBOLS)
        return -1;
    /* Shift every symbol up by one and append the sentinel 0. */
    int32_t len = (int32_t)n + 1;
    int32_t *t = ea_xmalloc(sizeof(int32_t) * (size_t)len);
    int32_t *full = ea_xmalloc(sizeof(int32_t) * (size_t)len);
    for (size_t i = 0; i < n; i++)
        t[i] = (int32_t)s[i] + 1;
    t[n] = 0;
    sais(t, full, len, (int32_t)k + 1);
    /* full[0] is the sentinel suffix. */
    memcpy(sa, full + 1, sizeof(int32_t) * n);
    free(full);
    free(t);
    return 0;
}

/* lcp[i] = longest common prefix of the suffixes sa[i-1] and sa[i]; lcp[0] = 0. */
int ea_lcp_array(const uint8_t *s, size_t n, const int32_t *sa, int32_t *lcp)
{
    int32_t *rank = ea_xmalloc(sizeof(int32_t) * n);
    for (size_t i = 0; i < n; i++)
        rank[sa[i]] = (int32_t)i;
    size_t h = 0;
    lcp[0] = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t r = rank[i];
        if (r > 0) {
            size_t j = (size_t)sa[r - 1];
            while (i + h < n && j + h < n && s[i + h] == s[j + h])
                h++;
            lcp[r] = (int32_t)h;
            if (h > 0)
                h--;
        } else {
            h = 0;
        }
    }
    free(rank);
    return 0;
}
