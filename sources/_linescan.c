/* Line scanning for NDJSON chunks at memory speed, outside the GIL.
 *
 * What the Reddit reader asks of every line of a dump, where a Python loop over lines, or
 * a regex or one search per pattern over the chunk, costs several times the decompression:
 *
 *   scan_lines(data, start, end, patterns, limits, vector=True)
 *       one pass over the complete lines data[start:end] (it ends with a newline): the
 *       offset of each line's newline, and per line where the first ``limits[k]``
 *       occurrences of ``patterns[k]`` start (-1 where there are fewer)
 *   word_hashes(data, offsets, stops, skip)
 *       per line, word_hash of the regex word bytes ([0-9A-Za-z_], 1-64 of them) starting
 *       ``skip`` bytes after ``offsets[i]`` when a quote closes them before ``stops[i]``;
 *       -1 where offsets[i] is -1, -2 where no such word is there
 *   word_hash(word)
 *       FNV-1a, 64 bits, made non-negative
 *
 * Arrays go in and out as bytes of native int64 (numpy.frombuffer reads them). The pass of
 * scan_lines looks at 16 bytes per step with SSE2 (every x86-64 has it): the newline and,
 * per pattern, the two of its bytes that are rarest in JSON text at their distance,
 * verifying candidates with memcmp (quotes and colons would match almost everywhere). vector=False, or a build without SSE2, takes a plain byte loop with the same
 * answers (the tests compare the two). The GIL is released while scanning, so
 * decompression and scanning run on two cores at once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define MAX_PATTERNS 8
#define WORD_MAX 64 /* longer words are left to the caller's regex */

typedef struct {
    const unsigned char *bytes;
    Py_ssize_t len;
    int limit, column; /* occurrences kept per line; first column of them in a row of hits */
    Py_ssize_t a, b;   /* the two positions whose bytes are rarest in JSON text: the vector filter */
} Pattern;

/* Bytes of Reddit's JSON, most frequent first; any other byte counts as rarer than all. */
static const char COMMON[] = "\" ,:e_taoinrsldc1u0hf2mp3g5b4y9w6.78k/v-";

static int rarity(unsigned char c) {
    const char *at = c ? strchr(COMMON, c) : NULL;
    return at ? (int)(at - COMMON) : (int)sizeof(COMMON);
}

static void choose_anchors(Pattern *pattern) { /* the rarest byte, then the rarest other position */
    pattern->a = 0;
    for (Py_ssize_t i = 1; i < pattern->len; ++i)
        if (rarity(pattern->bytes[i]) > rarity(pattern->bytes[pattern->a]))
            pattern->a = i;
    pattern->b = pattern->a ? 0 : pattern->len - 1;
    for (Py_ssize_t i = 0; i < pattern->len; ++i)
        if (i != pattern->a && rarity(pattern->bytes[i]) > rarity(pattern->bytes[pattern->b]))
            pattern->b = i;
}

typedef struct { /* the growing result of scan_lines */
    int64_t *ends, *hits;
    Py_ssize_t lines, capacity;
    int width; /* hits per line: the sum of the limits */
    int seen[MAX_PATTERNS];
} Lines;

static int grow(Lines *out) { /* room for one more line, its hits set to -1; 0 or -1 (no memory) */
    if (out->lines == out->capacity) {
        Py_ssize_t capacity = out->capacity ? 2 * out->capacity : 1024;
        int64_t *ends = PyMem_RawRealloc(out->ends, (size_t)capacity * sizeof(int64_t));
        if (ends == NULL)
            return -1;
        out->ends = ends;
        if (out->width) {
            int64_t *hits = PyMem_RawRealloc(out->hits, (size_t)capacity * out->width * sizeof(int64_t));
            if (hits == NULL)
                return -1;
            out->hits = hits;
        }
        out->capacity = capacity;
    }
    for (int k = 0; k < out->width; ++k)
        out->hits[out->lines * out->width + k] = -1;
    return 0;
}

static int end_line(Lines *out, int64_t newline, int patterns) {
    out->ends[out->lines++] = newline;
    memset(out->seen, 0, sizeof(int) * (size_t)patterns);
    return grow(out);
}

static inline void try_pattern(Lines *out, const Pattern *pattern, int k, const unsigned char *base, int64_t at) {
    if (out->seen[k] < pattern->limit && memcmp(base + at, pattern->bytes, (size_t)pattern->len) == 0)
        out->hits[out->lines * out->width + pattern->column + out->seen[k]++] = at;
}

