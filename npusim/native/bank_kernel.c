/* The bank-state kernel of the DRAM banks model: the Python entry points of the DRAM
 * controller (bank_core.h, shared with the compiled event loop) and the address helpers that
 * feed it, for npusim.dram.controller and npusim.dram.kernel.
 *
 * Why C and not Numba: see npusim/native/__init__.py (Numba's start-up alone costs more than
 * the simulation of a quick start). */

#include "bank_core.h"

/* -- Python entry points ------------------------------------------------------------------- */

/* run(T, G, stop, until_complete, fbuf, ibuf, layout, pool, active, scratch_i, scratch_f)
 * -> int: advance the controller whose state is in ``fbuf``/``ibuf`` (controller.py: _pack);
 * ``pool`` (3, n) int32 holds the accesses' global bank, row and flow, ``active`` the live
 * flows, the scratch the pick tags (btag, picks, whats, ki | barr, kf). */
static PyObject *py_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (arg_count(nargs, 11, "run") < 0) return NULL;
    Buffers b = {.n = 0};
    Ctl k;
    Py_ssize_t nT, nG, nf, ni, nl, npool, nact, nsi, nsf;
    PyObject *result = NULL;
    double stop = PyFloat_AsDouble(args[2]);
    int until = PyObject_IsTrue(args[3]);
    if (PyErr_Occurred() || until < 0) return NULL;
    k.T = buffer_of(&b, args[0], 'd', 0, &nT, "T");
    if (!k.T) goto out;
    k.G = buffer_of(&b, args[1], 'q', 0, &nG, "G");
    if (!k.G) goto out;
    if (nT != N_TIMING || nG != N_G) {
        PyErr_SetString(PyExc_ValueError, "npusim bank kernel: T or G of the wrong length");
        goto out;
    }
    double *fbuf = buffer_of(&b, args[4], 'd', 1, &nf, "fbuf");
    int64_t *ibuf = buffer_of(&b, args[5], 'q', 1, &ni, "ibuf");
    const int64_t *layout = buffer_of(&b, args[6], 'q', 0, &nl, "layout");
    const int32_t *pool = buffer_of(&b, args[7], 'i', 0, &npool, "pool");
    k.active = buffer_of(&b, args[8], 'q', 0, &nact, "active");
    int64_t *si = buffer_of(&b, args[9], 'q', 1, &nsi, "scratch_i");
    double *sf = buffer_of(&b, args[10], 'd', 1, &nsf, "scratch_f");
    if (!fbuf || !ibuf || !layout || !pool || !k.active || !si || !sf) goto out;
    if (bind_state(&k, fbuf, nf, ibuf, ni, layout, nl) < 0) goto out;
    int64_t cap = npool / 3, NB = k.C * k.G[G_RANKS] * k.BG * k.G[G_BANKS_PER_GROUP];
    if (npool != 3 * cap || nsi < NB * 2 + 1 || nsf < NB * 2) {
        PyErr_SetString(PyExc_ValueError, "npusim bank kernel: pool or scratch of the wrong size");
        goto out;
    }
    k.req_bank = pool;
    k.req_row = pool + cap;
    k.req_flow = pool + 2 * cap;
    k.n_active = nact;
    k.btag = si;
    k.picks = si + NB * 2;
    k.barr = sf;
    k.next_memo = malloc((size_t)(2 * k.C + 1) * 8);
    k.held = malloc((size_t)(k.C + 1) * sizeof(Pick));
    k.lanes = malloc((size_t)(k.C + 1) * sizeof(Lane));
    if (!k.next_memo || !k.held || !k.lanes) {
        free(k.next_memo), free(k.held), free(k.lanes);
        PyErr_NoMemory();
        goto out;
    }
    forget_next_flows(&k);
    int64_t r = until ? run_until_complete(&k, stop) : run_channels(&k, stop);
    free(k.next_memo), free(k.held), free(k.lanes);
    result = PyLong_FromLongLong(r);
out:
    release_buffers(&b);
    return result;
}

