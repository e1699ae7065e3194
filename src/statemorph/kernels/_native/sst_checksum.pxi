# RocksDB block checksums (CRC32c, masked; XXH3 64-bit, low 32 bits mixed with the block's type
# byte), shared by the reading (sst.pyx) and writing (sstwrite.pyx) SST kernels, which include it
# after cimporting int64_t, uint8_t, uint32_t, uint64_t.

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    #error "statemorph kernels assume a little-endian host"
    #endif
    static inline uint64_t sm_le64(const uint8_t* p) { uint64_t v; memcpy(&v, p, 8); return v; }
    static inline uint32_t sm_le32(const uint8_t* p) { uint32_t v; memcpy(&v, p, 4); return v; }
    static inline uint64_t sm_fold64(uint64_t a, uint64_t b) {
        __uint128_t m = (__uint128_t)a * b; return (uint64_t)m ^ (uint64_t)(m >> 64); }
    static inline uint64_t sm_rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
    static inline uint64_t sm_swap64(uint64_t v) { return __builtin_bswap64(v); }
    #define SM_P32_1 0x9E3779B1ULL
    #define SM_P32_2 0x85EBCA77ULL
    #define SM_P32_3 0xC2B2AE3DULL
    #define SM_P64_1 0x9E3779B185EBCA87ULL
    #define SM_P64_2 0xC2B2AE3D27D4EB4FULL
    #define SM_P64_3 0x165667B19E3779F9ULL
    #define SM_P64_4 0x85EBCA77C2B2AE63ULL
    #define SM_P64_5 0x27D4EB2F165667C5ULL
    #define SM_MX1 0x165667919E3779F9ULL
    #define SM_MX2 0x9FB21C651E98DF25ULL
    #define SM_M32 0xFFFFFFFFU
    #define SM_CRC_POLY 0x82F63B78U
    #define SM_CRC_MASK 0xA282EAD8U
    #define SM_LAST_BYTE 0x6B9083D9U
    """
    const uint64_t SM_P32_1, SM_P32_2, SM_P32_3, SM_P64_1, SM_P64_2, SM_P64_3, SM_P64_4, SM_P64_5, SM_MX1, SM_MX2
    const uint32_t SM_M32, SM_CRC_POLY, SM_CRC_MASK, SM_LAST_BYTE
    uint64_t sm_le64(const uint8_t* p) nogil
    uint32_t sm_le32(const uint8_t* p) nogil
    uint64_t sm_fold64(uint64_t a, uint64_t b) nogil
    uint64_t sm_rotl64(uint64_t x, int r) nogil
    uint64_t sm_swap64(uint64_t v) nogil


# ---- CRC32c ----------------------------------------------------------------------------------

cdef uint32_t CRC_TABLE[256]


cdef void _crc_init() noexcept:
    cdef uint32_t c
    cdef int i, k
    for i in range(256):
        c = i
        for k in range(8):
            c = (c >> 1) ^ SM_CRC_POLY if c & 1 else c >> 1
        CRC_TABLE[i] = c


_crc_init()


cdef inline uint32_t crc32c(const uint8_t* p, int64_t n, uint32_t crc) noexcept nogil:
    cdef uint32_t c = crc ^ SM_M32
    cdef int64_t i
    for i in range(n):
        c = CRC_TABLE[(c ^ p[i]) & 0xFF] ^ (c >> 8)
    return c ^ SM_M32

# ---- XXH3 (64-bit, seed 0, default secret) ---------------------------------------------------

cdef uint8_t SECRET[192]
_secret = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671fcb79e64eccc0e578825ad07dccff7221"
    "b8084674f743248ee03590e6813a264c3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364eac5ac8334d3ebc3c581a0fffa1363eb"
    "170ddd51b7f0da49d316552629d4689e2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e")
for _i in range(192):
    SECRET[_i] = _secret[_i]



cdef inline uint64_t _avalanche(uint64_t h) noexcept nogil:
    h ^= h >> 37
    h *= SM_MX1
    return h ^ (h >> 32)


cdef inline uint64_t _xxh64_avalanche(uint64_t h) noexcept nogil:
    h ^= h >> 33
    h *= SM_P64_2
    h ^= h >> 29
    h *= SM_P64_3
    return h ^ (h >> 32)


cdef inline uint64_t _mix16(const uint8_t* p, const uint8_t* s) noexcept nogil:
    return sm_fold64(sm_le64(p) ^ sm_le64(s), sm_le64(p + 8) ^ sm_le64(s + 8))


cdef inline void _accumulate(uint64_t* acc, const uint8_t* p, const uint8_t* s) noexcept nogil:
    cdef int lane
    cdef uint64_t v, k
    for lane in range(8):
        v = sm_le64(p + 8 * lane)
        k = v ^ sm_le64(s + 8 * lane)
        acc[lane ^ 1] += v
        acc[lane] += (k & SM_M32) * (k >> 32)


cdef uint64_t xxh3_64(const uint8_t* b, int64_t n) noexcept nogil:
    cdef uint64_t acc, acc_end, keyed, h, lo, hi
    cdef uint64_t accs[8]
    cdef int64_t i, k, s, stripes, block, blocks
    if n == 0:
        return _xxh64_avalanche(sm_le64(SECRET + 56) ^ sm_le64(SECRET + 64))
    if n <= 3:
        keyed = ((<uint64_t>b[0] << 16) | (<uint64_t>b[n >> 1] << 24) | <uint64_t>b[n - 1] | (<uint64_t>n << 8))
        return _xxh64_avalanche(keyed ^ <uint64_t>(sm_le32(SECRET) ^ sm_le32(SECRET + 4)))
    if n <= 8:
        keyed = (<uint64_t>sm_le32(b + n - 4) + (<uint64_t>sm_le32(b) << 32)) ^ (sm_le64(SECRET + 8) ^ sm_le64(SECRET + 16))
        h = keyed ^ sm_rotl64(keyed, 49) ^ sm_rotl64(keyed, 24)
        h *= SM_MX2
        h ^= (h >> 35) + <uint64_t>n
        h *= SM_MX2
        return h ^ (h >> 28)
    if n <= 16:
        lo = sm_le64(b) ^ (sm_le64(SECRET + 24) ^ sm_le64(SECRET + 32))
        hi = sm_le64(b + n - 8) ^ (sm_le64(SECRET + 40) ^ sm_le64(SECRET + 48))
        return _avalanche(<uint64_t>n + sm_swap64(lo) + hi + sm_fold64(lo, hi))
    if n <= 128:
        acc = <uint64_t>n * SM_P64_1
        i = (n - 1) // 32
        while i >= 0:
            acc += _mix16(b + 16 * i, SECRET + 32 * i) + _mix16(b + n - 16 * (i + 1), SECRET + 32 * i + 16)
            i -= 1
        return _avalanche(acc)
    if n <= 240:
        acc = <uint64_t>n * SM_P64_1
        for i in range(8):
            acc += _mix16(b + 16 * i, SECRET + 16 * i)
        acc = _avalanche(acc)
        acc_end = _mix16(b + n - 16, SECRET + 136 - 17)
        for i in range(8, n // 16):
            acc_end += _mix16(b + 16 * i, SECRET + 16 * (i - 8) + 3)
        return _avalanche(acc + acc_end)
    accs[0] = SM_P32_3
    accs[1] = SM_P64_1
    accs[2] = SM_P64_2
    accs[3] = SM_P64_3
    accs[4] = SM_P64_4
    accs[5] = SM_P32_2
    accs[6] = SM_P64_5
    accs[7] = SM_P32_1
    stripes = (192 - 64) // 8
    block = 64 * stripes
    blocks = (n - 1) // block
    for k in range(blocks):
        for s in range(stripes):
            _accumulate(accs, b + k * block + 64 * s, SECRET + 8 * s)
        for i in range(8):
            h = accs[i]
            h ^= h >> 47
            h ^= sm_le64(SECRET + 192 - 64 + 8 * i)
            accs[i] = h * SM_P32_1
    for s in range(((n - 1) - block * blocks) // 64):
        _accumulate(accs, b + blocks * block + 64 * s, SECRET + 8 * s)
    _accumulate(accs, b + n - 64, SECRET + 192 - 64 - 7)
    acc = <uint64_t>n * SM_P64_1
    for i in range(4):
        acc += sm_fold64(accs[2 * i] ^ sm_le64(SECRET + 11 + 16 * i), accs[2 * i + 1] ^ sm_le64(SECRET + 11 + 16 * i + 8))
    return _avalanche(acc)


cdef inline uint32_t block_checksum(int kind, const uint8_t* p, int64_t n, uint8_t type_byte) noexcept nogil:
    cdef uint32_t c
    if kind == 1:
        c = crc32c(&type_byte, 1, crc32c(p, n, 0))
        return ((c >> 15) | (c << 17)) + SM_CRC_MASK
    return <uint32_t>(xxh3_64(p, n) & SM_M32) ^ (<uint32_t>type_byte * SM_LAST_BYTE)
