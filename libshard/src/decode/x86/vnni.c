/*
 * The resampler's AVX-512 VBMI + VNNI path (simd.h).
 */
#include "decode/x86/simd.h"

/* Where the CPU has AVX-512 VBMI and VNNI (Ice Lake and later, Zen 4): integer throughout.
 * The box's rows are split into three planes first (vpermt2b), so that the vertical pass's
 * sums come out planar: per output row, three 16-bit planes with MIDBITS of fraction. The
 * horizontal pass takes those two at a time against 16-bit weights (HBITS) with vpdpwssd,
 * which multiplies pairs and adds them in one instruction, 8 output pixels per register as
 * the float pass does: half its instructions. */
#define VNNI_TARGET "avx2,fma,avx512f,avx512vl,avx512bw,avx512vbmi,avx512vnni"
#define MIDBITS 7 /* the most int16 holds: 255 << 7 */
#define HBITS VBITS /* weights16 makes the horizontal weights too */

/* acc + the pairwise products of a and b (vpdpwssd). In assembly: GCC 12 copies the
 * accumulator around each use of the intrinsic, twice the instructions of the loop. */
__attribute__((target(VNNI_TARGET), always_inline))
static inline __m256i dpwssd(__m256i acc, __m256i a, __m256i b)
{
    __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "vm"(b));
    return acc;
}

/* The same with b the 32-bit value at p in every lane (an embedded broadcast). */
__attribute__((target(VNNI_TARGET), always_inline))
static inline __m256i dpwssd_bcast(__m256i acc, __m256i a, const void *p)
{
    __asm__("vpdpwssd %2%{1to8%}, %1, %0" : "+v"(acc) : "v"(a), "m"(*(const int16_t(*)[2])p));
    return acc;
}

/* 32 bytes of a row of n bytes from off, zeros past its end, without reading past it. */
__attribute__((target(VNNI_TARGET)))
static inline __m256i load32(const unsigned char *row, size_t n, size_t off)
{
    if (off + 32 <= n)
        return _mm256_loadu_si256((const __m256i *)(row + off));
    __mmask32 m = off >= n ? 0 : (__mmask32)((1u << (n - off)) - 1);
    return _mm256_maskz_loadu_epi8(m, row + off);
}

/* The box's rows as three planes of bytes each: row r's channel c at planar + (r * 3 + c) *
 * pcols, zeros past cols (pcols a multiple of 32). */
__attribute__((target(VNNI_TARGET)))
void shard_split_planes(const unsigned char *box, size_t in_stride, int rows, size_t n,
                         size_t pcols, unsigned char *planar)
{
    /* channel c of the 32 pixels: those whose byte is in the first two registers, then
     * the rest from the third */
    unsigned char ib[3][32], ic[3][32];
    for (int c = 0; c < 3; c++)
        for (int x = 0; x < 32; x++) {
            ib[c][x] = (unsigned char)(3 * x + c < 64 ? 3 * x + c : 0);
            ic[c][x] = (unsigned char)(3 * x + c >= 64 ? 3 * x + c - 64 : 0);
        }
    __m256i lo[3], hi[3];
    __mmask32 from2[3];
    for (int c = 0; c < 3; c++) {
        lo[c] = _mm256_loadu_si256((const __m256i *)ib[c]);
        hi[c] = _mm256_loadu_si256((const __m256i *)ic[c]);
        from2[c] = 0;
        for (int x = 0; x < 32; x++)
            if (3 * x + c >= 64)
                from2[c] |= 1u << x;
    }
    for (int r = 0; r < rows; r++) {
        const unsigned char *row = box + (size_t)r * in_stride;
        unsigned char *d = planar + (size_t)r * 3 * pcols;
        for (size_t x = 0; x < pcols; x += 32) {
            __m256i v0 = load32(row, n, 3 * x), v1 = load32(row, n, 3 * x + 32),
                    v2 = load32(row, n, 3 * x + 64);
            for (int c = 0; c < 3; c++) {
                __m256i v = _mm256_permutex2var_epi8(v0, lo[c], v1);
                v = _mm256_mask_permutexvar_epi8(v, from2[c], hi[c], v2);
                _mm256_store_si256((__m256i *)(d + (size_t)c * pcols + x), v);
            }
        }
    }
}

/* One output row's vertical sums over the three planes of the window's rows (rows[] at the
 * box's planar rows, 3 * pcols bytes each; w[] two weights per word, an even count): 32
 * bytes per step, two rows per vpdpwssd, stored as (sum + rounding) >> (VBITS - MIDBITS)
 * into dst's planes, pstride values apart. */
