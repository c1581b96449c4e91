/* Picking the few lines of an NDJSON block that matter, at memory speed, outside the GIL.
 *
 * A pushshift month is tens of millions of lines, of which well under 1% must be parsed.
 * Each function here makes one pass over the complete lines data[start:end] (it ends with
 * a newline), decides every line as soon as its newline is seen (while its bytes are still
 * in the cache) and returns only what the reader needs:
 *
 *   (lines, picks, counts)
 *       lines   how many lines the block holds (empty ones included), to number the next
 *       picks   [(line number, tag, line bytes)] of the picked lines, numbered from ``first``
 *       counts  per reason, how many lines were left out for it
 *
 *   pick_lines(data, start, end, first, vector=True)
 *       every non-empty line, tag 0
 *   pick_posts(data, start, end, first, markers, title_key, questions, window, vector=True)
 *       the lines holding any of ``markers`` whose raw title does not rule out a question
 *       (tag 0); counts: (unmarked non-empty lines, marked lines whose title rules it out).
 *       The title test decides only when ``title_key`` occurs once in the line and the
 *       title, after leading spaces, opens with an ASCII word that ends before ``window``
 *       bytes and before the line's end: the line is left out when that word, lowercased,
 *       is none of ``questions`` (lowercase ASCII words). Anything else is picked.
 *   pick_comments(data, start, end, first, link_key, keys, vector=True)
 *       per line, the regex word ([0-9A-Za-z_], 1-64 bytes, closed by a quote) right after
 *       the first ``link_key``: lines without ``link_key`` are picked with tag 0 (parsing
 *       checks them), lines whose word's word_hash is in ``keys`` (sorted int64) or that
 *       have no such word with tag 1 (the caller confirms those with its regex); an 8 KiB
 *       bit filter on the hashes' low bits spares nearly every line the binary search
 *   word_hash(word)
 *       FNV-1a, 64 bits, made non-negative
 *
 * The pass looks at 16 bytes per step with SSE2 (every x86-64 has it), 32 with AVX2 where
 * the CPU has it: the newline and, per pattern, the two of its bytes that are rarest in
 * JSON text at their distance, verifying candidates with memcmp (quotes and colons would
 * match almost everywhere). vector=False takes a plain byte loop with the same answers
 * (the tests compare them).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_AVX2_PATH 1
#endif

#define MAX_PATTERNS 8
#define MAX_HITS 16
#define WORD_MAX 64 /* longer words are left to the caller's regex */
#define MAX_QUESTIONS 64
#define FILTER_BITS 16 /* 8 KiB of filter: stays in the L1 cache beside the data */