/* The pass itself; 0, or -1 when memory ran out. */
static int scan(const unsigned char *base, int64_t start, int64_t end, const Pattern *patterns, int count,
                int vector, Lines *out) {
    if (grow(out) < 0)
        return -1;
    int64_t at = start;
#if defined(__SSE2__)
    if (vector) {
        Py_ssize_t longest = 1;
        for (int k = 0; k < count; ++k)
            longest = patterns[k].len > longest ? patterns[k].len : longest;
        const __m128i newline = _mm_set1_epi8('\n');
        __m128i one[MAX_PATTERNS], other[MAX_PATTERNS];
        for (int k = 0; k < count; ++k) {
            one[k] = _mm_set1_epi8((char)patterns[k].bytes[patterns[k].a]);
            other[k] = _mm_set1_epi8((char)patterns[k].bytes[patterns[k].b]);
        }
        for (; at + 16 + longest - 1 <= end; at += 16) { /* every load and match stays before end */
            __m128i block = _mm_loadu_si128((const __m128i *)(base + at));
            unsigned lines = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(block, newline)), any = lines;
            unsigned found[MAX_PATTERNS];
            for (int k = 0; k < count; ++k) { /* bit i: the pattern may start at at + i */
                __m128i x = _mm_loadu_si128((const __m128i *)(base + at + patterns[k].a));
                __m128i y = _mm_loadu_si128((const __m128i *)(base + at + patterns[k].b));
                found[k] = (unsigned)_mm_movemask_epi8(
                    _mm_and_si128(_mm_cmpeq_epi8(x, one[k]), _mm_cmpeq_epi8(y, other[k])));
                any |= found[k];
            }
            while (any) { /* in byte order: a match belongs to the line its first byte is in */
                int bit = __builtin_ctz(any);
                any &= any - 1;
                for (int k = 0; k < count; ++k)
                    if (found[k] >> bit & 1)
                        try_pattern(out, &patterns[k], k, base, at + bit);
                if (lines >> bit & 1 && end_line(out, at + bit, count) < 0)
                    return -1;
            }
        }
    }
#else
    (void)vector;
#endif
    for (; at < end; ++at) {
        for (int k = 0; k < count; ++k)
            if (at + patterns[k].len <= end && base[at] == patterns[k].bytes[0])
                try_pattern(out, &patterns[k], k, base, at);
        if (base[at] == '\n' && end_line(out, at, count) < 0)
            return -1;
    }
    return 0; /* the row grown after the last newline holds no line: lines counts newlines */
}

static PyObject *scan_lines(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"data", "start", "end", "patterns", "limits", "vector", NULL};
    Py_buffer data;
    Py_ssize_t start, end;
    PyObject *patterns_arg, *limits_arg;
    int vector = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nnOO|p", names, &data, &start, &end, &patterns_arg,
                                     &limits_arg, &vector))
        return NULL;
    PyObject *result = NULL, *patterns_seq = NULL, *limits_seq = NULL;
    Lines out = {0};
    Pattern patterns[MAX_PATTERNS];
    const unsigned char *base = data.buf;
    if (start < 0 || end <= start || end > data.len || base[end - 1] != '\n') {
        PyErr_SetString(PyExc_ValueError, "scan_lines: data[start:end] must be non-empty and end with a newline");
        goto done;
    }
    patterns_seq = PySequence_Fast(patterns_arg, "scan_lines: patterns must be a sequence of bytes");
    limits_seq = patterns_seq ? PySequence_Fast(limits_arg, "scan_lines: limits must be a sequence of int") : NULL;
    if (limits_seq == NULL)
        goto done;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(patterns_seq);
    if (count > MAX_PATTERNS || PySequence_Fast_GET_SIZE(limits_seq) != count) {
        PyErr_SetString(PyExc_ValueError, "scan_lines: at most 8 patterns, with one limit each");
        goto done;
    }
    for (Py_ssize_t k = 0; k < count; ++k) {
        PyObject *pattern = PySequence_Fast_GET_ITEM(patterns_seq, k);
        long limit = PyLong_AsLong(PySequence_Fast_GET_ITEM(limits_seq, k));
        if (limit == -1 && PyErr_Occurred())
            goto done;
        if (!PyBytes_Check(pattern) || PyBytes_GET_SIZE(pattern) < 1 || limit < 1 || limit > 16 ||
            memchr(PyBytes_AS_STRING(pattern), '\n', (size_t)PyBytes_GET_SIZE(pattern)) != NULL) {
            PyErr_SetString(PyExc_ValueError, "scan_lines: each pattern is non-empty bytes without a newline, "
                                              "each limit 1-16");
            goto done;
        }
        patterns[k] = (Pattern){(const unsigned char *)PyBytes_AS_STRING(pattern), PyBytes_GET_SIZE(pattern),
                                (int)limit, out.width, 0, 0};
        choose_anchors(&patterns[k]);
        out.width += (int)limit;
    }
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = scan(base, start, end, patterns, (int)count, vector, &out);
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    result = Py_BuildValue("(y#y#)", (const char *)out.ends, out.lines * (Py_ssize_t)sizeof(int64_t),
                           (const char *)(out.hits ? out.hits : out.ends),
                           out.lines * out.width * (Py_ssize_t)sizeof(int64_t));
