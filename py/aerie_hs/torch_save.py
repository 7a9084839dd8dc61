"""torch.save's zip format, written with the standard library.

What `torch.save(obj, "<a>.ckpt")` writes for a dict of CPU tensors with torch 2.13's defaults,
byte for byte, serialization id included (checked against test/fixtures/real/torch-2.13.0/data_0.ckpt):

- a zip of stored entries, in torch's write order (torch 2.13 torch/serialization.py:1259-1312,
  `_save`): `<a>/data.pkl`, `<a>/.format_version` "1", `<a>/.storage_alignment` "64",
  `<a>/byteorder` "little", `<a>/data/<k>` per storage, then from PyTorchStreamWriter::writeEndOfFile
  (caffe2/serialize/inline_container.cc) `<a>/version` "3\\n" and `<a>/.data/serialization_id`.
  `<a>` is the file name up to its last dot (inline_container.cc `basename`), so it is taken from
  the final name, not the temp name the file is written under;
- each local header carries general-purpose flags 0x0808 (UTF-8 names; CRC and sizes in a data
  descriptor after the data, as miniz's streaming writer leaves them), zero times and versions,
  and an extra field "FB" + length + 'Z' padding that starts the data at a multiple of 64
  (inline_container.cc `getPadding`, kFieldAlignment = 64), so torch can mmap storages in place;
- the central directory (no extras), then, as miniz's MZ_ZIP_FLAG_WRITE_ZIP64 mode always
  writes, a zip64 end record (made by 0x031e, needs 0x2d), its locator and the classic end record;
- `data.pkl`: Python's pickler at protocol 2 (torch.save's DEFAULT_PROTOCOL) over the dict; each
  tensor reduces to `torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
  requires_grad, OrderedDict())` (torch/_tensor.py `_reduce_ex_internal`) with the storage as the
  persistent id ('storage', torch.<T>Storage, key, 'cpu', numel), keys '0', '1', ... in the
  order tensors are met (serialization.py `persistent_id`). The pickler memoizes by object
  identity: torch reuses the 'storage' and 'cpu' strings and the classes, so those are fetched
  back with BINGET, while every tuple and key string is new;
- `.data/serialization_id`: 20 digits of c10::hash_combine over std::hash of each record name in
  the iteration order of the writer's std::unordered_set, then 20 digits of hash_combine over
  the CRC-32 of every data descriptor written (inline_container.cc `writeSerializationId`,
  `ostream_write_func`). libstdc++'s std::hash<string> is MurmurHash2-64A with seed 0xc70f6907;
  its unordered_set starts at 13 buckets on the first insert and lists a new key first in its
  bucket, or first overall in an empty one (bits/hashtable.h `_M_insert_bucket_begin`).
"""
import errno
import functools
import os
import struct
import threading
import zlib

ALIGN = 64
M64 = (1 << 64) - 1
U32 = 0xFFFFFFFF
STORAGE = {"int64": ("LongStorage", 8), "bfloat16": ("BFloat16Storage", 2)}


# ---- data.pkl --------------------------------------------------------------------------------

class _Pickle(object):
    """The protocol-2 opcodes Python's pickle.Pickler emits for torch.save's objects."""

    def __init__(self):
        self.out, self.memo, self.n = [b"\x80\x02"], {}, 0

    def _put(self):
        n, self.n = self.n, self.n + 1
        self.out.append(struct.pack("<BB", 0x71, n) if n < 256 else struct.pack("<BI", 0x72, n))  # BINPUT / LONG_BINPUT
        return n

    def _shared(self, key, write):
        """An object torch passes by identity each time: written once, then BINGET."""
        if key in self.memo:
            n = self.memo[key]
            self.out.append(struct.pack("<BB", 0x68, n) if n < 256 else struct.pack("<BI", 0x6A, n))
            return
        write()
        self.memo[key] = self._put()

    def text(self, s, shared=False):
        body = s.encode("utf-8")
        write = lambda: self.out.append(struct.pack("<BI", 0x58, len(body)) + body)  # BINUNICODE
        if shared:
            return self._shared(("s", s), write)
        write()
        self._put()

    def glob(self, module, name):
        self._shared(("g", module, name), lambda: self.out.append(b"c%s\n%s\n" % (module.encode(), name.encode())))

    def int(self, n):
        if 0 <= n < 0x100:
            self.out.append(struct.pack("<BB", 0x4B, n))  # BININT1
        elif 0 <= n < 0x10000:
            self.out.append(struct.pack("<BH", 0x4D, n))  # BININT2
        elif -0x80000000 <= n < 0x80000000:
            self.out.append(struct.pack("<Bi", 0x4A, n))  # BININT
        else:  # LONG1: shortest two's complement, as pickle.encode_long
            b = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
            self.out.append(struct.pack("<BB", 0x8A, len(b)) + b)

    def tuple(self, items):
        if not items:
            return self.out.append(b")")  # EMPTY_TUPLE is never memoized
        if len(items) > 3:
            self.out.append(b"(")
        for write in items:
            write()
        self.out.append(bytes([0x74 if len(items) > 3 else 0x84 + len(items)]))  # TUPLE / TUPLE1-3
        self._put()

    def op(self, code):
        self.out.append(code)