typedef struct {
    const unsigned char *bytes;
    Py_ssize_t len;
    int limit, column; /* occurrences kept per line; first column of them in the line's hits */
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

typedef struct {
    const unsigned char *bytes;
    Py_ssize_t len;
} Word;

typedef struct Picker Picker;
typedef int (*Decide)(Picker *, int64_t begin, int64_t newline); /* a tag >= 0 picks the line; -1 leaves it */

struct Picker {
    const unsigned char *base;
    Pattern patterns[MAX_PATTERNS];
    int count, width;
    int64_t hits[MAX_HITS]; /* the current line's first occurrences, -1 where fewer */
    int seen[MAX_PATTERNS];
    Decide decide;
    /* rules */
    int markers;                /* posts: patterns[0..markers) are markers, patterns[markers] the title key */
    Word questions[MAX_QUESTIONS];
    int nquestions;
    Py_ssize_t window;
    const int64_t *keys;        /* comments: sorted hashes of the wanted words */
    Py_ssize_t nkeys;
    uint64_t *filter;           /* one bit per value of a hash's low FILTER_BITS bits, set for each key */
    /* results */
    int64_t lines, counts[2];
    int64_t *picked; /* triples: line index, begin, newline; then the tag */
    Py_ssize_t npicked, capacity;
};

static void clear_hits(Picker *p) {
    for (int k = 0; k < p->width; ++k)
        p->hits[k] = -1;
    memset(p->seen, 0, sizeof(p->seen));
}

static int add_pattern(Picker *p, PyObject *pattern, int limit) {
    if (!PyBytes_Check(pattern) || PyBytes_GET_SIZE(pattern) < 1 ||
        memchr(PyBytes_AS_STRING(pattern), '\n', (size_t)PyBytes_GET_SIZE(pattern)) != NULL) {
        PyErr_SetString(PyExc_ValueError, "linescan: each pattern is non-empty bytes without a newline");
        return -1;
    }
    if (p->count == MAX_PATTERNS || p->width + limit > MAX_HITS) {
        PyErr_SetString(PyExc_ValueError, "linescan: too many patterns");
        return -1;
    }
    Pattern *q = &p->patterns[p->count++];
    *q = (Pattern){(const unsigned char *)PyBytes_AS_STRING(pattern), PyBytes_GET_SIZE(pattern), limit, p->width, 0, 0};
    choose_anchors(q);
    p->width += limit;
    return 0;
}

static int finish_line(Picker *p, int64_t begin, int64_t newline) { /* 0, or -1 when memory ran out */
    int tag = p->decide(p, begin, newline);
    if (tag >= 0) {
        if (p->npicked == p->capacity) {
            Py_ssize_t capacity = p->capacity ? 2 * p->capacity : 64;
            int64_t *picked = PyMem_RawRealloc(p->picked, (size_t)capacity * 4 * sizeof(int64_t));
            if (picked == NULL)
                return -1;
            p->picked = picked;
            p->capacity = capacity;
        }
        int64_t *row = p->picked + 4 * p->npicked++;
        row[0] = p->lines, row[1] = begin, row[2] = newline, row[3] = tag;
    }
    p->lines++;
    clear_hits(p);
    return 0;
}

static inline void try_pattern(Picker *p, int k, int64_t at) {
    const Pattern *pattern = &p->patterns[k];
    if (p->seen[k] < pattern->limit && memcmp(p->base + at, pattern->bytes, (size_t)pattern->len) == 0)
        p->hits[pattern->column + p->seen[k]++] = at;
}

static Py_ssize_t longest(const Picker *p) {
    Py_ssize_t n = 1;
    for (int k = 0; k < p->count; ++k)
        n = p->patterns[k].len > n ? p->patterns[k].len : n;
    return n;
}

/* Handles the events of one vector step in byte order (a match belongs to the line its
 * first byte is in): ``lines`` has the newlines' bits, found[k] pattern k's candidates. */
static inline int step_events(Picker *p, int64_t at, uint64_t lines, const uint64_t *found, int64_t *begin) {
    uint64_t any = lines;
    for (int k = 0; k < p->count; ++k)
        any |= found[k];
    while (any) {
        int bit = __builtin_ctzll(any);
        any &= any - 1;
        for (int k = 0; k < p->count; ++k)
            if (found[k] >> bit & 1)
                try_pattern(p, k, at + bit);
        if (lines >> bit & 1) {
            if (finish_line(p, *begin, at + bit) < 0)
                return -1;
            *begin = at + bit + 1;
        }
    }
    return 0;
}

/* One vector pass, written once for both widths; ``count`` is a constant where it is
 * inlined, so the pattern loops unroll and every vector stays in a register. */
#define VECTOR_PASS(NAME, ATTR, VEC, WIDTH, SET1, LOADU, CMPEQ, AND, MOVEMASK)                                  \
    ATTR static inline __attribute__((always_inline)) int64_t NAME##_n(Picker *p, int64_t at, int64_t end,         \
                                                                       int64_t *begin, int *failed, const int count) { \
        const Py_ssize_t reach = longest(p);                                                                       \
        const VEC newline = SET1('\n');                                                                            \
        VEC one[MAX_PATTERNS], other[MAX_PATTERNS];                                                                \
        Py_ssize_t a[MAX_PATTERNS], b[MAX_PATTERNS];                                                               \
        for (int k = 0; k < count; ++k) {                                                                          \
            one[k] = SET1((char)p->patterns[k].bytes[p->patterns[k].a]);                                           \
            other[k] = SET1((char)p->patterns[k].bytes[p->patterns[k].b]);                                         \
            a[k] = p->patterns[k].a, b[k] = p->patterns[k].b;                                                      \
        }                                                                                                          \
        for (; at + WIDTH + reach - 1 <= end; at += WIDTH) { /* every load and match stays before end */          \
            const unsigned char *here = p->base + at;                                                              \
            uint64_t lines = (uint32_t)MOVEMASK(CMPEQ(LOADU((const VEC *)here), newline)), any = lines;           \
            uint64_t found[MAX_PATTERNS];                                                                          \
            _Pragma("GCC unroll 8") for (int k = 0; k < count; ++k) {                                              \
                found[k] = (uint32_t)MOVEMASK(AND(CMPEQ(LOADU((const VEC *)(here + a[k])), one[k]),                \
                                                  CMPEQ(LOADU((const VEC *)(here + b[k])), other[k])));            \
                any |= found[k];                                                                                   \
            }                                                                                                      \
            if (any && step_events(p, at, lines, found, begin) < 0) {                                              \
                *failed = 1;                                                                                       \
                return at;                                                                                         \
            }                                                                                                      \
        }                                                                                                          \
        return at;                                                                                                 \
    }                                                                                                              \
    ATTR static int64_t NAME(Picker *p, int64_t at, int64_t end, int64_t *begin, int *failed) {                    \
        switch (p->count) {                                                                                        \
        case 0: return NAME##_n(p, at, end, begin, failed, 0);                                                     \
        case 1: return NAME##_n(p, at, end, begin, failed, 1);                                                     \
        case 2: return NAME##_n(p, at, end, begin, failed, 2);                                                     \
        case 3: return NAME##_n(p, at, end, begin, failed, 3);                                                     \
        case 4: return NAME##_n(p, at, end, begin, failed, 4);                                                     \
        default: return NAME##_n(p, at, end, begin, failed, p->count);                                            \
        }                                                                                                          \
    }

