/* The DRAM content tracker's kernel (``npusim.sim.dram_memory``): where two chunk lists overlap.
 *
 * A C kernel and not Numba, as the event loop (``event_loop.c``): a plan with a DRAM layout is
 * checked on every ``simulate`` of it, and Numba's import and cache load (~0.25 s) would cost
 * more than the check. Its reference is ``dram_memory.first_overlap_reference`` (tests/test_taa.py). */

#include "buffers.h"

PyDoc_STRVAR(first_overlap_doc,
             "first_overlap(o1, s1, o2, s2)\n"
             "--\n\n"
             "(start, end) of the first overlap of two chunk lists sorted by address (int64 arrays of\n"
             "addresses o and byte counts s), or (-1, -1).");

static PyObject *first_overlap(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (arg_count(nargs, 4, "first_overlap") < 0) return NULL;
    Buffers buffers = {.n = 0};
    PyObject *result = NULL;
    Py_ssize_t n1, n2, m1, m2;
    const int64_t *o1 = buffer_of(&buffers, args[0], 'q', 0, &n1, "o1");
    const int64_t *s1 = o1 ? buffer_of(&buffers, args[1], 'q', 0, &m1, "s1") : NULL;
    const int64_t *o2 = s1 ? buffer_of(&buffers, args[2], 'q', 0, &n2, "o2") : NULL;
    const int64_t *s2 = o2 ? buffer_of(&buffers, args[3], 'q', 0, &m2, "s2") : NULL;
    if (s2 == NULL) goto done;
    if (m1 < n1 || m2 < n2) {
        PyErr_SetString(PyExc_ValueError, "first_overlap: fewer sizes than addresses");
        goto done;
    }
    long long lo = -1, hi = -1;
    Py_ssize_t i = 0, j = 0;
    while (i < n1 && j < n2) {
        int64_t e1 = o1[i] + s1[i];
        int64_t e2 = o2[j] + s2[j];
        if (e1 <= o2[j]) {
            i += 1;
        } else if (e2 <= o1[i]) {
            j += 1;
        } else {
            lo = o2[j] > o1[i] ? o2[j] : o1[i]; /* max(o1[i], o2[j]) */
            hi = e2 < e1 ? e2 : e1;             /* min(e1, e2) */
            break;
        }
    }
    result = Py_BuildValue("(LL)", lo, hi);
done:
    release_buffers(&buffers);
    return result;
}

static PyMethodDef methods[] = {
    {"first_overlap", (PyCFunction)(void (*)(void))first_overlap, METH_FASTCALL, first_overlap_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dram_contents",
    "The DRAM content tracker's kernel (npusim.sim.dram_memory; see dram_contents.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__dram_contents(void) { return PyModule_Create(&module); }
