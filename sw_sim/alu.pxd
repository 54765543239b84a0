cimport cython
from sw_sim.engine cimport Primitive, Channel
from sw_sim.staged cimport Staged

cdef class Alu(Staged):
    cdef public Channel a, b
    cdef public object fn
    cdef public bint identity_empty
    @cython.locals(a=Channel, b=Channel)
    cpdef bint fill(self) except -1

cdef class Reduce(Primitive):
    cdef public Channel inp, out
    cdef public object op, init, fn, acc
    cdef public bint flushed, nonempty, seen
    cpdef bint step(self) except -1

cdef class VecAlu(Alu):
    cdef public long lanes
    @cython.locals(w=long, i=long)
    cpdef object leave_front(self, v)

cdef class VecReduce(Reduce):
    cdef public long lanes
    @cython.locals(w=long, i=long)
    cpdef bint step(self) except -1

cdef class LaneReduce(Staged):
    cdef public Channel inp
    cdef public long lanes
    cdef public object fn
    @cython.locals(level=list, i=long)
    cpdef object leave_front(self, v)
    cpdef bint fill(self) except -1