#if defined(HAVE_AVX2_PATH)
VECTOR_PASS(scan_avx2, __attribute__((target("avx2"))), __m256i, 32, _mm256_set1_epi8, _mm256_loadu_si256,
            _mm256_cmpeq_epi8, _mm256_and_si256, _mm256_movemask_epi8)
#endif
#if defined(__SSE2__)
VECTOR_PASS(scan_sse2, , __m128i, 16, _mm_set1_epi8, _mm_loadu_si128, _mm_cmpeq_epi8, _mm_and_si128,
            _mm_movemask_epi8)
#endif

/* The pass itself; 0, or -1 when memory ran out. */
static int scan(Picker *p, int64_t start, int64_t end, int vector) {
    int64_t at = start, begin = start;
    int failed = 0;
    clear_hits(p);
    if (vector) {
#if defined(HAVE_AVX2_PATH)
        if (__builtin_cpu_supports("avx2"))
            at = scan_avx2(p, at, end, &begin, &failed);
#endif
#if defined(__SSE2__)
        if (!failed)
            at = scan_sse2(p, at, end, &begin, &failed);
#endif
        if (failed)
            return -1;
    }
    for (; at < end; ++at) { /* the tail, or everything without vectors */
        for (int k = 0; k < p->count; ++k)
            if (at + p->patterns[k].len <= end && p->base[at] == p->patterns[k].bytes[0])
                try_pattern(p, k, at);
        if (p->base[at] == '\n') {
            if (finish_line(p, begin, at) < 0)
                return -1;
            begin = at + 1;
        }
    }
    return 0;
}

/* --- the rules ------------------------------------------------------------------------ */

