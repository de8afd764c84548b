/*
 * The host-only equivalent of hip_saxpy.hip: the same arrays, copies and argv[2] passes of
 * y = a*x + y on the CPU (the "device" arrays are plain malloc'd memory; the copies memcpy).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static void saxpy(float a, const float *x, float *y, int n)
{
    for (int i = 0; i < n; i++)
        y[i] = a * x[i] + y[i];
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
    int rounds = argc > 2 ? atoi(argv[2]) : 4;
    float *hx = malloc(n * sizeof(float)), *hy = malloc(n * sizeof(float));
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    int bad = 0;

    if (!hx || !hy || !x || !y || n <= 0 || rounds < 0)
        return 1;
    for (int i = 0; i < n; i++) {
        hx[i] = i % 1000;
        hy[i] = 1;
    }
    memcpy(x, hx, n * sizeof(float));
    memcpy(y, hy, n * sizeof(float));
    for (int r = 0; r < rounds; r++)
        saxpy(2.0f, x, y, n);
    memcpy(hy, y, n * sizeof(float));
    for (int i = 0; i < n; i++)
        if (hy[i] != 1.0f + rounds * 2.0f * (i % 1000))
            bad++;
    printf("saxpy n=%d bad=%d\n", n, bad);
    free(hx);
    free(hy);
    free(x);
    free(y);
    return bad != 0;
}
