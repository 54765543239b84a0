cimport cython
from sw_sim.engine cimport Primitive, Channel

cdef class Root(Primitive):
    cdef public Channel out
    cdef public int sent

cdef class Scan(Primitive):
    cdef public object mseg, mcrd
    cdef public Channel inp, ocrd, oref
    cdef public object seg, crd, dim
    cdef public long seg_reads, crd_reads
    cdef public object pipe
    cdef public long pipe_lo, pipe_hi, p, hi, lo
    cdef public long offset, stride
    cdef public int mode
    cpdef bint step(self) except -1
    @cython.locals(p=long, mode=int)
    cpdef bint _back(self) except -1
    cpdef bint _front(self) except -1

cdef class _Writer(Primitive):
    cdef public Channel inp
    cdef public list ports
    cpdef bint step(self) except -1
    cpdef bint _written(self, port, long word) except -1
    cpdef bint on_data(self, tok) except -1
    cpdef bint on_control(self, tok) except -1

cdef class LevelWrite(_Writer):
    cdef public object mseg, mcrd
    cdef public bint compressed, skip_empty, open
    cdef public list seg, crd

cdef class ValsWrite(_Writer):
    cdef public object mvals
    cdef public list vals

cdef class VecValsWrite(ValsWrite):
    cdef public long lanes
    cpdef bint _vector(self, values) except -1