static int is_word(unsigned char c) { /* what the regex \w matches in bytes */
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static int is_letter(unsigned char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

static int64_t hash_bytes(const unsigned char *p, Py_ssize_t n) {
    uint64_t h = 14695981039346656037ULL;
    for (Py_ssize_t i = 0; i < n; ++i)
        h = (h ^ p[i]) * 1099511628211ULL;
    return (int64_t)(h & INT64_MAX);
}

static int decide_every(Picker *p, int64_t begin, int64_t newline) {
    (void)p;
    return newline > begin ? 0 : -1;
}

/* The raw title test: 1 when the title surely is not a question (see pick_posts). */
static int title_rules_out(const Picker *p, int64_t from, int64_t newline) {
    const unsigned char *s = p->base + from;
    int64_t size = newline - from < p->window ? newline - from : p->window; /* window bytes inside the line */
    int64_t lead = 0;
    while (lead < size && s[lead] == ' ')
        ++lead;
    if (lead == p->window || lead >= size || !is_letter(s[lead])) /* only spaces, or no letter opens it */
        return 0;
    int64_t stop = lead;
    while (stop < size && is_letter(s[stop]))
        ++stop;
    if (stop >= size) /* the word may run on past the window or into the line's end */
        return 0;
    unsigned char word[64]; /* the window is at most 64 bytes */
    int64_t n = stop - lead;
    for (int64_t i = 0; i < n; ++i)
        word[i] = (unsigned char)(s[lead + i] | 0x20); /* ASCII letters only: lowercase */
    for (int q = 0; q < p->nquestions; ++q)
        if (p->questions[q].len == n && memcmp(p->questions[q].bytes, word, (size_t)n) == 0)
            return 0;
    return 1;
}

static int decide_post(Picker *p, int64_t begin, int64_t newline) {
    int marked = 0;
    for (int k = 0; k < p->markers; ++k)
        marked |= p->hits[p->patterns[k].column] >= 0;
    if (!marked) {
        p->counts[0] += newline > begin;
        return -1;
    }
    const Pattern *title = &p->patterns[p->markers];
    int64_t once = p->hits[title->column] >= 0 && p->hits[title->column + 1] < 0;
    if (once && title_rules_out(p, p->hits[title->column] + title->len, newline)) {
        p->counts[1] += 1;
        return -1;
    }
    return 0;
}

static int known_key(const Picker *p, int64_t h) {
    uint64_t low = (uint64_t)h & ((1u << FILTER_BITS) - 1);
    if (!(p->filter[low >> 6] >> (low & 63) & 1)) /* nearly every line: no key ends in these bits */
        return 0;
    Py_ssize_t lo = 0, hi = p->nkeys;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (p->keys[mid] < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->nkeys && p->keys[lo] == h;
}

static int decide_comment(Picker *p, int64_t begin, int64_t newline) {
    int64_t at = p->hits[0];
    if (at < 0)
        return newline > begin ? 0 : -1;
    int64_t from = at + p->patterns[0].len, n = 0;
    while (from + n < newline && n <= WORD_MAX && is_word(p->base[from + n]))
        ++n;
    int closed = n >= 1 && n <= WORD_MAX && from + n < newline && p->base[from + n] == '"';
    return !closed || known_key(p, hash_bytes(p->base + from, n)) ? 1 : -1;
}

/* --- the Python functions ---------------------------------------------------------------- */

static PyObject *run(Picker *p, Py_buffer *data, Py_ssize_t start, Py_ssize_t end, long long first, int vector) {
    PyObject *result = NULL, *picks = NULL;
    p->base = data->buf;
    if (start < 0 || end <= start || end > data->len || p->base[end - 1] != '\n') {
        PyErr_SetString(PyExc_ValueError, "linescan: data[start:end] must be non-empty and end with a newline");
        goto done;
    }
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = scan(p, start, end, vector);
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    picks = PyList_New(p->npicked);
    if (picks == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < p->npicked; ++i) {
        const int64_t *row = p->picked + 4 * i;
        PyObject *pick = Py_BuildValue("(LLy#)", first + row[0], row[3], (const char *)p->base + row[1],
                                       (Py_ssize_t)(row[2] - row[1]));
        if (pick == NULL)
            goto done;
        PyList_SET_ITEM(picks, i, pick);
    }
    result = Py_BuildValue("(LO(LL))", p->lines, picks, p->counts[0], p->counts[1]);
done:
    Py_XDECREF(picks);
    PyMem_RawFree(p->picked);
    return result;
}

static PyObject *pick_lines(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"data", "start", "end", "first", "vector", NULL};
    Py_buffer data;
    Py_ssize_t start, end;
    long long first;
    int vector = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nnL|p", names, &data, &start, &end, &first, &vector))
        return NULL;
    Picker p = {.decide = decide_every};
    PyObject *result = run(&p, &data, start, end, first, vector);
    PyBuffer_Release(&data);
    return result;
}

static PyObject *pick_posts(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"data", "start", "end", "first", "markers", "title_key", "questions", "window",
                            "vector", NULL};
    Py_buffer data;
    Py_ssize_t start, end, window;
    long long first;
    PyObject *markers, *title_key, *questions, *result = NULL;
    int vector = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nnLO!SO!n|p", names, &data, &start, &end, &first,
                                     &PyTuple_Type, &markers, &title_key, &PyTuple_Type, &questions, &window, &vector))
        return NULL;
    Picker p = {.decide = decide_post, .window = window};
    Py_ssize_t nmarkers = PyTuple_GET_SIZE(markers), nquestions = PyTuple_GET_SIZE(questions);
    if (nmarkers < 1 || nmarkers >= MAX_PATTERNS || nquestions > MAX_QUESTIONS || window < 1 || window > 64) {
        PyErr_SetString(PyExc_ValueError, "pick_posts: 1-7 markers, at most 64 questions, a window of 1-64 bytes");
        goto done;
    }
    for (Py_ssize_t k = 0; k < nmarkers; ++k)
        if (add_pattern(&p, PyTuple_GET_ITEM(markers, k), 1) < 0)
            goto done;
    p.markers = (int)nmarkers;
    if (add_pattern(&p, title_key, 2) < 0)
        goto done;
    for (Py_ssize_t q = 0; q < nquestions; ++q) {
        PyObject *word = PyTuple_GET_ITEM(questions, q);
        if (!PyBytes_Check(word)) {
            PyErr_SetString(PyExc_TypeError, "pick_posts: questions must be bytes");
            goto done;
        }
        p.questions[q] = (Word){(const unsigned char *)PyBytes_AS_STRING(word), PyBytes_GET_SIZE(word)};
    }
    p.nquestions = (int)nquestions;
    result = run(&p, &data, start, end, first, vector);
