/* SP 800-90B §6.3.1: the Most Common Value estimate. */
#include <stdio.h>
#include <stdlib.h>

#include "ea.h"

double ea_mcv(const uint8_t *s, size_t n, unsigned k, ea_info *info)
{
    uint64_t counts[256] = {0};
    uint64_t mode = 0;

    if (n < 2 || k == 0 || k > 256)
        return EA_NA;
    for (size_t i = 0; i < n; i++)
        counts[s[i]]++;
    for (unsigned v = 0; v < k; v++)
        if (counts[v] > mode)
            mode = counts[v];

    /* Step 1: p-hat = mode count / L.  Step 2: its 99 % upper bound. */
    double p_hat = (double)mode / (double)n;
    double p_u = p_hat + EA_Z_ALPHA * sqrt(p_hat * (1.0 - p_hat) / (double)(n - 1));
    if (p_u > 1.0)
        p_u = 1.0;
    if (info)
        snprintf(info->note, sizeof info->note, "mode=%llu p_hat=%.6g p_u=%.6g",
                 (unsigned long long)mode, p_hat, p_u);
    /* Step 3. */
    return -log2(p_u);
}