__attribute__((target(VNNI_TARGET)))
static void vertical_planar(const unsigned char *const *rows, const int32_t *w, int taps,
                            size_t pcols, int16_t *dst, size_t pstride)
{
    const __m256i z = _mm256_setzero_si256();
    const __m256i round = _mm256_set1_epi32(1 << (VBITS - MIDBITS - 1));
    const int sh = VBITS - MIDBITS;
    for (int c = 0; c < 3; c++)
        for (size_t p = 0; p < pcols; p += 32) {
            size_t at = (size_t)c * pcols + p;
            __m256i a0 = round, a1 = round, a2 = round, a3 = round;
            for (int y = 0; y < taps; y += 2) {
                __m256i ra = _mm256_load_si256((const __m256i *)(rows[y] + at));
                __m256i rb = _mm256_load_si256((const __m256i *)(rows[y + 1] + at));
                __m256i k = _mm256_set1_epi32(w[y / 2]);
                __m256i lo = _mm256_unpacklo_epi8(ra, rb), hi = _mm256_unpackhi_epi8(ra, rb);
                a0 = dpwssd(a0, _mm256_unpacklo_epi8(lo, z), k);
                a1 = dpwssd(a1, _mm256_unpackhi_epi8(lo, z), k);
                a2 = dpwssd(a2, _mm256_unpacklo_epi8(hi, z), k);
                a3 = dpwssd(a3, _mm256_unpackhi_epi8(hi, z), k);
            }
            /* a0 holds bytes 0-3 and 16-19, a1 4-7 and 20-23, a2 8-11 and 24-27, a3 12-15
             * and 28-31: packed in pairs, 0-7 | 16-23 and 8-15 | 24-31 */
            __m256i u = _mm256_packs_epi32(_mm256_srai_epi32(a0, sh), _mm256_srai_epi32(a1, sh));
            __m256i v = _mm256_packs_epi32(_mm256_srai_epi32(a2, sh), _mm256_srai_epi32(a3, sh));
            int16_t *d = dst + (size_t)c * pstride + p;
            _mm256_store_si256((__m256i *)d, _mm256_permute2x128_si256(u, v, 0x20));
            _mm256_store_si256((__m256i *)(d + 16), _mm256_permute2x128_si256(u, v, 0x31));
        }
}

__attribute__((target(VNNI_TARGET)))
void shard_resize_vnni(const unsigned char *planar, size_t pcols, int ybox0, const Coeffs *cv,
                        const int16_t *kv, const int32_t *band, const int *start, int span,
                        int out_w, int out_h, int16_t *mid, size_t pstride, int32_t *rowout,
                        const unsigned char **vrow, int32_t *vw, const ResizeOut *o)
{
    const __m256i half = _mm256_set1_epi32(1 << (MIDBITS + HBITS - 1));
    const int16_t *pr = mid, *pg = mid + pstride, *pb = mid + 2 * pstride;
    size_t wpad = ((size_t)out_w + 7) & ~(size_t)7;
    for (int yy = 0; yy < out_h; yy++) {
        int taps = shard_window(planar, 3 * pcols, ybox0, cv, kv, yy, vrow, vw);
        vertical_planar(vrow, vw, taps, pcols, mid, pstride);
        for (int xb = 0; xb < out_w; xb += 8) {
            int s0 = start[xb / 8];
            const int32_t *w = band + (size_t)(xb / 8) * (size_t)span * 4;
            /* two sums per channel (pairs t and t + 2): half as long a chain */
            __m256i r = half, g = half, b = half, z = _mm256_setzero_si256(), r1 = z, g1 = z, b1 = z;
            for (int t = 0; t < span; t += 4, w += 16) {
                __m256i wt = _mm256_load_si256((const __m256i *)w), wt1 = _mm256_load_si256((const __m256i *)(w + 8));
                r = dpwssd_bcast(r, wt, pr + s0 + t);
                g = dpwssd_bcast(g, wt, pg + s0 + t);
                b = dpwssd_bcast(b, wt, pb + s0 + t);
                r1 = dpwssd_bcast(r1, wt1, pr + s0 + t + 2);
                g1 = dpwssd_bcast(g1, wt1, pg + s0 + t + 2);
                b1 = dpwssd_bcast(b1, wt1, pb + s0 + t + 2);
            }
            const int sh = MIDBITS + HBITS;
            _mm256_store_si256((__m256i *)(rowout + xb), _mm256_srai_epi32(_mm256_add_epi32(r, r1), sh));
            _mm256_store_si256((__m256i *)(rowout + wpad + xb), _mm256_srai_epi32(_mm256_add_epi32(g, g1), sh));
            _mm256_store_si256((__m256i *)(rowout + 2 * wpad + xb), _mm256_srai_epi32(_mm256_add_epi32(b, b1), sh));
        }
        shard_emit_row(rowout, wpad, out_w, yy, o);
    }
}