done:
    Py_XDECREF(patterns_seq);
    Py_XDECREF(limits_seq);
    PyMem_RawFree(out.ends);
    PyMem_RawFree(out.hits);
    PyBuffer_Release(&data);
    return result;
}

static int is_word(unsigned char c) { /* what the regex \w matches in bytes */
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static int64_t hash_bytes(const unsigned char *p, Py_ssize_t n) {
    uint64_t h = 14695981039346656037ULL;
    for (Py_ssize_t i = 0; i < n; ++i)
        h = (h ^ p[i]) * 1099511628211ULL;
    return (int64_t)(h & INT64_MAX);
}

static PyObject *word_hash(PyObject *self, PyObject *args) {
    Py_buffer word;
    if (!PyArg_ParseTuple(args, "y*", &word))
        return NULL;
    int64_t h = hash_bytes(word.buf, word.len);
    PyBuffer_Release(&word);
    return PyLong_FromLongLong(h);
}

static PyObject *word_hashes(PyObject *self, PyObject *args) {
    Py_buffer data, offsets, stops;
    Py_ssize_t skip;
    if (!PyArg_ParseTuple(args, "y*y*y*n", &data, &offsets, &stops, &skip))
        return NULL;
    PyObject *out = NULL;
    Py_ssize_t lines = offsets.len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *at = offsets.buf, *ends = stops.buf;
    if (offsets.len != stops.len || offsets.len % (Py_ssize_t)sizeof(int64_t) || skip < 0) {
        PyErr_SetString(PyExc_ValueError, "word_hashes: offsets and stops must be int64 of one length, skip >= 0");
        goto done;
    }
    for (Py_ssize_t i = 0; i < lines; ++i) {
        if (ends[i] < 0 || ends[i] > data.len || at[i] < -1 || (at[i] >= 0 && at[i] + skip > ends[i])) {
            PyErr_SetString(PyExc_ValueError, "word_hashes: every word must start inside its line");
            goto done;
        }
    }
    out = PyBytes_FromStringAndSize(NULL, lines * (Py_ssize_t)sizeof(int64_t));
    if (out == NULL)
        goto done;
    int64_t *hashes = (int64_t *)PyBytes_AS_STRING(out);
    const unsigned char *base = data.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < lines; ++i) {
        if (at[i] < 0) {
            hashes[i] = -1;
            continue;
        }
        int64_t from = at[i] + skip, stop = ends[i], n = 0;
        while (from + n < stop && n <= WORD_MAX && is_word(base[from + n]))
            ++n;
        int closed = n >= 1 && n <= WORD_MAX && from + n < stop && base[from + n] == '"';
        hashes[i] = closed ? hash_bytes(base + from, n) : -2;
    }
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&stops);
    return out;
}

static PyMethodDef methods[] = {
    {"scan_lines", (PyCFunction)(void (*)(void))scan_lines, METH_VARARGS | METH_KEYWORDS,
     "scan_lines(data, start, end, patterns, limits, vector=True) -> (ends, hits): the newline offsets of the "
     "lines of data[start:end] (which ends with a newline), and per line the offsets of the first limits[k] "
     "occurrences of patterns[k], -1 where fewer (int64 bytes; hits is lines x sum(limits), patterns in order)."},
    {"word_hashes", word_hashes, METH_VARARGS,
     "word_hashes(data, offsets, stops, skip) -> bytes: per line, word_hash of the 1-64 word bytes "
     "([0-9A-Za-z_]) from offsets[i] + skip when a quote follows them before stops[i], as int64; -1 where "
     "offsets[i] is -1, -2 where there is no such word."},
    {"word_hash", word_hash, METH_VARARGS, "word_hash(word) -> int: FNV-1a (64 bits) of the bytes, non-negative."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_linescan", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__linescan(void) { return PyModule_Create(&module); }
