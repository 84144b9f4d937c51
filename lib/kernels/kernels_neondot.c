/* kernels_neondot.c - kernels_neon.c compiled again for AArch64 CPUs with
 * the dot-product instructions (-march=armv8.2-a+dotprod, see the
 * Makefile): the table ml__kernels_neondot, bit-identical to the scalar
 * reference like every other. */
#define NEON_DOTPROD 1
#include "kernels_neon.c"
