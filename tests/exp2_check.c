/* Checks the CPU's float32 EXP2 helper (DEV.C.exp2) against glibc's double exp2; built and run by
   tests/test_cpu_exp2.py, which writes the helper's source as exp2_f32.h next to this file's copy.

     exp2_check all                 every one of the 2**32 float32 bit patterns
     exp2_check sample N SEED       N random inputs (xorshift64 from SEED) and the special inputs' neighbourhoods
   add `glibc` to check glibc's exp2f in its place (for the record: the same statistics for the library).

   Special inputs must give exact bits (OP.EXP2): NaN -> the operand quieted (x | 0x400000); +inf and x >= 128 ->
   +inf (OP.EXP2.overflow: 2**128 is beyond FLT_MAX + half an ulp); -inf and x <= -150 -> +0.0 (OP.EXP2.underflow:
   2**-150 is half the least subnormal, a tie that rounds to even, and less rounds to 0); an integer x in
   (-150, 128), +-0 included -> 2**x, which float32 holds exactly.

   Every other input must give a float that brackets the true t = 2**x (ACC.EXP2.f32: within 1 ulp, i.e. one of the
   two floats around t). t is known through g = exp2((double)x) with |t - g| <= U, U the spacing of doubles in g's
   binade (glibc's exp2 is within 1 ulp; the spacing above g's binade start is the larger one, so the interval
   [g - U, g + U] is a superset of the possible t). Its floats are at least 2**-149 apart and U <= 2**-52 g with
   g < 2**128, so the interval holds at most one float F. The result r is accepted iff
     - [g - U, g + U] holds a float F and r == F: every t there has F as a bracket (t below F: {F-, F}, above:
       {F, F+}), and no other float brackets them all;
     - else r is one of the two floats around g, down(g) < g < up(g): with no float in the interval, every t there
       has the same two neighbours.
   The condition is exact, never loose; it can only reject a result that is right for some t in the interval,
   which would show as a failure, not as a pass. Printed: inputs, special inputs, rejected results, results that
   differ from (float)g (the correct rounding unless t is within U of a midpoint), the largest |r - g| in ulps of
   the floats at g, and a hash of all results (builds with other flags must give the same bits). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "exp2_f32.h"

#define CHUNK 65536

static float bits_f(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t f_bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* the bits exact inputs must give, or 1 (not a valid result of any input, a subnormal) for the others */
static uint32_t special(float x) {
  uint32_t b = f_bits(x);
  if (x != x) return b | 0x400000u;
  if (x >= 128.0f) return 0x7f800000u;
  if (x <= -150.0f) return 0u;
  if (x == truncf(x)) return f_bits(ldexpf(1.0f, (int)x));
  return 1u;
}

static long long n_in, n_special, n_bad, n_differ;
static uint64_t hash = 14695981039346656037ull;   /* FNV-1a over the results' bits, in input order */
static double max_ulps;

static void check(float x, float r) {
  uint32_t want = special(x), rb = f_bits(r);
  n_in++;
  hash = (hash ^ rb) * 1099511628211ull;
  if (want != 1u) {
    n_special++;
    if (rb != want && n_bad++ < 10) printf("special x=%a (0x%08x): got 0x%08x, want 0x%08x\n", x, f_bits(x), rb, want);
    return;
  }
  double g = exp2((double)x);
  int e; frexp(g, &e);                          /* 2**(e-1) <= g < 2**e */
  double U = ldexp(1.0, e - 1 - 52);            /* the spacing of doubles in g's binade */
  double fu = ldexp(1.0, (e - 1 < -126 ? -126 : e - 1) - 23);   /* the spacing of floats at g */
  float near = (float)g, lo, hi;
  if ((double)near < g) { lo = near; hi = nextafterf(near, INFINITY); }
  else if ((double)near > g) { lo = nextafterf(near, -INFINITY); hi = near; }
  else lo = hi = near;
  int ok;
  if ((double)lo >= g - U) ok = rb == f_bits(lo);       /* a float within U of g (g itself included) */
  else if ((double)hi <= g + U) ok = rb == f_bits(hi);
  else ok = rb == f_bits(lo) || rb == f_bits(hi);
  if (!ok && n_bad++ < 10) printf("x=%a (0x%08x): got %a, exp2 %a\n", x, f_bits(x), r, g);
  if (rb != f_bits(near)) n_differ++;
  double ulps = fabs((double)r - g) / fu;
  if (ulps > max_ulps) max_ulps = ulps;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  int all = strcmp(argv[1], "all") == 0, glibc = strcmp(argv[argc - 1], "glibc") == 0;
  unsigned long long n = all ? 1ull << 32 : strtoull(argv[2], 0, 10), s = all ? 0 : strtoull(argv[3], 0, 10) | 1;
  static float xs[CHUNK], rs[CHUNK];
  if (!all) {   /* the special inputs and their neighbours first: integers, the ends of the ranges, NaNs */
    int m = 0;
    for (int i = -160; i <= 160; i++) {
      float v = (float)i;
      xs[m++] = v; xs[m++] = nextafterf(v, INFINITY); xs[m++] = nextafterf(v, -INFINITY);
    }
    uint32_t more[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u,
                       0xffbfffffu, 0x00000001u, 0x80000001u, 0x7f7fffffu, 0xff7fffffu, 0x43170000u, 0xc3170000u,
                       0x43170001u, 0xc3170001u, 0x3f000000u, 0xbf000000u, 0x33000000u, 0xb3000000u};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) xs[m++] = bits_f(more[i]);
    for (int i = 0; i < m; i++) rs[i] = glibc ? exp2f(xs[i]) : exp2_f32(xs[i]);
    for (int i = 0; i < m; i++) check(xs[i], rs[i]);
  }
  for (unsigned long long base = 0; base < n; base += CHUNK) {
    int m = n - base < CHUNK ? (int)(n - base) : CHUNK;
    for (int i = 0; i < m; i++) {
      if (all) xs[i] = bits_f((uint32_t)(base + i));
      else {   /* even i: any bit pattern (half of them special); odd i: a value in [-152, 130), the busy range */
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        xs[i] = i & 1 ? (float)((double)(s >> 11) * 0x1p-53 * 282.0 - 152.0) : bits_f((uint32_t)(s >> 16));
      }
    }
    if (glibc) for (int i = 0; i < m; i++) rs[i] = exp2f(xs[i]);
    else for (int i = 0; i < m; i++) rs[i] = exp2_f32(xs[i]);   /* vectorised as in a kernel */
    for (int i = 0; i < m; i++) check(xs[i], rs[i]);
  }
  printf("inputs %lld special %lld rejected %lld differ %lld max_ulps %.6f hash %016llx\n", n_in, n_special, n_bad,
         n_differ, max_ulps, (unsigned long long)hash);
  return n_bad != 0;
}