/* commands_before_end(flows, fc_next, fc_end, fc_left, flow_prio, flow_write, channels, depth, write_depth) -> int:
 * the fewest column commands one channel issues before any of ``flows`` ends (kernel.py:
 * commands_before_end). */
static PyObject *py_commands_before_end(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (arg_count(nargs, 9, "commands_before_end") < 0) return NULL;
    Buffers b = {.n = 0};
    PyObject *result = NULL;
    Py_ssize_t nflows, nnext, nend, nleft, nprio, nwrite;
    int64_t C = PyLong_AsLongLong(args[6]), depth = PyLong_AsLongLong(args[7]);
    int64_t write_depth = PyLong_AsLongLong(args[8]);
    if (PyErr_Occurred()) return NULL;
    const int64_t *flows = buffer_of(&b, args[0], 'q', 0, &nflows, "flows");
    const int64_t *fc_next = buffer_of(&b, args[1], 'q', 0, &nnext, "fc_next");
    const int64_t *fc_end = buffer_of(&b, args[2], 'q', 0, &nend, "fc_end");
    const int64_t *fc_left = buffer_of(&b, args[3], 'q', 0, &nleft, "fc_left");
    const double *prio = buffer_of(&b, args[4], 'd', 0, &nprio, "flow_prio");
    const int64_t *flow_write = buffer_of(&b, args[5], 'q', 0, &nwrite, "flow_write");
    if (!flows || !fc_next || !fc_end || !fc_left || !prio || !flow_write) goto out;
    for (Py_ssize_t a = 0; a < nflows; a++) {
        if (flows[a] < 0 || flows[a] >= nprio || flows[a] >= nwrite || (flows[a] + 1) * C > nnext
            || (flows[a] + 1) * C > nend || (flows[a] + 1) * C > nleft) {
            PyErr_SetString(PyExc_IndexError, "npusim bank kernel: a flow outside the flow arrays");
            goto out;
        }
    }
    int64_t fewest = fewest_before_end(flows, nflows, fc_next, fc_end, fc_left, prio, flow_write, C, depth,
                                       write_depth);
    result = PyLong_FromLongLong(fewest);
out:
    release_buffers(&b);
    return result;
}

static int int64_items(PyObject *seq, int64_t **out, Py_ssize_t *n, const char *name) {
    PyObject *fast = PySequence_Fast(seq, name);
    if (fast == NULL) return -1;
    *n = PySequence_Fast_GET_SIZE(fast);
    *out = PyMem_Malloc((*n > 0 ? *n : 1) * sizeof(int64_t));
    if (*out == NULL) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        (*out)[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
        if ((*out)[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            PyMem_Free(*out);
            *out = NULL;
            return -1;
        }
    }
    Py_DECREF(fast);
    return 0;
}

/* view_chunks(shape, strides, itemsize) -> (offsets, sizes) as bytearrays of int64: the byte
 * offsets and sizes of the contiguous chunks of a strided view (from offset 0), in issue order,
 * abutting chunks merged (kernel.py: view_chunks, held equal to render_chunks_reference). */
static PyObject *py_view_chunks(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (arg_count(nargs, 3, "view_chunks") < 0) return NULL;
    int64_t *shape = NULL, *strides = NULL, *index = NULL;
    Py_ssize_t rank, nstrides;
    PyObject *offs = NULL, *sizes_b = NULL, *result = NULL;
    int64_t itemsize = PyLong_AsLongLong(args[2]);
    if (itemsize == -1 && PyErr_Occurred()) return NULL;
    if (int64_items(args[0], &shape, &rank, "shape") < 0) goto out;
    if (int64_items(args[1], &strides, &nstrides, "strides") < 0) goto out;
    if (nstrides != rank) {
        PyErr_SetString(PyExc_ValueError, "view_chunks: shape and strides of different lengths");
        goto out;
    }
    int64_t first, block;
    int64_t count = view_blocks(shape, strides, rank, itemsize, &first, &block);
    if (count < 0) {
        PyErr_SetString(PyExc_MemoryError, "view_chunks: too many chunks");
        goto out;
    }
    int64_t *o = NULL, *s = NULL;
    offs = new_items(count, (void **)&o);
    sizes_b = new_items(count, (void **)&s);
    index = PyMem_Calloc(first > 0 ? first : 1, sizeof(int64_t));
    if (!offs || !sizes_b || !index) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto out;
    }
    int64_t m = view_chunks_fill(shape, strides, first, block, count, itemsize, index, o, s);
    if (PyByteArray_Resize(offs, m * 8) < 0 || PyByteArray_Resize(sizes_b, m * 8) < 0) goto out;
    result = PyTuple_Pack(2, offs, sizes_b);
out:
    Py_XDECREF(offs);
    Py_XDECREF(sizes_b);
    PyMem_Free(shape);
    PyMem_Free(strides);
    PyMem_Free(index);
    return result;
}

