#!/usr/bin/env python3
"""Independent reference for hrw's contracts (docs/HASHING.md), in Python.

Prints the pinned test vectors that the Rust and ExUnit suites assert, computed from the
written spec rather than from the library, so a drift in either is caught.

The skeleton part (§4) follows the text step by step and shares no structure with
native/hrw_core/src/skeleton/: a recursive trie of Python objects instead of the
breadth-first array with filler slots, weight sums removed by rescanning each
subtree's members per step instead of per-slot tables, leaf picks by the exact §3
key of every node instead of bounds that skip the logarithm, and weights split with
math.frexp instead of bit fields.
Needs `pip install xxhash`. Usage, one mode per run:
  python3 docs/reference.py                                             # vectors
  python3 docs/reference.py fixture test/fixtures/reference_owners.tsv   # list owners
  python3 docs/reference.py skeleton test/fixtures/reference_skeleton.tsv
  python3 docs/reference.py terms test/fixtures/reference_terms.tsv      # term ids
"""
import struct
import xxhash

MASK = (1 << 64) - 1
TERM_SEED = 0x485257315445524D


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & MASK


def prep(key):
    k = (key + 0x9E3779B97F4A7C15) & MASK
    k ^= k >> 32
    k = (k * 0xBF58476D1CE4E5B9) & MASK
    return k ^ (k >> 27)


def n3(key, node):
    x = prep(key) ^ node
    x = x ^ rotl(x, 17) ^ rotl(x, 43)
    x = (x * 0x2CB0F69F4ABEA221) & MASK
    x ^= x >> 27
    x = rotl(x, 23)
    x = (x * 0xB19E04CB9DCE3147) & MASK
    x ^= x >> 31
    x = (x * 0xBF58476D1CE4E5B9) & MASK
    return x ^ (x >> 33)


def tagged(tag, payload=b""):
    return xxhash.xxh3_64_intdigest(bytes([tag]) + payload, seed=TERM_SEED)


def ids(xs):
    return b"".join(struct.pack("<Q", x) for x in xs)


def t_binary(b):
    return xxhash.xxh3_64_intdigest(b, seed=0)


