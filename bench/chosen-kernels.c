/* chosen-kernels.c - prints the variant of each kernel the library takes
 * on this CPU (or the one ML_KERNELS forces), so that a benchmark's output
 * records what it measured.  bench-run.sh builds and runs it.
 *
 *   cc -std=c11 -Iinclude bench/chosen-kernels.c build/libmlcore.a \
 *      -lutf8proc -ldeflate -lz -lm -lpthread -o chosen-kernels */
#include <mlcore.h>

#include <stdio.h>

int main(void)
{
    printf("kernels %s, float math %s, prefetch %s:", ml_kernels_name(), ml_kernels_fmath_name(),
           ml_kernels_prefetch_name());
    for (unsigned i = 0; ml_kernels_slot(i); i++)
        printf(" %s=%s", ml_kernels_slot(i), ml_kernels_slot_variant(i));
    printf("\n");
    return 0;
}
