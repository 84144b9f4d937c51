/* blocks_neondot.c - blocks_neon.c compiled again for AArch64 CPUs with
 * the dot-product instructions (-march=armv8.2-a+dotprod, see the
 * Makefile): the block-type entries of ml__kernels_neondot, sdot summing
 * four byte products into each int32 lane (exact either way). */
#define NEON_DOTPROD 1
#include "blocks_neon.c"