def feature_pickle(tensors):
    """data.pkl for a dict of fresh contiguous CPU tensors [(key, dtype, shape)], storages '0'...'n-1'."""
    p = _Pickle()
    p.op(b"}")  # EMPTY_DICT
    p._put()
    if len(tensors) > 1:
        p.op(b"(")
    for k, (key, dtype, shape) in enumerate(tensors):
        cls, _ = STORAGE[dtype]
        numel = 1
        for d in shape:
            numel *= d
        stride = [1] * len(shape)
        for j in range(len(shape) - 2, -1, -1):
            stride[j] = stride[j + 1] * shape[j + 1]
        p.text(key)
        p.glob("torch._utils", "_rebuild_tensor_v2")

        def pid(cls=cls, k=k, numel=numel):
            p.tuple([lambda: p.text("storage", True), lambda: p.glob("torch", cls), lambda: p.text(str(k)),
                     lambda: p.text("cpu", True), lambda: p.int(numel)])
            p.op(b"Q")  # BINPERSID

        def hooks():
            p.glob("collections", "OrderedDict")
            p.tuple([])
            p.op(b"R")
            p._put()
        p.tuple([pid, lambda: p.int(0), lambda: p.tuple([(lambda d=d: p.int(d)) for d in shape]),
                 lambda: p.tuple([(lambda d=d: p.int(d)) for d in stride]), lambda: p.op(b"\x89"), hooks])
        p.op(b"R")  # REDUCE
        p._put()
        if len(tensors) == 1:
            p.op(b"s")  # SETITEM
    if len(tensors) > 1:
        p.op(b"u")  # SETITEMS (one batch: Python batches 1000 items)
    p.op(b".")
    return b"".join(p.out)


# ---- .data/serialization_id ------------------------------------------------------------------

def _std_hash(b):
    """libstdc++'s std::hash<std::string> on x86_64: _Hash_bytes, MurmurHash2-64A, seed 0xc70f6907."""
    m, h = 0xC6A4A7935BD1E995, (0xC70F6907 ^ (len(b) * 0xC6A4A7935BD1E995)) & M64
    n = len(b) & ~7
    for (k,) in struct.iter_unpack("<Q", b[:n]):
        k = (k * m) & M64
        k = ((k ^ (k >> 47)) * m) & M64
        h = ((h ^ k) * m) & M64
    if len(b) & 7:
        h = ((h ^ int.from_bytes(b[n:], "little")) * m) & M64
    h = ((h ^ (h >> 47)) * m) & M64
    return h ^ (h >> 47)


def _hash_combine(seed, v):
    """c10::hash_combine (c10/util/hash.h) on 64-bit size_t."""
    return (seed ^ ((v + 0x9E3779B9 + ((seed << 6) & M64) + (seed >> 2)) & M64)) & M64


def _unordered_order(hashes):
    """Iteration order of a libstdc++ unordered_set after inserting keys with these hashes."""
    if len(hashes) > 13:  # a rehash would reorder; torch.save of four tensors writes nine records
        raise ValueError("serialization id: more than 13 records is not modelled")
    nodes, first = {}, None  # a singly linked list; each bucket remembers the node before its run
    before = {}
    for i, h in enumerate(hashes):
        b = h % 13
        if b in before:
            prev = before[b]
            if prev is None:
                nodes[i], first = first, i
            else:
                nodes[i], nodes[prev] = nodes[prev], i
        else:
            nodes[i], first = first, i
            if nodes[i] is not None:
                before[hashes[nodes[i]] % 13] = i
            before[b] = None
    out, at = [], first
    while at is not None:
        out.append(at)
        at = nodes[at]
    return out


@functools.lru_cache(maxsize=16)
def _names_hash(names):
    """Every feature file has the same record names: hashed (in Python, slowly) once."""
    names_hash = 0
    hashes = [_std_hash(n.encode("utf-8")) for n in names]
    for j in _unordered_order(hashes):
        names_hash = _hash_combine(names_hash, hashes[j])
    return names_hash


def serialization_id(names, crcs):
    names_hash = _names_hash(tuple(names))
    crc_hash = 0
    for c in crcs:
        crc_hash = _hash_combine(crc_hash, c)
    return "%020d%020d" % (names_hash, crc_hash)


# ---- the zip -----------------------------------------------------------------------------------

def _multmodp(a, b):
    """a × b modulo the CRC-32 polynomial, bit-reflected (zlib 1.2.12+ crc32.c multmodp)."""
    m, p = 1 << 31, 0
    while True:
        if a & m:
            p ^= b
            if a & (m - 1) == 0:
                return p
        m >>= 1
        b = (b >> 1) ^ 0xEDB88320 if b & 1 else b >> 1


_X2N = [1 << 30]  # x^(2^k) modulo the polynomial
for _ in range(31):
    _X2N.append(_multmodp(_X2N[-1], _X2N[-1]))


def _x2nmodp(n, k):
    p = 1 << 31
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return p