/* access_addresses(offsets, sizes, burst, access) -> bytearray of int64: the addresses of the
 * device accesses a transfer's chunks make, in issue order (kernel.py: access_addresses). */
static PyObject *py_access_addresses(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (arg_count(nargs, 4, "access_addresses") < 0) return NULL;
    Buffers b = {.n = 0};
    PyObject *out = NULL;
    Py_ssize_t n_o, n_s;
    int64_t burst = PyLong_AsLongLong(args[2]), access = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred()) return NULL;
    if (burst <= 0 || access <= 0) {
        PyErr_SetString(PyExc_ValueError, "access_addresses: burst and access must be positive");
        return NULL;
    }
    const int64_t *offsets = buffer_of(&b, args[0], 'q', 0, &n_o, "offsets");
    const int64_t *sizes = buffer_of(&b, args[1], 'q', 0, &n_s, "sizes");
    if (!offsets || !sizes) goto done;
    if (n_o != n_s) {
        PyErr_SetString(PyExc_ValueError, "access_addresses: offsets and sizes of different lengths");
        goto done;
    }
    int64_t bound = access_runs(offsets, sizes, n_o, 0, burst, access, NULL);
    int64_t *runs = malloc((size_t)(2 * bound + 3) * 8), *a = NULL;
    if (!runs) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t count = access_runs(offsets, sizes, n_o, 0, burst, access, runs);
    out = new_items(runs[2 + 2 * count], (void **)&a);
    for (int64_t r = 0; out && r < count; r++)  /* (the runs' addresses, one by one) */
        for (int64_t i = runs[2 + 2 * r], x = runs[1 + 2 * r]; i < runs[4 + 2 * r]; i++, x += access) a[i] = x;
    free(runs);
done:
    release_buffers(&b);
    return out;
}

/* decode_grouped(addresses, offset_bits, shifts, masks, rows, channels, ranks, bankgroups,
 * banks_per_group) -> (grouped (2, n): global bank and row, prefix (channels, n + 1), offsets (channels + 1)) as
 * bytearrays of int64 (kernel.py: decode_grouped). */