def t_int(v):
    mag = abs(v)
    return tagged(0x01, bytes([1 if v < 0 else 0]) + mag.to_bytes((mag.bit_length() + 7) // 8, "little"))


def t_float(f):
    if f == 0.0:
        f = 0.0
    return tagged(0x02, struct.pack("<d", f))


def t_atom(name):
    return tagged(0x03, name.encode("utf-8"))


def t_bits(data, nbits):
    return tagged(0x04, struct.pack("<Q", nbits) + data)


def t_tuple(*els):
    return tagged(0x05, ids(els))


def t_list(*els):
    return tagged(0x06, ids(els))


def t_improper(els, tail):
    return tagged(0x07, ids(list(els) + [tail]))


def t_map(pairs):
    return tagged(0x08, b"".join(ids(p) for p in sorted(pairs)))


def t_opaque(tag, etf):
    """A pid (0x09), port (0x0A), reference (0x0B) or fun (0x0C): its whole
    term_to_binary, version byte 131 included."""
    return tagged(tag, etf)


# ---------------------------------------------------------------------------
# Any term (docs/HASHING.md §2), and the external term format (ETF) that
# :erlang.binary_to_term/1 reads, written here from the ETF's documentation, so
# ExUnit can rebuild each generated term in the VM and compare ids.
#
# Python values stand for Erlang terms: int, float, bytes (a binary), Atom, Bits (a
# bitstring that is not whole bytes), tuple, list (proper), Improper, Map, Opaque.

class Atom(str):
    pass


class Bits:
    """A bitstring of `nbits` bits (not a multiple of 8) in `data`; the unused low
    bits of the last byte may hold anything (they are not part of the value)."""

    def __init__(self, data, nbits):
        assert nbits % 8 and len(data) == (nbits + 7) // 8
        self.data, self.nbits = data, nbits


class Improper:
    """[e1, ..., en | tail] with n >= 1 and a tail that is not a list."""

    def __init__(self, elements, tail):
        assert elements and not isinstance(tail, (list, Improper))
        self.elements, self.tail = elements, tail


class Map:
    def __init__(self, pairs):
        self.pairs = pairs


class Opaque:
    """A pid, port, reference or fun given by its ETF body (after the 131)."""

    def __init__(self, tag, body, kind):
        self.tag, self.body, self.kind = tag, body, kind


def term_id(t):
    if isinstance(t, bool):
        raise TypeError("use Atom('true') / Atom('false')")
    if isinstance(t, bytes):
        return t_binary(t)
    if isinstance(t, Atom):
        return t_atom(str(t))
    if isinstance(t, int):
        return t_int(t)
    if isinstance(t, float):
        return t_float(t)
    if isinstance(t, Bits):
        data = bytearray(t.data)
        data[-1] &= (0xFF << (8 - t.nbits % 8)) & 0xFF
        return t_bits(bytes(data), t.nbits)
    if isinstance(t, tuple):
        return t_tuple(*[term_id(e) for e in t])
    if isinstance(t, list):
        return t_list(*[term_id(e) for e in t])
    if isinstance(t, Improper):
        return t_improper([term_id(e) for e in t.elements], term_id(t.tail))
    if isinstance(t, Map):
        return t_map([(term_id(k), term_id(v)) for k, v in t.pairs])
    if isinstance(t, Opaque):
        return t_opaque(t.tag, bytes([131]) + t.body)
    raise TypeError(type(t))


def etf_atom(name, latin1=False):
    if latin1:  # ATOM_EXT: what OTP 25's term_to_binary writes for Latin-1 names
        b = name.encode("latin-1")
        return bytes([100]) + struct.pack(">H", len(b)) + b
    b = name.encode("utf-8")
    if len(b) < 256:  # SMALL_ATOM_UTF8_EXT
        return bytes([119, len(b)]) + b
    return bytes([118]) + struct.pack(">H", len(b)) + b  # ATOM_UTF8_EXT


def etf_body(t):
    if isinstance(t, bytes):
        return bytes([109]) + struct.pack(">I", len(t)) + t  # BINARY_EXT
    if isinstance(t, Atom):
        return etf_atom(str(t))
    if isinstance(t, int):
        if 0 <= t < 256:
            return bytes([97, t])  # SMALL_INTEGER_EXT
        if -(2**31) <= t < 2**31:
            return bytes([98]) + struct.pack(">i", t)  # INTEGER_EXT
        mag = abs(t)
        digits = mag.to_bytes((mag.bit_length() + 7) // 8, "little")
        sign = bytes([1 if t < 0 else 0])
        if len(digits) < 256:
            return bytes([110, len(digits)]) + sign + digits  # SMALL_BIG_EXT
        return bytes([111]) + struct.pack(">I", len(digits)) + sign + digits  # LARGE_BIG_EXT
    if isinstance(t, float):
        return bytes([70]) + struct.pack(">d", t)  # NEW_FLOAT_EXT
    if isinstance(t, Bits):  # BIT_BINARY_EXT: length, bits used in the last byte
        return bytes([77]) + struct.pack(">IB", len(t.data), t.nbits % 8) + t.data
    if isinstance(t, tuple):
        head = bytes([104, len(t)]) if len(t) < 256 else bytes([105]) + struct.pack(">I", len(t))
        return head + b"".join(etf_body(e) for e in t)
    if isinstance(t, list):
        if not t:
            return bytes([106])  # NIL_EXT
        if len(t) < 65536 and all(isinstance(e, int) and not isinstance(e, bool) and 0 <= e < 256 for e in t):
            return bytes([107]) + struct.pack(">H", len(t)) + bytes(t)  # STRING_EXT
        return bytes([108]) + struct.pack(">I", len(t)) + b"".join(etf_body(e) for e in t) + bytes([106])
    if isinstance(t, Improper):
        return (bytes([108]) + struct.pack(">I", len(t.elements))
                + b"".join(etf_body(e) for e in t.elements) + etf_body(t.tail))
    if isinstance(t, Map):
        return (bytes([116]) + struct.pack(">I", len(t.pairs))
                + b"".join(etf_body(k) + etf_body(v) for k, v in t.pairs))
    if isinstance(t, Opaque):
        return t.body
    raise TypeError(type(t))


def etf(t):
    return bytes([131]) + etf_body(t)


class TermGen:
    """Seeded random terms of every type, weighted towards the edges."""

    INT_EDGES = [0, 1, 255, 256, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 2**64 - 1, 2**64,
                 2**127 - 1, 2**127, 2**128 - 1, 2**128, 2**2040 - 1, 2**2040]
    FLOAT_EDGES = [0.0, -0.0, 1.0, -1.0, 5e-324, -5e-324, 2.2250738585072009e-308,
                   2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308,
                   0.1, 1e100, -2.5, 9007199254740993.0]
    # Code point ranges for atom names: ASCII, Latin-1, the rest of the BMP (no
    # surrogates), beyond the BMP.
    CHAR_RANGES = [(0x20, 0x7E), (0x80, 0xFF), (0x100, 0x7FF), (0x800, 0xD7FF),
                   (0xE000, 0xFFFD), (0x10000, 0x10FFFF)]

    def __init__(self, seed):
        import random
        self.rng = random.Random(seed)
        self.top = True

    def integer(self):
        r = self.rng
        pick = r.random()
        if pick < 0.3:
            v = r.choice(self.INT_EDGES) + r.choice([-1, 0, 0, 1])
        elif pick < 0.6:
            v = r.getrandbits(r.choice([7, 8, 16, 31, 32, 33, 62, 63, 64, 65]))
        elif pick < 0.95 or not self.top:
            v = r.getrandbits(r.randint(65, 300))
        elif pick < 0.995:
            v = r.getrandbits(r.randint(300, 20000))
        else:
            v = 1 << r.randint(20000, 120000)
        return -v if r.random() < 0.5 else v

    def float(self):
        r = self.rng
        if r.random() < 0.2:
            return r.choice(self.FLOAT_EDGES)
        while True:
            bits = r.getrandbits(64)
            if r.random() < 0.2:
                bits &= ~(0x7FF << 52)  # subnormal (or zero)
            if (bits >> 52) & 0x7FF != 0x7FF:  # no infinities or NaNs in Erlang
                return struct.unpack("<d", struct.pack("<Q", bits))[0]

    def atom(self):
        r = self.rng
        pick = r.random()
        if pick < 0.05:
            return Atom(r.choice(["", "true", "false", "nil", "a", "λ", "日本", "é", "ÿ", "Ā", "😀"]))
        n = r.randint(0, 255) if pick < 0.15 and self.top else r.randint(1, 12)
        lo_hi = r.choice(self.CHAR_RANGES) if r.random() < 0.5 else None
        chars = []
        for _ in range(n):
            lo, hi = lo_hi or r.choice(self.CHAR_RANGES)
            chars.append(chr(r.randint(lo, hi)))
        return Atom("".join(chars))

    def binary(self):
        r = self.rng
        n = r.randint(0, 40) if r.random() < 0.95 or not self.top else r.randint(41, 3000)
        return bytes(r.getrandbits(8) for _ in range(n))

    def bits(self):
        r = self.rng
        nbytes = r.randint(0, 6) if r.random() < 0.8 or not self.top else r.randint(7, 400)
        nbits = 8 * nbytes + r.randint(1, 7)
        # Random bytes, unused low bits of the last byte included.
        return Bits(bytes(r.getrandbits(8) for _ in range((nbits + 7) // 8)), nbits)

    def node_atom(self):
        return "n%d@host-%d" % (self.rng.randint(0, 99), self.rng.randint(0, 9))

    def opaque(self):
        r = self.rng
        kind = r.choice(["pid", "port", "ref", "fun"])
        if kind == "pid":  # NEW_PID_EXT: node, ID (15 bits), serial (13 bits), creation
            body = (bytes([88]) + etf_atom(self.node_atom(), latin1=True)
                    + struct.pack(">III", r.getrandbits(15), r.getrandbits(13), r.getrandbits(32)))
            return Opaque(0x09, body, kind)
        if kind == "port":  # NEW_PORT_EXT: node, ID (28 bits), creation
            body = (bytes([89]) + etf_atom(self.node_atom(), latin1=True)
                    + struct.pack(">II", r.getrandbits(28), r.getrandbits(32)))
            return Opaque(0x0A, body, kind)
        if kind == "ref":  # NEWER_REFERENCE_EXT: length, node, creation, ids (first 18 bits)
            ids = [r.getrandbits(18), r.getrandbits(32), r.getrandbits(32)]
            body = (bytes([90]) + struct.pack(">H", 3) + etf_atom(self.node_atom(), latin1=True)
                    + struct.pack(">I", r.getrandbits(32)) + b"".join(struct.pack(">I", i) for i in ids))
            return Opaque(0x0B, body, kind)
        # EXPORT_EXT: fun Module:Function/Arity
        mod = "m%d" % r.randint(0, 999)
        fun = "f%d" % r.randint(0, 999)
        body = (bytes([113]) + etf_atom(mod, latin1=True) + etf_atom(fun, latin1=True)
                + bytes([97, r.randint(0, 255)]))
        return Opaque(0x0C, body, kind)

    SCALARS = ["integer", "float", "atom", "binary", "bits", "opaque"]

    def scalar(self):
        return getattr(self, self.rng.choice(self.SCALARS))()

    def size(self, depth):
        """Children of a container whose children may nest `depth` more levels:
        wide containers only near the leaves, so a term stays small."""
        r = self.rng
        return r.randint(5, 24) if depth == 0 and r.random() < 0.2 else r.randint(0, 4)

    def term(self, depth):
        r = self.rng
        if depth <= 0 or r.random() < 0.45:
            return self.scalar()
        kind = r.choice(["tuple", "list", "charlist", "improper", "map", "map"])
        return getattr(self, kind)(depth - 1)

    def tuple(self, depth):
        n = self.size(depth) if self.rng.random() < 0.98 or depth > 0 else 300
        return tuple(self.term(depth) for _ in range(n))

    def list(self, depth):
        return [self.term(depth) for _ in range(self.size(depth))]

    def charlist(self, depth):
        return [self.rng.randint(0, 255) for _ in range(self.rng.randint(1, 30))]

    def improper(self, depth):
        tail = self.term(depth)
        while isinstance(tail, (list, Improper)):
            tail = self.scalar()
        return Improper([self.term(depth) for _ in range(self.rng.randint(1, 5))], tail)

    def map(self, depth, n=None, small_values=None):
        n = self.size(depth) if n is None else n
        pairs, seen = [], set()
        while len(pairs) < n:
            k = self.term(depth) if small_values is None else self.small_key()
            kid = term_id(k)  # distinct ids: distinct keys (0.0 and -0.0 share one)
            if kid not in seen:
                seen.add(kid)
                pairs.append((k, self.term(depth) if small_values is None else small_values()))
        return Map(pairs)

    def small_key(self):
        r = self.rng
        return r.choice([lambda: r.randint(-300, 300), lambda: r.getrandbits(70), self.float,
                         lambda: Atom("k%d" % r.randint(0, 999)),
                         lambda: bytes(r.getrandbits(8) for _ in range(r.randint(0, 6))),
                         lambda: (Atom("id"), r.randint(0, 99))])()

    def bigmap(self, depth):
        # More than 32 keys: the VM stores these as HAMTs, iterated in hash order.
        n = self.rng.randint(33, 80) if self.rng.random() < 0.95 else 300
        return self.map(0, n, lambda: self.rng.choice([self.rng.randint(-5, 5), Atom("v")]))

    KINDS = SCALARS + ["tuple", "list", "charlist", "improper", "map", "bigmap", "nested"]

    def case(self, kind):
        # Huge scalars (bignums to 2^120000, long binaries, bitstrings and atom
        # names) only at the top, so that containers stay small.
        self.top = kind in self.SCALARS
        if self.top:
            return getattr(self, kind)()
        if kind == "nested":
            return self.term(6)
        return getattr(self, kind)(self.rng.randint(0, 2))


def kind_of(t):
    for cls, name in [(bytes, "binary"), (Atom, "atom"), (float, "float"), (Bits, "bits"),
                      (tuple, "tuple"), (list, "list"), (Improper, "improper"), (Map, "map")]:
        if isinstance(t, cls):
            return name
    if isinstance(t, int):
        return "integer"
    return t.kind  # Opaque


def terms_fixture(path, cases=10400, seed=11):
    """Writes `base64 of the ETF<TAB>id in hex<TAB>type` lines for ExUnit: `cases`
    random terms, every kind in turn."""
    import base64

    gen = TermGen(seed)
    with open(path, "w") as out:
        for i in range(cases):
            t = gen.case(TermGen.KINDS[i % len(TermGen.KINDS)])
            out.write(f"{base64.b64encode(etf(t)).decode()}\t{term_id(t):016x}\t{kind_of(t)}\n")


# -- §3 weighted costs ---------------------------------------------------------------

TWO_OVER_LN2 = struct.unpack("<d", struct.pack("<Q", 0x40071547652B82FE))[0]


def neg_log2_uniform(score):
    """c = -log2(n / 2^53), n = floor(score / 2^11) + 1, as docs/HASHING.md §3 spells it."""
    n = (score >> 11) + 1
    e = n.bit_length() - 1
    m = float(n) / float(1 << e)
    s = (m - 1.0) / (m + 1.0)
    z = s * s
    p = 1.0 / 21.0
    for d in [19.0, 17.0, 15.0, 13.0, 11.0, 9.0, 7.0, 5.0, 3.0, 1.0]:
        p = p * z + 1.0 / d
    g = min((s * p) * TWO_OVER_LN2, 1.0)
    return float(53 - e) - g


def cost_key(score, weight):
    """§3: w = m·2^e (1 <= m < 2); q = c / m; key = bits(q) + (53 - e)·2^52, or 0."""
    import math
    f, x = math.frexp(float(weight))  # weight = f·2^x, 0.5 <= f < 1, exact
    m, e = 2.0 * f, x - 1
    q = neg_log2_uniform(score) / m
    if q == 0.0:
        return 0
    return struct.unpack("<Q", struct.pack("<d", q))[0] + ((53 - e) << 52)


def weighted_rank(score, weight):
    """Lower wins: the cost key, then the higher raw score."""
    return (cost_key(score, weight), -score)


WEIGHTED = [(0, 1.0), (2**64 - 1, 1.0), (0x89DB37561974918F, 1.0), (0x46C048F57BEF0291, 2.0),
            (0x0123456789ABCDEF, 0.5), (0xFEDCBA9876543210, 10.0), (1 << 63, 3.0), (12345678901234567, 7.25),
            (0x1234, 5e-324, ), (0xFFFFFFFFFFFFF7FF, 9007199254740992.0), (0xFFFFFFFFFFFFF800, 1e-310),
            (0x5A5A5A5A5A5A5A5A, 1e-300), (0x5A5A5A5A5A5A5A5A, 2.0**-1022)]

# (label, Elixir source of the term, id)
TERMS = [
    ("empty binary", '""', t_binary(b"")),
    ("binary", '"user:42"', t_binary(b"user:42")),
    ("utf8 binary", '"héllo"', t_binary("héllo".encode())),
    ("zero", "0", t_int(0)),
    ("one", "1", t_int(1)),
    ("minus one", "-1", t_int(-1)),
    ("i64 max", "9_223_372_036_854_775_807", t_int(2**63 - 1)),
    ("u64 max", "18_446_744_073_709_551_615", t_int(2**64 - 1)),
    ("bignum", "-340_282_366_920_938_463_463_374_607_431_768_211_457", t_int(-(2**128 + 1))),
    ("float one", "1.0", t_float(1.0)),
    ("float", "-2.5", t_float(-2.5)),
    ("atom", ":a", t_atom("a")),
    ("nil", "nil", t_atom("nil")),
    ("unicode atom", ":\"ünï\"", t_atom("ünï")),
    ("bitstring", "<<5::3>>", t_bits(bytes([0b10100000]), 3)),
    ("empty tuple", "{}", t_tuple()),
    ("tuple", '{:user, 42}', t_tuple(t_atom("user"), t_int(42))),
    ("empty list", "[]", t_list()),
    ("list", "[1, 2, 3]", t_list(t_int(1), t_int(2), t_int(3))),
    ("charlist", "'ab'", t_list(t_int(97), t_int(98))),
    ("improper list", "[1 | 2]", t_improper([t_int(1)], t_int(2))),
    ("empty map", "%{}", t_map([])),
    ("map", '%{"b" => 2, a: 1}', t_map([(t_atom("a"), t_int(1)), (t_binary(b"b"), t_int(2))])),
    ("nested", '{"x", [1.5, %{k: {}}]}', t_tuple(t_binary(b"x"), t_list(t_float(1.5), t_map([(t_atom("k"), t_tuple())])))),
]

def boundary_terms():
    """(label, Elixir source, id) at the edges of every type: integers around
    ±2^63, ±2^64, ±2^127, ±2^128 and 2^2040 (±1 each) and far beyond, atoms
    outside ASCII and Latin-1, special floats, bitstrings of every length mod 8,
    maps large enough to be HAMTs."""
    out = []
    for b in [63, 64, 127, 128, 2040]:
        for d in [-1, 0, 1]:
            for sign in [1, -1]:
                v = sign * (2**b + d)
                body = "2 ** %d %s 1" % (b, "+" if d > 0 else "-") if d else "2 ** %d" % b
                src = f"-({body})" if sign < 0 else body
                out.append((f"int {src}", src, t_int(v)))
    for b in [1000, 100000]:
        for sign in [1, -1]:
            src = f"-(2 ** {b})" if sign < 0 else f"2 ** {b}"
            out.append((f"int {src}", src, t_int(sign * 2**b)))
    for name in ["é", "ÿ", "Ā", "λ", "日本", "😀", "", "a" * 255, "é" * 255, "λ" * 255, "😀" * 255]:
        src = ':"%s"' % name if len(name) < 8 else ':"#{String.duplicate("%s", 255)}"' % name[0]
        out.append((f"atom {name[:3]!r}x{len(name)}", src, t_atom(name)))
    for f, src in [(-0.0, "-0.0"), (5e-324, "5.0e-324"), (-5e-324, "-5.0e-324"),
                   (2.2250738585072009e-308, "2.225073858507201e-308"),
                   (1.7976931348623157e308, "1.7976931348623157e308"),
                   (-1.7976931348623157e308, "-1.7976931348623157e308")]:
        out.append((f"float {src}", src, t_float(f)))
    for nbits in [1, 2, 3, 4, 5, 6, 7, 9, 15, 17, 63, 65, 1001]:
        # All ones: the Elixir value is <<-1::size(nbits)>>.
        nbytes = (nbits + 7) // 8
        data = bytearray([0xFF] * nbytes)
        data[-1] = (0xFF << (8 - nbits % 8)) & 0xFF
        out.append((f"bits {nbits}", f"<<-1::size({nbits})>>", t_bits(bytes(data), nbits)))
    for n in [32, 33, 100]:
        src = f"Map.new(1..{n}, &{{&1, &1}})"
        out.append((f"map {n}", src, t_map([(t_int(i), t_int(i)) for i in range(1, n + 1)])))
    out.append(("improper binary tail", '["a" | "b"]', t_improper([t_binary(b"a")], t_binary(b"b"))))
    out.append(("improper atom tail", "[1, 2 | :a]", t_improper([t_int(1), t_int(2)], t_atom("a"))))
    return out


N3_PAIRS = [(0, 0), (1, 0), (0, 1), (2**64 - 1, 2**63), (0x0123456789ABCDEF, 0xFEDCBA9876543210),
            (42, 2**29), (2**32, 2**59), (0xDEADBEEF, 7)]

def print_vectors():
    print("# N3 (key, node, score)")
    for k, n in N3_PAIRS:
        print(f"({k:#x}, {n:#x}, {n3(k, n):#x}),")
    print("# weighted (score, weight, cost key)")
    for sc, w in WEIGHTED:
        print(f"({sc:#x}, {w!r}, {cost_key(sc, w):#x}),")
    print("# term ids (label, source, id)")
    for label, src, i in TERMS:
        print(f"{label!r}, {src}, {i:#018x}")
    print("# boundary term ids (label, source, id)")
    for label, src, i in boundary_terms():
        print(f"{label!r}, {src}, {i:#018x}")
    print("# weighted owners over [{a,1},{b,2},{c,3},{d,10},{e,0.5}] (key, owner)")
    wnodes = [("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 10.0), ("e", 0.5)]
    for key in [f"key-{i}" for i in range(1, 21)]:
        k = t_binary(key.encode())
        best = min(wnodes, key=lambda nw: weighted_rank(n3(k, t_binary(nw[0].encode())), nw[1]))
        print(best[0], end="")
    print()
    print("# owners of key over nodes node-0..node-9 (key, owner)")
    nodes = [f"node-{i}" for i in range(10)]
    for key in ["", "a", "user:42", "192.168.0.1", "ключ"]:
        kid = t_binary(key.encode())
        owner = max(nodes, key=lambda n: n3(kid, t_binary(n.encode())))
        print(f"{key!r} -> {owner}")


def fixture(path, cases=300, seed=7):
    """Writes `key<TAB>nodes,comma,separated<TAB>owner<TAB>top3` lines for ExUnit."""
    import random

    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-:._"
    with open(path, "w") as out:
        for _ in range(cases):
            key = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
            nodes = sorted({"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24)))
                            for _ in range(rng.randint(1, 60))})
            rng.shuffle(nodes)
            kid = t_binary(key.encode())
            ranked = sorted(nodes, key=lambda n: n3(kid, t_binary(n.encode())), reverse=True)
            out.write(f"{key}\t{','.join(nodes)}\t{ranked[0]}\t{','.join(ranked[:3])}\n")


# -- §4 skeleton placements, written from docs/HASHING.md §4 alone ---------------------

SKELETON_SALT = 0x736B656C65746F6E
COIN_STEP = 0xA0761D6478BD642F
COIN_XOR = 0xE7037ED1A0B428DB
GOLDEN = 0x9E3779B97F4A7C15


def threshold(wl, wr):
    """t(wl, wr) = trunc(wl / (wl + wr) × 2^64); 0 when both are 0; 2^64 − 1 at the top."""
    if wl + wr == 0.0:
        return 0
    x = (wl / (wl + wr)) * 2.0**64
    return (1 << 64) - 1 if x >= 2.0**64 else int(x)


def coin(seed, b):
    x = (seed + (b + 1) * COIN_STEP) & MASK
    m = x * (x ^ COIN_XOR)
    return (m >> 64) ^ (m & MASK)


class Leaf:
    def __init__(self, nodes, weighted):
        self.nodes = nodes  # [(route, index, id, weight)], ascending route
        self.mass = 0.0
        for node in nodes:
            self.mass = self.mass + (node[3] if weighted else 1.0)


class Split:
    def __init__(self, bit, left, right):
        self.bit, self.left, self.right = bit, left, right
        self.mass = left.mass + right.mass


def subtree(nodes, leaf_size, weighted):
    if len(nodes) <= leaf_size:
        return Leaf(nodes, weighted)
    bit = 64 - (nodes[0][0] ^ nodes[-1][0]).bit_length()  # first differing bit, MSB = 0
    left = [n for n in nodes if not (n[0] >> (63 - bit)) & 1]
    right = [n for n in nodes if (n[0] >> (63 - bit)) & 1]
    return Split(bit, subtree(left, leaf_size, weighted), subtree(right, leaf_size, weighted))


def members(tree):
    if isinstance(tree, Leaf):
        return tree.nodes
    return members(tree.left) + members(tree.right)


def skeleton(entries, leaf_size):
    """entries: [(id, weight)] in input order. Returns (root, weighted)."""
    first = {}
    for index, (node_id, weight) in enumerate(entries):
        if node_id not in first:
            first[node_id] = [index, weight]
        elif weight > first[node_id][1]:
            first[node_id][1] = weight
    weighted = len({w for _, w in first.values()}) > 1
    nodes = sorted((prep(i), index, i, w) for i, (index, w) in first.items())
    return subtree(nodes, leaf_size, weighted), weighted, len(nodes)


def skeleton_owners(sk, key_id, count):
    """Input indices of the skeleton owners of `key_id`, ranks 0..min(count, N) - 1."""
    root, weighted, n = sk
    taken = []  # (route, weight) of the picked nodes, in rank order
    out = []
    for rank in range(min(count, n)):
        seed = n3(key_id, SKELETON_SALT ^ ((rank * GOLDEN) & MASK))
        tree = root
        while isinstance(tree, Split):
            sides = []
            for side in (tree.left, tree.right):
                routes = {x[0] for x in members(side)}
                picked = [w for r, w in taken if r in routes]
                removed = 0.0
                for w in picked:
                    removed = removed + w
                sides.append((len(routes) - len(picked), max(0.0, side.mass - removed)))
            (cl, wl), (cr, wr) = sides
            if cl == 0:
                go_left = False
            elif cr == 0:
                go_left = True
            else:
                go_left = coin(seed, tree.bit) < threshold(wl, wr)
            tree = tree.left if go_left else tree.right
        done = {r for r, _ in taken}
        free = [x for x in tree.nodes if x[0] not in done]
        if weighted:
            best = min(free, key=lambda x: weighted_rank(n3(key_id, x[2]), x[3]))
        else:
            best = max(free, key=lambda x: n3(key_id, x[2]))
        taken.append((best[0], best[3] if weighted else 1.0))
        out.append(best[1])
    return out


def list_owners(entries, key_id, count, weighted):
    """§1/§3 on a plain list: first occurrences, largest weights, sorted by rank."""
    first = {}
    for index, (node_id, weight) in enumerate(entries):
        if node_id not in first:
            first[node_id] = [index, weight]
        elif weight > first[node_id][1]:
            first[node_id][1] = weight
    if weighted:
        ranked = sorted(first.items(), key=lambda kv: weighted_rank(n3(key_id, kv[0]), kv[1][1]))
    else:
        ranked = sorted(first.items(), key=lambda kv: -n3(key_id, kv[0]))
    return [index for _, (index, _) in ranked[:count]]


def wide_weight(rng, kind):
    """Weights for the skeleton fixture, as (Elixir-readable spec, binary64 value)."""
    if kind == "int":
        v = rng.choice([1, 1, 2, 3, 5, 10, 100, 2**53, 2**52 + 1, rng.randint(1, 2**53)])
        return f"i{v}", float(v)
    if kind == "tiny":  # mostly 1.0, a few weights near the bottom of the range
        v = rng.choice([1.0] * 6 + [5e-324, 1e-323, 1e-310, 1e-300, 1e-290, 2.0**-1022])
    elif kind == "subnormal":
        v = struct.unpack("<d", struct.pack("<Q", rng.randint(1, 64)))[0]
    elif kind == "equal":
        v = 3.5
    else:  # any binary64 from the smallest subnormal to 2^53
        v = struct.unpack("<d", struct.pack("<Q", rng.randint(1, 0x4340000000000000)))[0]
    return f"f{struct.unpack('<Q', struct.pack('<d', v))[0]:016x}", v


def skeleton_fixture(path, sets=220, keys_per_set=30, seed=11):
    """Lines `leaf_size<TAB>count<TAB>nodes<TAB>key=skeleton owners/list owners;...`.

    nodes: `name` (unweighted set) or `name:weight` with weight `i<decimal>` or
    `f<16 hex digits of the binary64>`; owners are indices into the node list."""
    import random

    rng = random.Random(seed)
    kinds = ["plain", "int", "wide", "tiny", "subnormal", "equal", "wide"]
    cases = 0
    with open(path, "w") as out:
        for i in range(sets):
            kind = kinds[i % len(kinds)]
            leaf = rng.choice([1, 2, 3, 4, 8, 16, 16, 32])
            n = rng.choice([1, 2, leaf, leaf + 1, rng.randint(1, 3 * leaf + 3), rng.randint(1, 300)])
            names = [f"n{rng.randrange(10**6)}-{j}" for j in range(n)]
            if rng.random() < 0.25:  # repeated names, with other weights
                names += rng.sample(names, min(3, n))
            specs, entries = [], []
            for name in names:
                if kind == "plain":
                    specs.append(name)
                    entries.append((t_binary(name.encode()), 1.0))
                else:
                    spec, w = wide_weight(rng, kind)
                    specs.append(f"{name}:{spec}")
                    entries.append((t_binary(name.encode()), w))
            weighted = kind != "plain"
            sk = skeleton(entries, leaf)
            count = rng.choice([1, 2, 3, 5, n + 2])
            cells = []
            for _ in range(keys_per_set):
                key = f"k{rng.randrange(10**9)}"
                kid = t_binary(key.encode())
                so = skeleton_owners(sk, kid, count)
                lo = list_owners(entries, kid, count, weighted)
                cells.append(f"{key}={','.join(map(str, so))}/{','.join(map(str, lo))}")
                cases += 1
            out.write(f"{leaf}\t{count}\t{','.join(specs)}\t{';'.join(cells)}\n")
    return cases


def pinned_skeleton():
    """The Rust `pinned_owners` sets: ids 0..99 (weights 1 + i % 5), keys k × 1000003."""
    plain = skeleton([(i, 1.0) for i in range(100)], 16)
    weighted = skeleton([(i, 1.0 + i % 5) for i in range(100)], 16)
    print("# skeleton pinned (Rust pinned_owners): owner, weighted owner, owners(3)")
    print([skeleton_owners(plain, k * 1000003, 1)[0] for k in range(12)])
    print([skeleton_owners(weighted, k * 1000003, 1)[0] for k in range(12)])
    print([skeleton_owners(plain, k * 1000003, 3) for k in range(4)])


def pinned_default_cluster_size():
    """§4: `HRW.build(nodes)` without `cluster_size` uses leaf_size 16. Owners of
    key-1..key-12 over node-1..node-100 at 16 (the default) and at 8 (which differ)."""
    entries = [(t_binary(f"node-{i}".encode()), 1.0) for i in range(1, 101)]
    print("# skeleton owners over node-1..node-100 of key-1..key-12 (node numbers),")
    print("# cluster_size 16 (HRW.build/1's default), then cluster_size 8")
    for leaf in (16, 8):
        sk = skeleton(entries, leaf)
        owners = [skeleton_owners(sk, t_binary(f"key-{k}".encode()), 1)[0] + 1 for k in range(1, 13)]
        print(owners)


# ---------------------------------------------------------------------------
# §7: member-set fingerprints (cluster/docs/FINGERPRINT.md), transcribed from the text.

def splitmix_out(z):
    z = (z + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def float_bits(w):
    """The IEEE-754 binary64 bits of float(w), as an unsigned integer."""
    return struct.unpack("<Q", struct.pack("<d", float(w)))[0]


def fingerprint(members, weighted=None):
    """members: terms, or (node, weight) pairs; weighted decided from all of them
    when not given. A weighted node's repeated ids fold to their largest weight."""
    if weighted is None:
        weighted = bool(members) and all(
            isinstance(m, tuple) and len(m) == 2 and isinstance(m[1], (int, float))
            and not isinstance(m[1], bool) for m in members)
    if weighted:
        largest = {}
        for node, w in members:
            assert 0 < w <= 2**53, w
            nid = term_id(node)
            first, kept = largest.get(nid, (node, w))
            largest[nid] = (first, max(kept, w))
        ids = {term_id((term_id(node), float_bits(w))) for node, w in largest.values()}
    else:
        ids = {term_id(m) for m in members}
    total = sum(splitmix_out(i) for i in ids) & MASK
    return splitmix_out(len(ids) ^ total)


def pinned_fingerprints():
    a, b, c = Atom("a@127.0.0.1"), Atom("b@127.0.0.1"), Atom("c@127.0.0.1")
    print("# §7 fingerprints")
    for members in ([], [a], [a, b], [b, a, c], [(a, 1), (b, 2.5)], [b"cache-1", b"cache-2"],
                    [(a, 1), (a, 2)], [(a, 2)], [(a, 1), b], [b, (a, 1)]):
        print(f"0x{fingerprint(members):016x}", members)
    # A weighted node nested 256 deep (its innermost atom at depth 256), as
    # HRW.build/2 takes it: [[...[:leaf]...]], weight 3.
    deep = Atom("leaf")
    for _ in range(256):
        deep = [deep]
    print(f"0x{fingerprint([(deep, 3)]):016x}", "[{nested 256 deep, 3}]")


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 2 and sys.argv[1] == "fixture":
        fixture(sys.argv[2])
    elif len(sys.argv) > 2 and sys.argv[1] == "skeleton":
        print(skeleton_fixture(sys.argv[2]), "cases")
    elif len(sys.argv) > 2 and sys.argv[1] == "terms":
        terms_fixture(sys.argv[2])
    else:
        print_vectors()
        pinned_skeleton()
        pinned_default_cluster_size()
        pinned_fingerprints()
