# RocksDB blocks read: checksums (CRC32c, masked; XXH3 64-bit, low 32 bits mixed with the block's
# type byte), raw Snappy decompression and ``read_block`` (a block checked against its trailer and
# decompressed), shared by the reading (sst.pyx) and writing (sstwrite.pyx) SST kernels, which
# include it after cimporting int64_t, uint8_t, uint32_t, uint64_t, memcpy and the abi_sst.pxi
# status codes, and defining TRAILER and MAX_EXPANSION.

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

# ---- Snappy ----------------------------------------------------------------------------------

cdef inline int64_t varint(const uint8_t* b, int64_t pos, int64_t end, int most, uint64_t* out) noexcept nogil:
    """The next position after a varint at ``pos``, or -1: at most ``most`` bytes (5: a 32-bit
    value, its fifth byte at most 0x0F; 9: 63 bits)."""
    cdef uint64_t v = 0
    cdef int shift = 0, i
    cdef uint8_t c
    for i in range(most):
        if pos + i >= end:
            return -1
        c = b[pos + i]
        if i == most - 1 and c > (0x0F if most == 5 else 0x7F):
            return -1
        v |= <uint64_t>(c & 0x7F) << shift
        if not c & 0x80:
            out[0] = v
            return pos + i + 1
        shift += 7
    return -1


cdef int64_t snappy_length(const uint8_t* b, int64_t pos, int64_t end) noexcept nogil:
    cdef uint64_t n
    if varint(b, pos, end, 5, &n) < 0 or <int64_t>n > MAX_EXPANSION * (end - pos) + 64:
        return -1
    return n


cdef int64_t snappy_decompress(const uint8_t* b, int64_t pos, int64_t end, uint8_t* out, int64_t cap) noexcept nogil:
    cdef uint64_t n32
    cdef int64_t p = varint(b, pos, end, 5, &n32), n = <int64_t>n32, o = 0, length, offset, extra, i
    cdef uint8_t tag
    if p < 0 or n > cap:
        return -1
    while p < end:
        tag = b[p]
        p += 1
        if (tag & 3) == 0:
            length = tag >> 2
            if length >= 60:
                extra = length - 59
                if p + extra > end:
                    return -1
                length = 0
                for i in range(extra):
                    length |= <int64_t>b[p + i] << (8 * i)
                p += extra
            length += 1
            if length > end - p or length > n - o:
                return -1
            memcpy(out + o, b + p, length)
            p += length
            o += length
            continue
        if (tag & 3) == 1:
            if p + 1 > end:
                return -1
            length = 4 + ((tag >> 2) & 7)
            offset = ((<int64_t>tag >> 5) << 8) | b[p]
            p += 1
        elif (tag & 3) == 2:
            if p + 2 > end:
                return -1
            length = 1 + (tag >> 2)
            offset = b[p] | (<int64_t>b[p + 1] << 8)
            p += 2
        else:
            if p + 4 > end:
                return -1
            length = 1 + (tag >> 2)
            offset = sm_le32(b + p)
            p += 4
        if offset == 0 or offset > o or length > n - o:
            return -1
        if offset >= length:
            memcpy(out + o, out + o - offset, length)
        else:
            for i in range(length):
                out[o + i] = out[o - offset + i]
        o += length
    return o if o == n else -1

# ---- blocks ----------------------------------------------------------------------------------

cdef int read_block(const uint8_t* f, int64_t nf, int64_t pos, int64_t size, int checksum, uint8_t* out,
                    int64_t cap, const uint8_t** blk, int64_t* length) noexcept nogil:
    """Check block ``pos``/``size`` of file ``f``; ``blk``/``length``: its uncompressed bytes (in
    the file itself when stored uncompressed, else decompressed into ``out``). On SST_CAPACITY
    ``length`` is the size ``out`` needs."""
    cdef uint8_t kind
    cdef int64_t n
    if pos < 0 or size < 0 or pos > nf or size > nf - pos or TRAILER > nf - pos - size:
        return SST_TRUNCATED
    if checksum != 0 and checksum != 1 and checksum != 4:
        return SST_CHECKSUM_TYPE
    kind = f[pos + size]
    if kind != 0 and kind != 1:
        return SST_COMPRESSION
    if checksum != 0 and block_checksum(checksum, f + pos, size, kind) != sm_le32(f + pos + size + 1):
        return SST_CHECKSUM
    if kind == 0:
        blk[0] = f + pos
        length[0] = size
        return SST_OK
    n = snappy_length(f, pos, pos + size)
    if n < 0:
        return SST_SNAPPY
    if n > cap:
        length[0] = n
        return SST_CAPACITY
    if snappy_decompress(f, pos, pos + size, out, cap) != n:
        return SST_SNAPPY
    blk[0] = out
    length[0] = n
    return SST_OK