done:
    PyBuffer_Release(&data);
    return result;
}

static PyObject *pick_comments(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"data", "start", "end", "first", "link_key", "keys", "vector", NULL};
    Py_buffer data, keys;
    Py_ssize_t start, end;
    long long first;
    PyObject *link_key, *result = NULL;
    int vector = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nnLSy*|p", names, &data, &start, &end, &first, &link_key,
                                     &keys, &vector))
        return NULL;
    uint64_t filter[(1u << FILTER_BITS) / 64] = {0};
    Picker p = {.decide = decide_comment, .keys = keys.buf, .nkeys = keys.len / (Py_ssize_t)sizeof(int64_t),
                .filter = filter};
    if (keys.len % (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "pick_comments: keys must be sorted int64");
        goto done;
    }
    for (Py_ssize_t k = 0; k < p.nkeys; ++k) {
        uint64_t low = (uint64_t)p.keys[k] & ((1u << FILTER_BITS) - 1);
        filter[low >> 6] |= 1ULL << (low & 63);
    }
    if (add_pattern(&p, link_key, 1) == 0)
        result = run(&p, &data, start, end, first, vector);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&keys);
    return result;
}

static PyObject *word_hash(PyObject *self, PyObject *args) {
    Py_buffer word;
    if (!PyArg_ParseTuple(args, "y*", &word))
        return NULL;
    int64_t h = hash_bytes(word.buf, word.len);
    PyBuffer_Release(&word);
    return PyLong_FromLongLong(h);
}

static PyMethodDef methods[] = {
    {"pick_lines", (PyCFunction)(void (*)(void))pick_lines, METH_VARARGS | METH_KEYWORDS,
     "pick_lines(data, start, end, first, vector=True) -> (lines, picks, counts): every non-empty line."},
    {"pick_posts", (PyCFunction)(void (*)(void))pick_posts, METH_VARARGS | METH_KEYWORDS,
     "pick_posts(data, start, end, first, markers, title_key, questions, window, vector=True) -> (lines, picks, "
     "counts): the marked lines whose raw title does not rule out a question; counts (unmarked, ruled out)."},
    {"pick_comments", (PyCFunction)(void (*)(void))pick_comments, METH_VARARGS | METH_KEYWORDS,
     "pick_comments(data, start, end, first, link_key, keys, vector=True) -> (lines, picks, counts): lines "
     "without link_key (tag 0), lines whose linked word's hash is in keys or unreadable (tag 1)."},
    {"word_hash", word_hash, METH_VARARGS, "word_hash(word) -> int: FNV-1a (64 bits) of the bytes, non-negative."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_linescan", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__linescan(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (PyModule_AddIntConstant(m, "MAX_MARKERS", MAX_PATTERNS - 1) < 0 || /* the title key takes one */
                      PyModule_AddIntConstant(m, "MAX_QUESTIONS", MAX_QUESTIONS) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
