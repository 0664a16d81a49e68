/* numpy arrays (any object with the buffer protocol) as C pointers, for npusim's C kernels.
 *
 * The kernels take their arrays from Python as they are, with no numpy C API: each argument
 * is asked for a C-contiguous buffer of items of its kind (int64, float64 or int32, by its format) and the
 * pointer is used for the length of the call. ``Buffers`` collects the views so one call
 * releases them all. A wrong dtype, layout or a read-only array where the kernel writes raises
 * a TypeError naming the argument: an internal error (the Python side builds every array). */
#ifndef NPUSIM_BUFFERS_H
#define NPUSIM_BUFFERS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define BUFFERS_MAX 48

typedef struct {
    Py_buffer view[BUFFERS_MAX];
    int n;
} Buffers;

/* 'q': int64, 'd': float64, 'i': int32 */
static inline int format_is(const char *format, char kind) {
    if (format == NULL) return kind == 'B';
    while (*format == '@' || *format == '=' || *format == '<') format++;
    if (kind == 'q') return (format[0] == 'q' || format[0] == 'l') && format[1] == '\0';
    return format[0] == kind && format[1] == '\0';
}

/* The data of ``obj`` as int64 (``kind`` 'q'), float64 ('d') or int32 ('i'); its item count in ``*len``
 * (may be NULL). NULL with an exception set when it is not such an array. */
static inline void *buffer_of(Buffers *b, PyObject *obj, char kind, int writable, Py_ssize_t *len, const char *name) {
    if (len) *len = 0;
    if (b->n >= BUFFERS_MAX) {
        PyErr_SetString(PyExc_RuntimeError, "npusim C kernel: too many array arguments");
        return NULL;
    }
    Py_buffer *v = &b->view[b->n];
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, v, flags) < 0) {
        PyErr_Format(PyExc_TypeError, "npusim C kernel: argument %s is not a %sC-contiguous array", name,
                     writable ? "writable " : "");
        return NULL;
    }
    b->n++;
    Py_ssize_t itemsize = kind == 'i' ? 4 : 8;
    if (v->itemsize != itemsize || !format_is(v->format, kind)) {
        PyErr_Format(PyExc_TypeError, "npusim C kernel: argument %s has format %s, expected %s", name,
                     v->format ? v->format : "?", kind == 'q' ? "int64" : kind == 'i' ? "int32" : "float64");
        return NULL;
    }
    if (len) *len = v->len / itemsize;
    return v->buf;
}

static inline void release_buffers(Buffers *b) {
    for (int i = 0; i < b->n; i++) PyBuffer_Release(&b->view[i]);
    b->n = 0;
}

/* A new bytearray of ``n`` 8-byte items (Python wraps it with numpy.frombuffer, no copy). */
static inline PyObject *new_items(Py_ssize_t n, void **data) {
    PyObject *out = PyByteArray_FromStringAndSize(NULL, n * 8);
    if (out != NULL) *data = PyByteArray_AS_STRING(out);
    return out;
}

static inline int arg_count(Py_ssize_t given, Py_ssize_t expected, const char *function) {
    if (given == expected) return 0;
    PyErr_Format(PyExc_TypeError, "npusim C kernel %s: %zd arguments, expected %zd", function, given, expected);
    return -1;
}

#endif