static PyObject *py_decode_grouped(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (arg_count(nargs, 9, "decode_grouped") < 0) return NULL;
    Buffers b = {.n = 0};
    PyObject *grouped_b = NULL, *prefix_b = NULL, *offsets_b = NULL, *result = NULL;
    int64_t *chs = NULL;
    int64_t vals[6];
    for (int i = 0; i < 6; i++) {
        vals[i] = PyLong_AsLongLong(args[i == 0 ? 1 : i + 3]);
        if (PyErr_Occurred()) return NULL;
    }
    int64_t offset_bits = vals[0], rows = vals[1], channels = vals[2], ranks = vals[3], bankgroups = vals[4],
            banks_per_group = vals[5];
    if (channels <= 0 || rows <= 0) {
        PyErr_SetString(PyExc_ValueError, "decode_grouped: channels and rows must be positive");
        return NULL;
    }
    Py_ssize_t m, nsh, nmask;
    const int64_t *addr = buffer_of(&b, args[0], 'q', 0, &m, "addresses");
    const int64_t *shifts = buffer_of(&b, args[2], 'q', 0, &nsh, "shifts");
    const int64_t *masks = buffer_of(&b, args[3], 'q', 0, &nmask, "masks");
    if (!addr || !shifts || !masks) goto out;
    if (nsh < 6 || nmask < 6) {
        PyErr_SetString(PyExc_ValueError, "decode_grouped: shifts and masks need the 6 fields");
        goto out;
    }
    int64_t *grouped = NULL, *prefix = NULL, *offsets = NULL;
    grouped_b = new_items(2 * m, (void **)&grouped);
    prefix_b = new_items(channels * (m + 1), (void **)&prefix);
    offsets_b = new_items(channels + 1, (void **)&offsets);
    chs = PyMem_Malloc((m > 0 ? m : 1) * sizeof(int64_t));
    if (!grouped_b || !prefix_b || !offsets_b || !chs) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto out;
    }
    for (int64_t c = 0; c < channels; c++) prefix[c * (m + 1)] = 0;
    Decoding dec = {.offset_bits = offset_bits, .rows = rows, .ranks = ranks, .bankgroups = bankgroups,
                    .banks_per_group = banks_per_group};
    for (int f = 0; f < 6; f++) dec.shifts[f] = shifts[f], dec.masks[f] = masks[f];
    for (Py_ssize_t i = 0; i < m; i++) {
        int64_t fields[4];
        int64_t c = decode_access(&dec, addr[i], fields);
        if (c < 0 || c >= channels) {
            PyErr_SetString(PyExc_ValueError, "decode_grouped: a channel outside the device");
            goto out;
        }
        chs[i] = c;
        for (int64_t cc = 0; cc < channels; cc++) prefix[cc * (m + 1) + i + 1] = prefix[cc * (m + 1) + i];
        prefix[c * (m + 1) + i + 1] += 1;
    }
    offsets[0] = 0;
    for (int64_t c = 0; c < channels; c++) offsets[c + 1] = offsets[c] + prefix[c * (m + 1) + m];
    /* pos[c]: the next slot of channel c (reusing chs would lose the channels: a second array) */
    int64_t *pos = PyMem_Malloc(channels * sizeof(int64_t));
    if (!pos) {
        PyErr_NoMemory();
        goto out;
    }
    for (int64_t c = 0; c < channels; c++) pos[c] = offsets[c];
    for (Py_ssize_t i = 0; i < m; i++) {
        int64_t fields[4];
        decode_access(&dec, addr[i], fields);
        int64_t j = pos[chs[i]]++;
        grouped[j] = fields[0];
        grouped[m + j] = fields[1];
    }
    PyMem_Free(pos);
    result = PyTuple_Pack(3, grouped_b, prefix_b, offsets_b);
out:
    release_buffers(&b);
    PyMem_Free(chs);
    Py_XDECREF(grouped_b);
    Py_XDECREF(prefix_b);
    Py_XDECREF(offsets_b);
    return result;
}

/* add_accesses(pool, grouped, prefix, offsets, lo, hi, fid, first, fc_next, fc_end)
 * -> int: the accesses lo:hi of a command appended to the pool from ``first`` as flow ``fid``,
 * channel by channel (kernel.py: add_accesses); how many. */