# A copy part: the writing thread reads it into a buffer of its own, takes its CRC there and
# writes it out, so the dump's bytes leave memory once (a CRC over a mapped dump beside a write
# from the same map reads them twice) and the buffer is still in cache for the CRC and the write.
# The converter writes several files at once, one per thread (aerie_hs/ckpt.py), so each thread
# holds one such buffer. Its shift for crc32_combine is computed once.
PART = 1 << 20
_SHIFT = {PART: _x2nmodp(PART, 3)}
_local = threading.local()


def crc32_combine(crc1, crc2, len2):
    """The CRC-32 of A+B from those of A and B (zlib's crc32_combine, which Python's zlib lacks)."""
    shift = _SHIFT.get(len2)
    if shift is None:
        shift = _x2nmodp(len2, 3)
    return _multmodp(shift, crc1) ^ crc2


def _pwrite_all(fd, b, at):
    view = memoryview(b)
    while view:  # a write may take less than it is given
        n = os.pwrite(fd, view, at)
        view, at = view[n:], at + n


def _copy_part(src, s_at, dst, d_at, n):
    """Bytes [s_at, s_at + n) of src to dst at d_at through this thread's buffer; their CRC-32.
    preadv, crc32 and pwrite all release the GIL, so threads writing other files run alongside."""
    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = bytearray(PART)
    view = memoryview(buf)[:n]
    got = 0
    while got < n:
        k = os.preadv(src, [view[got:]], s_at + got)
        if k == 0:
            raise OSError(errno.EIO, "source ended at byte %d, %d bytes short" % (s_at + got, n - got))
        got += k
    crc = zlib.crc32(view)
    _pwrite_all(dst, view, d_at)
    return crc


class TorchZip(object):
    """PyTorchStreamWriter's archive. Every byte goes down with pwrite at its own offset: the
    small entries are gathered and written at once, the large ones copied part by part from the
    source file, each entry's CRC and size following its data."""

    def __init__(self, f, archive):
        self.fd, self.archive, self.pos = f.fileno(), archive, 0
        self.central, self.names, self.crcs = [], [], []
        self._pending, self._at = [], 0  # bytes not yet written, and where they go

    def _w(self, b):
        self._pending.append(b)
        self.pos += len(b)

    def flush(self):
        if self._pending:
            _pwrite_all(self.fd, b"".join(self._pending), self._at)
        self._pending, self._at = [], self.pos

    def _header(self, name):
        full = ("%s/%s" % (self.archive, name)).encode("utf-8")
        pad = (-(self.pos + 30 + len(full) + 4)) % ALIGN
        if self.pos >= U32:
            raise ValueError("%s: archive passes 4 GiB; torch would switch this entry to zip64 fields" % name)
        at = self.pos
        self._w(struct.pack("<IHHHHHIIIHH", 0x04034B50, 0, 0x0808, 0, 0, 0, 0, 0, 0, len(full), 4 + pad)
                + full + b"FB" + struct.pack("<H", pad) + b"Z" * pad)
        return full, at

    def _end(self, name, full, at, crc, size, head):
        if size >= U32:
            raise ValueError("%s: %d bytes needs zip64 sizes" % (name, size))
        # ostream_write_func folds in the CRC of anything written that starts like a data
        # descriptor; a record's data goes down in one write, so data that happens to begin
        # with PK\x07\x08 counts too.
        if size >= 8 and head[:4] == b"PK\x07\x08":
            self.crcs.append(struct.unpack("<I", head[4:8])[0])
        self.crcs.append(crc)
        self.names.append(name)
        self.central.append(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0, 0, 0x0808, 0, 0, 0, crc,
                                        size, size, len(full), 0, 0, 0, 0, 0, at) + full)
        return struct.pack("<IIII", 0x08074B50, crc, size, size)

    def add(self, name, b):
        full, at = self._header(name)
        self._w(b)
        self._w(self._end(name, full, at, zlib.crc32(b), len(b), bytes(b[:8])))

    def copy(self, name, src, begin, end):
        """An entry of bytes [begin, end) of the file descriptor src; what was gathered before
        it goes down first."""
        full, at = self._header(name)
        self.flush()
        crc, data_at = 0, self.pos
        for k in range(begin, end, PART):
            m = min(PART, end - k)
            c = _copy_part(src, k, self.fd, data_at + (k - begin), m)
            crc = crc32_combine(crc, c, m) if k > begin else c
        n = end - begin
        self.pos = self._at = data_at + n
        self._w(self._end(name, full, at, crc, n, os.pread(src, 8, begin) if n >= 8 else b""))

    def finish(self):
        self.add("version", b"3\n")
        self.add(".data/serialization_id", serialization_id(self.names, self.crcs).encode())
        cd = b"".join(self.central)
        at, n = self.pos, len(self.central)
        self._w(cd)
        self._w(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 0x2D, 0, 0, n, n, len(cd), at))
        self._w(struct.pack("<IIQI", 0x07064B50, 0, at + len(cd), 1))
        self._w(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(cd), at, 0))
        self.flush()
