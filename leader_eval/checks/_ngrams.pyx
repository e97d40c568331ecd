# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Word n-gram counts of one text, compiled: the degeneration checks' hot loop (and, at the end,
``EchoGrams``, the leak scan's scaffold-echo prefilter).

``counts(text, n, prompt)`` returns ``(total, distinct, shared)`` for the words of ``text``
(maximal runs of characters that are not whitespace, exactly as ``str.split()`` cuts them): how
many word n-grams there are, how many of them are distinct, and how many of the distinct ones
occur in the prompt (a ``PromptIndex`` of the same ``n``). They are the numbers the pure-Python
sets of ``checks/degeneration.py`` give, which a test compares on generated text: every equality
is decided by comparing the words' characters, or the n-grams' word ids; a hash only picks the
bucket. The hash is seeded per process and the probing work is capped: a text that hits the cap
(one built to collide) returns None, and the caller counts it with Python's sets, so no input
costs more than the Python path plus the cap.

Why compiled: in Python each n-gram is a tuple of fresh word strings, hashed and stored in a set
(~45 us per 2 KB output, and twice per output when a call's message is judged on its own); here
no word is copied out of its string.
"""

import os

from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int32_t, uint32_t, uint64_t
from libc.string cimport memcmp, memset


cdef extern from "Python.h":
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    int PyUnicode_KIND(object o)
    void *PyUnicode_DATA(object o)
    Py_UCS4 PyUnicode_READ(int kind, void *data, Py_ssize_t index) nogil
    bint Py_UNICODE_ISSPACE(Py_UCS4 ch) nogil


# per process, so that no fixed text collides everywhere (the counts never depend on it)
cdef uint64_t _SEED = int.from_bytes(os.urandom(8), "little") | 1

# at most this many probes per word (plus a constant) before giving the text back to Python
cdef enum:
    _PROBES_PER_WORD = 64


cdef inline uint64_t _mix(uint64_t x) noexcept nogil:
    # splitmix64's finaliser: every input bit reaches every output bit
    x ^= x >> 30
    x *= <uint64_t>0xBF58476D1CE4E5B9
    x ^= x >> 27
    x *= <uint64_t>0x94D049BB133111EB
    x ^= x >> 31
    return x


cdef struct Words:
    Py_ssize_t count
    Py_ssize_t *start
    Py_ssize_t *length
    uint64_t *hash


cdef int _split(str text, Words *w) except -1:
    """Word starts, lengths and hashes of ``text``, as ``text.split()`` cuts it."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t cap = n // 2 + 1, i = 0, k = 0, s
    cdef uint64_t h
    cdef Py_UCS4 c
    w.count = 0
    w.start = <Py_ssize_t *>PyMem_Malloc(cap * sizeof(Py_ssize_t))
    w.length = <Py_ssize_t *>PyMem_Malloc(cap * sizeof(Py_ssize_t))
    w.hash = <uint64_t *>PyMem_Malloc(cap * sizeof(uint64_t))
    if w.start == NULL or w.length == NULL or w.hash == NULL:
        raise MemoryError()
    if kind == 1:  # Latin-1 text (most output): the same loop on bytes, without the kind switch
        w.count = _split_latin1(<const unsigned char *>data, n, w)
        return 0
    while i < n:
        c = PyUnicode_READ(kind, data, i)
        if Py_UNICODE_ISSPACE(c):
            i += 1
            continue
        s = i
        h = _SEED
        while True:
            h = (h ^ <uint64_t>c) * <uint64_t>0x100000001B3
            i += 1
            if i >= n:
                break
            c = PyUnicode_READ(kind, data, i)
            if Py_UNICODE_ISSPACE(c):
                break
        w.start[k] = s
        w.length[k] = i - s
        w.hash[k] = _mix(h ^ <uint64_t>(i - s))
        k += 1
    w.count = k
    return 0


cdef bint _LATIN1_SPACE[256]
for _c in range(256):
    _LATIN1_SPACE[_c] = chr(_c).isspace()


cdef Py_ssize_t _split_latin1(const unsigned char *data, Py_ssize_t n, Words *w) noexcept nogil:
    cdef Py_ssize_t i = 0, k = 0, s
    cdef uint64_t h
    cdef unsigned char c
    while i < n:
        c = data[i]
        if _LATIN1_SPACE[c]:
            i += 1
            continue
        s = i
        h = _SEED
        while True:
            h = (h ^ c) * <uint64_t>0x100000001B3
            i += 1
            if i >= n:
                break
            c = data[i]
            if _LATIN1_SPACE[c]:
                break
        w.start[k] = s
        w.length[k] = i - s
        w.hash[k] = _mix(h ^ <uint64_t>(i - s))
        k += 1
    return k


cdef void _free_words(Words *w) noexcept:
    PyMem_Free(w.start)
    PyMem_Free(w.length)
    PyMem_Free(w.hash)
    w.start = NULL
    w.length = NULL
    w.hash = NULL


cdef inline bint _same_chars(
    int ka, void *da, Py_ssize_t sa, int kb, void *db, Py_ssize_t sb, Py_ssize_t n
) noexcept nogil:
    cdef Py_ssize_t j
    if ka == kb:  # one representation: equal characters are equal bytes
        return memcmp(<char *>da + sa * ka, <char *>db + sb * kb, n * ka) == 0
    for j in range(n):
        if PyUnicode_READ(ka, da, sa + j) != PyUnicode_READ(kb, db, sb + j):
            return False
    return True


cdef inline Py_ssize_t _table_size(Py_ssize_t items) noexcept nogil:
    cdef Py_ssize_t size = 16
    while size < 2 * items + 2:
        size <<= 1
    return size


cdef inline uint64_t _gram_hash(const uint32_t *ids, Py_ssize_t n) noexcept nogil:
    cdef uint64_t h = _SEED
    cdef Py_ssize_t j
    for j in range(n):
        h = _mix(h ^ ids[j])
    return h


cdef inline bint _same_ids(const uint32_t *a, const uint32_t *b, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(n):
        if a[j] != b[j]:
            return False
    return True


cdef Py_ssize_t _word_ids(
    Words *w, int kind, void *data, uint32_t *ids, int32_t *slots, Py_ssize_t mask, uint32_t first_new,
    PromptIndex prompt, Py_ssize_t *probes, Py_ssize_t budget,
) noexcept:
    """Give each word of ``w`` an id: ``prompt``'s where the prompt has the word, else a new one
    from ``first_new`` on, in order of first occurrence (``slots``: a table of ``mask + 1``
    entries, all -1, that keeps the position of each new word's first occurrence). The number
    of new ids, or -1 past the probe cap."""
    cdef Py_ssize_t i, slot, wid
    cdef int32_t first
    cdef uint32_t next_id = first_new
    cdef uint64_t h
    for i in range(w.count):
        h = w.hash[i]
        if prompt is not None:
            wid = prompt.word_id(kind, data, w.start[i], w.length[i], h, probes, budget)
            if wid == -2:
                return -1
            if wid >= 0:
                ids[i] = <uint32_t>wid
                continue
        slot = h & mask
        while True:
            first = slots[slot]
            if first < 0:
                slots[slot] = <int32_t>i
                ids[i] = next_id
                next_id += 1
                break
            probes[0] += 1
            if probes[0] > budget:
                return -1
            if (
                w.hash[first] == h
                and w.length[first] == w.length[i]
                and _same_chars(kind, data, w.start[first], kind, data, w.start[i], w.length[i])
            ):
                ids[i] = ids[first]
                break
            slot = (slot + 1) & mask
    return next_id - first_new


cdef Py_ssize_t _distinct_grams(
    const uint32_t *ids, Py_ssize_t total, Py_ssize_t n, int32_t *slots, uint64_t *hashes, Py_ssize_t mask,
    PromptIndex prompt, Py_ssize_t *shared, Py_ssize_t *probes, Py_ssize_t budget,
) noexcept:
    """How many of the ``total`` n-grams of ``ids`` are distinct (``slots``/``hashes``: a table
    of ``mask + 1`` entries, slots all -1, left holding each distinct one's first position), and
    in ``shared`` how many of those ``prompt`` has; -1 past the probe cap."""
    cdef Py_ssize_t i, j, slot, distinct = 0
    cdef Py_ssize_t vocabulary = prompt.vocabulary if prompt is not None else 0
    cdef int32_t first
    cdef uint64_t h
    cdef int found
    for i in range(total):
        h = _gram_hash(&ids[i], n)
        slot = h & mask
        while True:
            first = slots[slot]
            if first < 0:
                slots[slot] = <int32_t>i
                hashes[slot] = h
                distinct += 1
                if prompt is not None:
                    found = 1
                    for j in range(n):  # a word the prompt lacks: not one of its n-grams
                        if ids[i + j] >= vocabulary:
                            found = 0
                            break
                    if found:
                        found = prompt.has_gram(&ids[i], h, probes, budget)
                        if found < 0:
                            return -1
                        shared[0] += found
                break
            probes[0] += 1
            if probes[0] > budget:
                return -1
            if hashes[slot] == h and _same_ids(&ids[first], &ids[i], n):
                break
            slot = (slot + 1) & mask
    return distinct


cdef class PromptIndex:
    """The prompt's distinct words (ids 0..vocabulary-1, in order of first occurrence) and its
    distinct word n-grams, built once per case. ``complete`` is False when building it hit the
    work cap: ``counts`` then returns None for every text (the caller counts in Python)."""

    cdef str text
    cdef int kind
    cdef void *data
    cdef readonly Py_ssize_t n
    cdef readonly Py_ssize_t vocabulary
    cdef readonly bint complete
    cdef Words words
    cdef int32_t *word_slot  # word table: position of the first occurrence, -1 empty
    cdef Py_ssize_t word_mask
    cdef uint32_t *ids  # the prompt as word ids
    cdef int32_t *gram_slot  # n-gram table: position of the first occurrence in ids, -1 empty
    cdef uint64_t *gram_hash
    cdef Py_ssize_t gram_mask

    def __cinit__(self, str text not None, Py_ssize_t n, Py_ssize_t probes_per_word=_PROBES_PER_WORD):
        self.words.start = NULL
        self.words.length = NULL
        self.words.hash = NULL
        self.word_slot = NULL
        self.ids = NULL
        self.gram_slot = NULL
        self.gram_hash = NULL
        self.complete = False
        self.vocabulary = 0
        if n < 1:
            raise ValueError("n must be at least 1")
        self.text = text
        self.kind = PyUnicode_KIND(text)
        self.data = PyUnicode_DATA(text)
        self.n = n
        _split(text, &self.words)
        cdef Py_ssize_t count = self.words.count, probes = 0, size, total, vocabulary, shared = 0
        cdef Py_ssize_t budget = probes_per_word * count + (4096 if probes_per_word else 0)
        if count >= 0x7FFFFFFF:
            return
        size = _table_size(count)
        self.word_mask = size - 1
        self.word_slot = <int32_t *>PyMem_Malloc(size * sizeof(int32_t))
        self.ids = <uint32_t *>PyMem_Malloc((count + 1) * sizeof(uint32_t))
        if self.word_slot == NULL or self.ids == NULL:
            raise MemoryError()
        memset(self.word_slot, 0xFF, size * sizeof(int32_t))
        vocabulary = _word_ids(
            &self.words, self.kind, self.data, self.ids, self.word_slot, self.word_mask, 0, None, &probes, budget
        )
        if vocabulary < 0:
            return
        self.vocabulary = vocabulary
        total = count - n + 1 if count >= n else 0
        size = _table_size(total)
        self.gram_mask = size - 1
        self.gram_slot = <int32_t *>PyMem_Malloc(size * sizeof(int32_t))
        self.gram_hash = <uint64_t *>PyMem_Malloc(size * sizeof(uint64_t))
        if self.gram_slot == NULL or self.gram_hash == NULL:
            raise MemoryError()
        memset(self.gram_slot, 0xFF, size * sizeof(int32_t))
        if _distinct_grams(
            self.ids, total, n, self.gram_slot, self.gram_hash, self.gram_mask, None, &shared, &probes, budget
        ) >= 0:
            self.complete = True

    def __dealloc__(self):
        _free_words(&self.words)
        PyMem_Free(self.word_slot)
        PyMem_Free(self.ids)
        PyMem_Free(self.gram_slot)
        PyMem_Free(self.gram_hash)

    cdef inline Py_ssize_t word_id(
        self, int kind, void *data, Py_ssize_t start, Py_ssize_t length, uint64_t h,
        Py_ssize_t *probes, Py_ssize_t budget,
    ) noexcept:
        """The prompt's id of the word at ``start`` of another text, -1 if none, -2 past the cap."""
        cdef Py_ssize_t slot = h & self.word_mask
        cdef int32_t first
        while True:
            first = self.word_slot[slot]
            if first < 0:
                return -1
            probes[0] += 1
            if probes[0] > budget:
                return -2
            if (
                self.words.hash[first] == h
                and self.words.length[first] == length
                and _same_chars(self.kind, self.data, self.words.start[first], kind, data, start, length)
            ):
                return self.ids[first]
            slot = (slot + 1) & self.word_mask

    cdef inline int has_gram(self, const uint32_t *ids, uint64_t h, Py_ssize_t *probes, Py_ssize_t budget) noexcept:
        """Is this n-gram of prompt word ids one of the prompt's: 1 yes, 0 no, -1 past the cap."""
        cdef Py_ssize_t slot = h & self.gram_mask
        cdef int32_t first
        while True:
            first = self.gram_slot[slot]
            if first < 0:
                return 0
            probes[0] += 1
            if probes[0] > budget:
                return -1
            if self.gram_hash[slot] == h and _same_ids(&self.ids[first], ids, self.n):
                return 1
            slot = (slot + 1) & self.gram_mask


def counts(
    str text not None, Py_ssize_t n, PromptIndex prompt=None, Py_ssize_t probes_per_word=_PROBES_PER_WORD
):
    """``(total, distinct, shared)`` word n-grams of ``text`` (``shared``: distinct ones that are
    ``prompt``'s, 0 without one), or None when the work cap was hit (count in Python). The cap:
    ``probes_per_word`` table probes per word, plus 4,096 (none with 0: for tests)."""
    if n < 1:
        raise ValueError("n must be at least 1")
    if prompt is not None and (not prompt.complete or prompt.n != n):
        return None
    cdef Words w
    w.start = NULL
    w.length = NULL
    w.hash = NULL
    cdef uint32_t *ids = NULL
    cdef int32_t *word_slot = NULL
    cdef int32_t *gram_slot = NULL
    cdef uint64_t *gram_hash = NULL
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t count, size, total, probes = 0, budget, distinct, shared = 0
    cdef Py_ssize_t vocabulary = prompt.vocabulary if prompt is not None else 0
    try:
        _split(text, &w)
        count = w.count
        if count >= 0x7FFFFFFF or vocabulary + count >= 0xFFFFFFFF:
            return None
        budget = probes_per_word * count + (4096 if probes_per_word else 0)
        size = _table_size(count)
        ids = <uint32_t *>PyMem_Malloc((count + 1) * sizeof(uint32_t))
        word_slot = <int32_t *>PyMem_Malloc(size * sizeof(int32_t))
        if ids == NULL or word_slot == NULL:
            raise MemoryError()
        memset(word_slot, 0xFF, size * sizeof(int32_t))
        if _word_ids(&w, kind, data, ids, word_slot, size - 1, <uint32_t>vocabulary, prompt, &probes, budget) < 0:
            return None
        total = count - n + 1 if count >= n else 0
        size = _table_size(total)
        gram_slot = <int32_t *>PyMem_Malloc(size * sizeof(int32_t))
        gram_hash = <uint64_t *>PyMem_Malloc(size * sizeof(uint64_t))
        if gram_slot == NULL or gram_hash == NULL:
            raise MemoryError()
        memset(gram_slot, 0xFF, size * sizeof(int32_t))
        distinct = _distinct_grams(ids, total, n, gram_slot, gram_hash, size - 1, prompt, &shared, &probes, budget)
        if distinct < 0:
            return None
        return total, distinct, shared
    finally:
        _free_words(&w)
        PyMem_Free(ids)
        PyMem_Free(word_slot)
        PyMem_Free(gram_slot)
        PyMem_Free(gram_hash)


# --- repeated windows (the repetition check's long-repeat rule) -----------------------------

def first_repeat(str text not None, Py_ssize_t length, Py_ssize_t probes_per_window=_PROBES_PER_WORD):
    """The leftmost window of ``length`` characters of ``text`` that occurs again later, and its
    next occurrence, as ``(i, j)``; ``(-1, -1)`` when no window occurs twice; None when the probe
    cap was hit (then the caller searches with its own method). Exact: windows are compared by
    their characters; a rolling hash (seeded per process) only picks the bucket. One pass."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    if length < 1 or length >= n:
        return (-1, -1)
    cdef int kind = PyUnicode_KIND(text)
    cdef void *data = PyUnicode_DATA(text)
    cdef Py_ssize_t windows = n - length + 1, size = _table_size(windows), mask = size - 1
    # a comparison of two windows costs length / 8 probes: at most ~64 characters compared per character of text
    cdef Py_ssize_t budget = probes_per_window * (windows + n // 8) + (4096 if probes_per_window else 0), probes = 0
    cdef Py_ssize_t j, k, slot, best_i = -1, best_j = -1
    cdef int32_t first
    cdef uint64_t base = _SEED | 1, top = 1, h = 0
    cdef int32_t *slots = NULL
    cdef uint64_t *hashes = NULL
    cdef unsigned char *seen_twice = NULL
    if windows >= 0x7FFFFFFF:
        return None
    try:
        slots = <int32_t *>PyMem_Malloc(size * sizeof(int32_t))
        hashes = <uint64_t *>PyMem_Malloc(size * sizeof(uint64_t))
        seen_twice = <unsigned char *>PyMem_Malloc(size)
        if slots == NULL or hashes == NULL or seen_twice == NULL:
            raise MemoryError()
        memset(slots, 0xFF, size * sizeof(int32_t))
        memset(seen_twice, 0, size)
        for k in range(length - 1):
            top *= base
        for k in range(length):
            h = h * base + <uint64_t>PyUnicode_READ(kind, data, k)
        for j in range(windows):
            if j:
                h = (h - <uint64_t>PyUnicode_READ(kind, data, j - 1) * top) * base
                h += <uint64_t>PyUnicode_READ(kind, data, j + length - 1)
            slot = _mix(h) & mask
            while True:
                first = slots[slot]
                if first < 0:
                    slots[slot] = <int32_t>j
                    hashes[slot] = h
                    break
                if hashes[slot] == h:
                    if seen_twice[slot]:
                        # this content is known to repeat, so best_i <= first; a window equal
                        # to it changes nothing, and one that only shares its hash is first
                        # seen after it (same-hash entries sit in the order they came), so
                        # its pairs cannot start before best_i either: no need to compare
                        break
                    probes += length // 8 + 1  # a comparison costs by its length
                    if probes > budget:
                        return None
                    if memcmp(<char *>data + first * kind, <char *>data + j * kind, length * kind) == 0:
                        seen_twice[slot] = 1
                        if best_i < 0 or first < best_i:
                            best_i, best_j = first, j
                        break
                probes += 1
                if probes > budget:
                    return None
                slot = (slot + 1) & mask
        return (best_i, best_j)
    finally:
        PyMem_Free(slots)
        PyMem_Free(hashes)
        PyMem_Free(seen_twice)


# --- scaffold echoes (the leak scan's prefilter) ---------------------------------------------

# the lower case of every ASCII word character (``[0-9A-Za-z_]``, what \w matches in ASCII), 0 for
# every other ASCII character: the words the leak scan's ``_ascii_words`` cuts
cdef unsigned char _ASCII_WORD[128]
for _c in range(128):
    _ASCII_WORD[_c] = ord(chr(_c).lower()) if (chr(_c).isalnum() or _c == 0x5F) else 0


cdef inline uint64_t _word_start() noexcept nogil:
    return <uint64_t>0xCBF29CE484222325  # FNV-1a's offset basis


cdef inline uint64_t _word_step(uint64_t h, unsigned char b) noexcept nogil:
    return (h ^ b) * <uint64_t>0x100000001B3


cdef inline uint64_t _window_step(uint64_t g, uint64_t word) noexcept nogil:
    return _mix(g ^ word) + <uint64_t>0x9E3779B97F4A7C15


cdef class EchoGrams:
    """Whether a text can hold an echo of the scaffold: the hashes of the scaffold's word grams
    (each word's UTF-8 bytes, as the leak scan's index holds them), and a scan of a text's
    stride-th windows against them without copying a word out of the text.

    The answer False is exact: a window equal to a gram has the gram's hash (no seed: the hashes
    are the same in every process, so an index built in one serves another). True only means a
    window's hash is a gram's; the caller then compares the words themselves. A text built to
    collide costs the caller's own search, which is what it cost before this existed."""

    cdef uint64_t *hashes
    cdef Py_ssize_t size
    cdef readonly Py_ssize_t gram
    cdef readonly Py_ssize_t stride

    def __cinit__(self, grams, Py_ssize_t gram, Py_ssize_t stride):
        cdef list values = []
        cdef uint64_t g, h
        cdef bytes word
        cdef const unsigned char *p
        cdef Py_ssize_t i, k
        if gram < 1 or stride < gram:
            raise ValueError("EchoGrams: need 1 <= gram <= stride")
        self.gram = gram
        self.stride = stride
        for key in grams:
            if len(key) != gram:
                raise ValueError("EchoGrams: every gram has `gram` words")
            g = 0
            for word in key:
                p = word
                h = _word_start()
                for i in range(len(word)):
                    h = _word_step(h, p[i])
                g = _window_step(g, h)
            values.append(g)
        values = sorted(set(values))
        self.size = len(values)
        self.hashes = <uint64_t *>PyMem_Malloc((self.size + 1) * sizeof(uint64_t))
        if self.hashes == NULL:
            raise MemoryError()
        for k in range(self.size):
            self.hashes[k] = values[k]

    def __dealloc__(self):
        PyMem_Free(self.hashes)

    cdef inline bint _known(self, uint64_t g) noexcept nogil:
        cdef Py_ssize_t lo = 0, hi = self.size, mid
        while lo < hi:
            mid = (lo + hi) >> 1
            if self.hashes[mid] < g:
                lo = mid + 1
            else:
                hi = mid
        return lo < self.size and self.hashes[lo] == g

    def candidate(self, str text not None):
        """False when no stride-th window of ``text``'s words is a gram (then it holds no echo).

        The words are those of the text's ASCII skeleton: maximal runs of ASCII word characters,
        lower-cased; every other character separates them, except KELVIN SIGN, which is "k" (as
        the leak scan's ``_ascii_skeleton`` and ``_ascii_words`` cut an ASCII text, or any text
        against an all-ASCII scaffold)."""
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
        cdef int kind = PyUnicode_KIND(text)
        cdef void *data = PyUnicode_DATA(text)
        cdef const unsigned char *latin1 = <const unsigned char *>data
        cdef Py_ssize_t i = 0, phase = 0, last = self.gram - 1, stride = self.stride
        cdef Py_UCS4 c
        cdef unsigned char b
        cdef bint inside = False
        cdef uint64_t h = 0, g = 0
        if self.size == 0:
            return False
        while i <= n:
            b = 0
            if i < n:
                # one byte per character in most output: read it without the kind switch
                c = latin1[i] if kind == 1 else PyUnicode_READ(kind, data, i)
                if c < 128:
                    b = _ASCII_WORD[c]
                elif c == 0x212A:
                    b = 0x6B  # "k"
            if b:
                if not inside:
                    inside = True
                    h = _word_start()
                h = _word_step(h, b)
            elif inside:
                inside = False
                # word number phase of its period: the first `gram` words of each period form
                # the window that starts at a multiple of stride
                if phase < self.gram:
                    g = _window_step(0 if phase == 0 else g, h)
                    if phase == last and self._known(g):
                        return True
                phase += 1
                if phase == stride:
                    phase = 0
            i += 1
        return False