static PyObject *py_add_accesses(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (arg_count(nargs, 10, "add_accesses") < 0) return NULL;
    Buffers b = {.n = 0};
    PyObject *result = NULL;
    int64_t lo = PyLong_AsLongLong(args[4]), hi = PyLong_AsLongLong(args[5]), fid = PyLong_AsLongLong(args[6]),
            first = PyLong_AsLongLong(args[7]);
    if (PyErr_Occurred()) return NULL;
    Py_ssize_t npool, ng, npre, noff, nnext, nfe;
    int32_t *pool = buffer_of(&b, args[0], 'i', 1, &npool, "pool");
    const int64_t *grouped = buffer_of(&b, args[1], 'q', 0, &ng, "grouped");
    const int64_t *prefix = buffer_of(&b, args[2], 'q', 0, &npre, "prefix");
    const int64_t *offsets = buffer_of(&b, args[3], 'q', 0, &noff, "offsets");
    int64_t *fc_next = buffer_of(&b, args[8], 'q', 1, &nnext, "fc_next");
    int64_t *fc_end = buffer_of(&b, args[9], 'q', 1, &nfe, "fc_end");
    if (!pool || !grouped || !prefix || !offsets || !fc_next || !fc_end) goto out;
    int64_t channels = noff - 1, cap = npool / 3, m = ng / 2;
    if (channels < 1 || npre != channels * (m + 1) || lo < 0 || hi > m || lo > hi || npool != 3 * cap ||
        (fid + 1) * channels > nnext || (fid + 1) * channels > nfe || fid < 0) {
        PyErr_SetString(PyExc_ValueError, "add_accesses: arrays of inconsistent sizes");
        goto out;
    }
    int64_t pos = first;
    for (int64_t c = 0; c < channels; c++) {
        int64_t from = offsets[c] + prefix[c * (m + 1) + lo], to = offsets[c] + prefix[c * (m + 1) + hi];
        if (pos < 0 || pos + (to - from) > cap) {
            PyErr_SetString(PyExc_ValueError, "add_accesses: the pool is too small");
            goto out;
        }
        fc_next[fid * channels + c] = pos;
        for (int64_t j = from; j < to; j++) {
            pool[pos] = (int32_t)grouped[j];
            pool[cap + pos] = (int32_t)grouped[m + j];
            pool[2 * cap + pos] = (int32_t)fid;
            pos++;
        }
        fc_end[fid * channels + c] = pos;
    }
    result = PyLong_FromLongLong(pos - first);
out:
    release_buffers(&b);
    return result;
}

static PyMethodDef methods[] = {
    {"run", (PyCFunction)(void (*)(void))py_run, METH_FASTCALL, "Advance a controller (see the C source)."},
    {"commands_before_end", (PyCFunction)(void (*)(void))py_commands_before_end, METH_FASTCALL,
     "A lower bound on column commands before a flow ends."},
    {"view_chunks", (PyCFunction)(void (*)(void))py_view_chunks, METH_FASTCALL, "Chunks of a strided view."},
    {"access_addresses", (PyCFunction)(void (*)(void))py_access_addresses, METH_FASTCALL,
     "Device access addresses of a transfer's chunks."},
    {"decode_grouped", (PyCFunction)(void (*)(void))py_decode_grouped, METH_FASTCALL,
     "Addresses decoded and grouped by channel."},
    {"add_accesses", (PyCFunction)(void (*)(void))py_add_accesses, METH_FASTCALL, "Accesses into the pool."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_bank_kernel", "The DRAM bank-state kernel (C).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__bank_kernel(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    /* the layout's widths, for tests/test_dram.py to hold against kernel.py's constants */
    if (PyModule_AddIntConstant(m, "N_TIMING", N_TIMING) < 0 || PyModule_AddIntConstant(m, "N_G", N_G) < 0 ||
        PyModule_AddIntConstant(m, "CHAN_I_COLUMNS", CHAN_I_COLUMNS) < 0 ||
        PyModule_AddIntConstant(m, "RANK_F_COLUMNS", RANK_F_COLUMNS) < 0 ||
        PyModule_AddIntConstant(m, "TQ_COLUMNS", TQ_COLUMNS) < 0 || PyModule_AddIntConstant(m, "N_LAYOUT", N_LAYOUT) < 0 ||
        PyModule_AddIntConstant(m, "C_T_SEQ_W", C_T_SEQ_W) < 0 || PyModule_AddIntConstant(m, "G_WT", G_WT) < 0 ||
        PyModule_AddIntConstant(m, "T_PD", T_PD) < 0 || PyModule_AddIntConstant(m, "SF_DELAY", SF_DELAY) < 0 ||
        PyModule_AddIntConstant(m, "S_PRES", S_PRES) < 0 || PyModule_AddIntConstant(m, "T_CMD", T_CMD) < 0 ||
        PyModule_AddIntConstant(m, "G_CMD_DUAL", G_CMD_DUAL) < 0 || PyModule_AddIntConstant(m, "CMD_STRIDE", CMD_STRIDE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
