// Calibration only (not part of statemorph): the Events migrate hand-written in C for exactly this
// schema pair, with the same validation the kernels do (length, RowKind byte, null bits past the
// arity, var-part offsets, UTF-8 of non-inline strings). It measures how far the generic kernel is
// from a routine specialised at compile time; see RESULTS.md ("Where the migrate time goes").
//
// Inputs: offs.bin (int32 Arrow offsets, n + 1) and data.bin (the entries), written from the
// benchmark's Events data:
//   from statemorph import arrow, serializers; from benchmarks.conftest import make_struct, OLD
//   a = arrow.encode(make_struct(2000000), serializers.RowDataSerializer(OLD))
//   np.frombuffer(a.buffers()[1], np.int32)[:2000001].tofile("offs.bin")
//   np.frombuffer(a.buffers()[2], np.uint8).tofile("data.bin")
// Build and run: gcc -O3 -o events_hand events_hand.c && ./events_hand [entries] [rounds]
// Instructions per entry: valgrind --tool=callgrind --toggle-collect=run ./events_hand 20000 1
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
static inline uint64_t ld(const uint8_t* p){uint64_t v; memcpy(&v,p,8); return v;}
static inline void st(uint8_t* p, uint64_t v){memcpy(p,&v,8);}
static double now(){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
// hand-specialised Events migrate with full validation
__attribute__((noinline)) static int64_t run(const int32_t* off, const uint8_t* d, int64_t n, int32_t* oo, uint8_t* o) {
  int64_t pos = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t s = off[i], e = off[i+1];
    if (e - s < 4) return -1;
    uint32_t len = __builtin_bswap32(*(uint32_t*)(d+s));
    if (len != e - s - 4) return -1;
    const uint8_t* b = d + s + 4;
    if (len < 24) return -1;
    uint64_t nb = ld(b);
    if ((nb & 0xFC) || (nb >> 10)) return -1;
    uint8_t* ob = o + pos + 4;
    uint64_t nn = nb & 0xFF;
    st(ob + 8, ld(b + 8) & (((nb >> 8) & 1) - 1)); nn |= ((nb >> 8) & 1) << 8;
    int64_t cur = 24;
    if ((nb >> 9) & 1) { nn |= 1 << 9; st(ob + 16, 0); }
    else {
      uint64_t raw = ld(b + 16);
      int64_t mo = raw >> 32, ml = raw & 0xffffffff;
      if (mo < 24 || mo + ml > len || (raw >> 63)) return -1;
      const uint8_t* m = b + mo;
      if (ml < 32) return -1;
      uint64_t mb = ld(m);
      if ((mb & 0xFC) || (mb >> 11)) return -1;
      uint8_t* om = ob + cur;
      uint64_t mn = (mb & 0xFF) | (1ull << 9) | (1ull << 12) | (1ull << 13);
      int64_t mc = 56;
      st(om + 24, ld(m + 8) & (((mb >> 8) & 1) - 1)); mn |= ((mb >> 8) & 1) << 10;
      st(om + 32, ld(m + 16) & (((mb >> 9) & 1) - 1)); mn |= ((mb >> 9) & 1) << 11;
      st(om + 16, 0); st(om + 40, 0); st(om + 48, 0);
      if ((mb >> 10) & 1) { mn |= 1 << 8; st(om + 8, 0); }
      else {
        uint64_t sr = ld(m + 24);
        if (sr >> 63) { st(om + 8, sr); }
        else {
          int64_t so = sr >> 32, sl = sr & 0xffffffff;
          if (so < 32 || so + sl > ml) return -1;
          int64_t r8 = (sl + 7) & ~7;
          uint64_t acc = 0; int64_t w = 0;
          for (; w + 8 < r8; w += 8) { uint64_t v = ld(m + so + w); acc |= v; st(om + mc + w, v); }
          if (r8) { uint64_t v = ld(m + so + w) & (~0ull >> (8 * (r8 - sl))); acc |= v; st(om + mc + w, v); }
          if (acc & 0x8080808080808080ull) return -1;
          st(om + 8, ((uint64_t)mc << 32) | sl);
          mc += r8;
        }
      }
      st(om, mn);
      st(ob + 16, ((uint64_t)cur << 32) | mc);
      cur += mc;
    }
    st(ob, nn);
    *(uint32_t*)(o + pos) = __builtin_bswap32((uint32_t)cur);
    pos += cur + 4;
    oo[i + 1] = (int32_t)pos;
  }
  return pos;
}
int main(int argc, char** argv) {
  int64_t n = 2000000;
  FILE* f = fopen("offs.bin","rb"); int32_t* off = malloc(4*(n+1)); fread(off,4,n+1,f); fclose(f);
  f = fopen("data.bin","rb"); fseek(f,0,SEEK_END); long dl = ftell(f); fseek(f,0,SEEK_SET); uint8_t* d = malloc(dl); fread(d,1,dl,f); fclose(f);
  int64_t nn = argc > 1 ? atol(argv[1]) : n;
  uint8_t* o = malloc(dl*2); memset(o, 1, dl*2); int32_t* oo = malloc(4*(n+1)); memset(oo,0,4*(n+1));
  double best = 1e9; int64_t r = 0;
  int reps = argc > 2 ? atoi(argv[2]) : (nn < 100000 ? 2000 : 10);
  for (int k = 0; k < reps; k++) { double t = now(); r = run(off, d, nn, oo, o); t = now() - t; if (t < best) best = t; }
  printf("n=%ld pos=%ld best %.3f ms  %.1f ns/entry\n", nn, r, best*1e3, best*1e9/nn);


}
