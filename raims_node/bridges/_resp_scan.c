/* The RESP batch scan of raims_node/bridges/resp.py, compiled (issue 24).

   scan(data, pos, commands, max_args, max_bulk, max_query) -> int

   Appends to `commands` (a list) each canonical multibulk of `data` (bytes) from `pos`
   on, as a list of bytes, and returns the offset of the first byte it leaves to the
   parser's general path. Canonical, as redis-server writes it: `*<n>\r\n` with n in
   1..max_args (resp.py passes at most its FAST_ARGS) spelled without sign or leading
   zero, then n bulks `$<len>\r\n<len bytes>\r\n` with len spelled the same way, each
   len <= max_bulk and all of them together <= max_query. It stops at the first request
   that is anything else: partial, inline, empty, spelled otherwise, beyond a limit, or
   with other bytes than CR LF after a bulk. The general parser then parses it, raises
   its errors or waits for more input, so the commands of any input are the same with or
   without this module (tests/unit/test_resp_proto.py runs both and compares them). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MAX_DIGITS 18    /* longer lengths go to the general parser */

/* A canonical decimal at s[0..n) ending in CR LF: its value, and *end past the LF;
   -1 when it is not one (or not complete). */
static long long
canonical(const char *s, Py_ssize_t n, Py_ssize_t *end)
{
    Py_ssize_t i = 0;
    long long v = 0;
    if (n < 1 || s[0] < '0' || s[0] > '9' || (s[0] == '0' && n > 1 && s[1] != '\r'))
        return -1;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        if (i == MAX_DIGITS)
            return -1;
        v = v * 10 + (s[i] - '0');
        i++;
    }
    if (i + 1 >= n || s[i] != '\r' || s[i + 1] != '\n')
        return -1;
    *end = i + 2;
    return v;
}

/* The end offset of the canonical request at data[p..n), or -1. */
static Py_ssize_t
request_end(const char *data, Py_ssize_t p, Py_ssize_t n, long long max_args, long long max_bulk,
            long long max_query, long long *argc_out)
{
    Py_ssize_t used;
    long long argc, total = 0;
    if (p >= n || data[p] != '*')
        return -1;
    argc = canonical(data + p + 1, n - p - 1, &used);
    if (argc < 1 || argc > max_args)
        return -1;
    p += 1 + used;
    for (long long k = 0; k < argc; k++) {
        long long len;
        if (p >= n || data[p] != '$')
            return -1;
        len = canonical(data + p + 1, n - p - 1, &used);
        if (len < 0 || len > max_bulk || (total += len) > max_query)
            return -1;
        p += 1 + used;
        if (n - p < len + 2 || data[p + len] != '\r' || data[p + len + 1] != '\n')
            return -1;
        p += len + 2;
    }
    *argc_out = argc;
    return p;
}

/* The arguments of a request request_end accepted, as a new list. */
static PyObject *
arguments(const char *data, Py_ssize_t p, long long argc)
{
    PyObject *args = PyList_New((Py_ssize_t)argc);
    Py_ssize_t used;
    if (args == NULL)
        return NULL;
    p += 1;
    canonical(data + p, PY_SSIZE_T_MAX, &used);  /* already checked: only to skip it */
    p += used;
    for (Py_ssize_t k = 0; k < (Py_ssize_t)argc; k++) {
        long long len = canonical(data + p + 1, PY_SSIZE_T_MAX, &used);
        PyObject *arg;
        p += 1 + used;
        arg = PyBytes_FromStringAndSize(data + p, (Py_ssize_t)len);
        if (arg == NULL) {
            Py_DECREF(args);
            return NULL;
        }
        PyList_SET_ITEM(args, k, arg);
        p += (Py_ssize_t)len + 2;
    }
    return args;
}

static PyObject *
scan(PyObject *self, PyObject *const *argv, Py_ssize_t argn)
{
    Py_ssize_t pos, n;
    long long max_args, max_bulk, max_query;
    const char *data;
    PyObject *commands;
    (void)self;
    if (argn != 6 || !PyBytes_Check(argv[0]) || !PyList_Check(argv[2])) {
        PyErr_SetString(PyExc_TypeError, "scan(data: bytes, pos: int, commands: list, max_args, max_bulk, max_query)");
        return NULL;
    }
    pos = PyLong_AsSsize_t(argv[1]);
    max_args = PyLong_AsLongLong(argv[3]);
    max_bulk = PyLong_AsLongLong(argv[4]);
    max_query = PyLong_AsLongLong(argv[5]);
    if (PyErr_Occurred())
        return NULL;
    data = PyBytes_AS_STRING(argv[0]);
    n = PyBytes_GET_SIZE(argv[0]);
    commands = argv[2];
    if (pos < 0 || pos > n) {
        PyErr_SetString(PyExc_ValueError, "pos out of the data");
        return NULL;
    }
    for (;;) {
        long long argc = 0;
        Py_ssize_t end = request_end(data, pos, n, max_args, max_bulk, max_query, &argc);
        PyObject *args;
        if (end < 0)
            break;
        args = arguments(data, pos, argc);
        if (args == NULL)
            return NULL;
        if (PyList_Append(commands, args) < 0) {
            Py_DECREF(args);
            return NULL;
        }
        Py_DECREF(args);
        pos = end;
    }
    return PyLong_FromSsize_t(pos);
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(data, pos, commands, max_args, max_bulk, max_query) -> offset left to the general parser"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_resp_scan", "The RESP batch scan, compiled (resp.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__resp_scan(void)
{
    return PyModule_Create(&module);
}
