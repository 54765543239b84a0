cimport cython
from sw_sim.engine cimport Primitive, Channel

cdef class SpAcc1(Primitive):
    cdef public Channel iouter, iinner, ival, ocrd, oval
    cdef public long dim
    cdef public object fn
    cdef public dict acc, flush_acc
    cdef public object flush
    cdef public long flush_pos
    cdef public object zero
    cpdef bint _flush_step(self) except -1
    cpdef object _end_flush(self)
    cpdef object _head_value(self, tok)
    @cython.locals(acc=dict)
    cpdef bint _data_step(self, tok) except -1
    cpdef bint step(self) except -1
    cpdef bint _may_finish(self) except -1
    cpdef bint _end_fiber(self, oh) except -1
    @cython.locals(inner=Channel, val=Channel, outer=Channel)
    cpdef bint _acc_step(self) except -1

cdef class SpAcc1Double(SpAcc1):
    cdef public tuple banks
    cdef public object flush_stop
    cdef public bint _busy, _room
