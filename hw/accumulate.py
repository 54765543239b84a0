"""RTL sparse accumulators of order 1 and 2, and the merge of two order-2 results."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

from amaranth.hdl import Cat, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import memory

from fuseflow.ir.numerics import (
    INT32,
    Numerics,
)
from fuseflow.ir.samml import ReduceOp
from fuseflow.ir.tokens import CRD_WIDTH, VAL_WIDTH

from .arith import Flags, overflow_member, reduce_op, sticky_overflow
from .base import StreamPrimitive
from .fifo import forwarded_read
from .registry import HwBuild, rtl
from .word import (
    data_word,
    done_word,
    is_ctl,
    is_data,
    is_done,
    level,
    recast,
    stop_word,
)

GROUPED_MAX = 128  # the widest :func:`lowest_bit_grouped` builds its own prefix ORs for
ISOLATE_GROUP = 32  # bits per group of :func:`isolate_lowest` (one short carry chain each)
WALK_GROUP = 32  # bits per group of a wide block-RAM accumulator's flush walk (SpAcc1._group_walk)


def isolate_lowest(m: Module, bits: Value, n: int, name: str, group: int = ISOLATE_GROUP) -> Signal:
    """``bits & -bits`` (``n`` wide): the lowest set bit alone, one-hot (0 when none).

    Up to ``group`` bits on one carry chain; wider, in groups of that many, each isolating its
    own lowest bit on a short chain while the lowest non-empty group is isolated (recursively)
    from the groups' any-bits, so the longest chain is a group's, not ``n`` bits long (a
    1,433-wide sparse accumulator's single chain limited an ECP5 design to 15 MHz).  The same
    value in every case."""
    low = Signal(n, name=f"{name}_iso{n}")
    if n <= group:
        m.d.comb += low.eq(bits[:n] & (~bits[:n] + 1)[:n])
        return low
    groups = [bits[k:min(k + group, n)] for k in range(0, n, group)]
    first = isolate_lowest(m, Cat(*[grp.any() for grp in groups]), len(groups), f"{name}_first", group)
    m.d.comb += low.eq(Cat(*[isolate_lowest(m, grp, len(grp), f"{name}_g{g}", group)
                             & first[g].replicate(len(grp)) for g, grp in enumerate(groups)]))
    return low


def lowest_bit(m: Module, bits: Value, n: int, name: str) -> tuple[Signal, Signal]:
    """The index of the lowest set bit of ``bits`` (``n`` wide; 0 when none) and ``bits``
    without it: :func:`isolate_lowest` isolates the bit, an OR tree encodes it."""
    low = Signal(n, name=f"{name}_low")
    m.d.comb += low.eq(isolate_lowest(m, bits, n, name))
    index = Signal(range(max(n, 2)), name=f"{name}_index")
    for b in range(len(index)):
        m.d.comb += index[b].eq(Cat(*[low[i] for i in range(n) if (i >> b) & 1]).any())
    without = Signal(n, name=f"{name}_rest")
    m.d.comb += without.eq(bits & ~low)
    return index, without



def lowest_bit_grouped(m: Module, bits: Value, n: int, name: str) -> tuple[Signal, Signal]:
    """:func:`lowest_bit` without a carry chain, for 4-input LUT fabrics: the bits in groups
    of four, the first non-empty group found from the groups' any-bits, the index as (that
    group, the first bit inside it).  Its prefix ORs grow with the square of the width: above
    :data:`GROUPED_MAX` bits it is :func:`lowest_bit` (groups of 32, short carry chains)."""
    if n > GROUPED_MAX:
        return lowest_bit(m, bits, n, name)
    g_n = (n + 3) // 4
    groups = [bits[4 * g:min(4 * g + 4, n)] for g in range(g_n)]
    ga = Signal(g_n, name=f"{name}_ga")
    m.d.comb += ga.eq(Cat(*[grp.any() for grp in groups]))
    first_g = Signal(g_n, name=f"{name}_fg")  # one-hot: the first non-empty group
    for g in range(g_n):
        m.d.comb += first_g[g].eq(ga[g] & ~(ga[:g].any() if g else 0))
    index = Signal(range(max(n, 2)), name=f"{name}_index")
    low = Signal(n, name=f"{name}_low")
    for g, grp in enumerate(groups):
        for j in range(len(grp)):
            m.d.comb += low[4 * g + j].eq(first_g[g] & grp[j] & ~(grp[:j].any() if j else 0))
    for b in range(len(index)):
        if b < 2:  # the bit inside the group
            terms = [first_g[g] & Cat(*[grp[j] & ~(grp[:j].any() if j else 0)
                                        for j in range(len(grp)) if (j >> b) & 1]).any()
                     for g, grp in enumerate(groups) if any((j >> b) & 1 for j in range(len(grp)))]
        else:  # the group
            terms = [first_g[g] for g in range(g_n) if (g >> (b - 2)) & 1]
        m.d.comb += index[b].eq(Cat(*terms).any() if terms else 0)
    without = Signal(n, name=f"{name}_rest")
    m.d.comb += without.eq(bits & ~low)
    return index, without



def _sync(m: Module, *stmts) -> Callable[[], None]:
    """A callable that adds ``stmts`` to the sync domain under the conditions it is called in."""
    def add() -> None:
        m.d.sync += list(stmts)
    return add


class SpAcc1(StreamPrimitive):
    """Sparse accumulator, order 1, over an inner dimension ``dim`` (see
    sw_sim.accumulate.SpAcc1): accumulator memory plus a valid bit per coordinate; the flush
    walks the valid bits with a priority encoder.  ``buffers`` banks of sums, 1 or 2.

    One bank: the accumulator (ACC mode, by the input heads) and the flush take turns, both
    waiting for output room; the end of a fiber (inner ``S(k+1)``, outer ``Sk``) starts the
    flush, which leaves the stops at the heads and pops them with its own stop.

    Two banks (sw_sim.accumulate.SpAcc1Double; :meth:`_two_banks`): a flush of one fiber
    overlaps the accumulation of the next.  The accumulator pops by the input heads whatever
    the outputs (data -> pending read-add-write into bank ``bank``; ``S0``; the last outer
    coordinate); the end of a fiber hands the bank over if the flusher is idle or emits its
    stop this cycle: pops the three stops, keeps ``Sk`` for the flush, flips ``bank`` and
    clears ``valid``.  ``valid`` holds the accumulating bank's bits only: the flusher's state
    is the registered ``first`` / ``any_valid`` / ``rest`` of the handed-over bits, which the
    encoder loads in the hand-over cycle (it follows ``valid`` whenever the flusher has no
    entries left) and walks down while flushing (one entry per cycle with room, then the stop).

    ``block_ram``: the small variant, for FPGAs without distributed RAM (the iCE40, where the
    memory and its two read multiplexers would otherwise be the largest part of a GCN layer).
    The accumulator memory has synchronous read ports (block RAM): each is addressed a cycle
    early (the coordinate at the input head, the flush's next index), and a word written in
    the cycle its address is read is forwarded from a register, so the cycle behaviour is the
    same as with asynchronous reads.  It also finds the lowest set bit with one encoder (over
    ``rest`` while flushing, the valid bits otherwise): the least logic.  Wider than
    :data:`GROUPED_MAX` entries (one bank), the flush walks the valid bits in groups of 32
    instead (:meth:`_group_walk`), so no encoder of all of them sits in front of the address.

    Without ``block_ram`` (LUT RAM, the ECP5) the single bank reads asynchronously and is built
    for the clock: the read-add-write starts at a registered read (:meth:`_read_add_write`)
    and the flush index is kept one step ahead (:meth:`_walk_ahead`): the memory read does
    not share a cycle with the adder, nor the carry-chain isolate of the lowest bit with its
    encoding."""

    def __init__(self, *, dim: int, op: ReduceOp = ReduceOp.ADD, cw: int = CRD_WIDTH,
                 vw: int = VAL_WIDTH, numerics: Numerics | None = None, depths=None,
                 block_ram: bool = False, lanes: int = 1, buffers: int = 1):
        if buffers not in (1, 2):
            raise ValueError(f"sparse accumulator: buffers={buffers!r} must be 1 or 2")
        self.dim, self.op, self.cw, self.vw = dim, op, cw, vw
        self.lanes, self.lw = lanes, vw * lanes  # lanes of the values; a sum word is lw bits
        self.block_ram, self.buffers = block_ram, buffers
        self.num = numerics or Numerics.integer(vw)
        super().__init__({"outer": cw, "inner": cw, "val": self.lw}, {"crd": cw, "val": self.lw}, depths,
                         overflow_member(op))

    def logic(self, m):
        cw, vw, dim = self.cw, self.lw, self.dim
        inner, val = self.i_inner, self.i_val
        # The lowest set valid bit (``first``), whether any is set (``any_valid``) and the set
        # bits above it (``rest``), all registered: outside a flush they describe the valid bits
        # one cycle late (the cycle that starts a flush sets none, so they have caught up when
        # used); a flush that emits ``first`` (``clear``) moves to ``rest``'s lowest bit.
        r = SimpleNamespace(first=Signal(range(max(dim, 2)), name="first"), any_valid=Signal(name="any_valid"),
                            rest=Signal(dim, name="rest"), valid=Signal(dim, name="valid"),
                            flushing=Signal(name="flushing"), clear=Signal(name="clear"),
                            room=Signal(name="room"), popped=Signal(name="popped"))
        m.d.comb += r.room.eq(self.room())
        r.ci = inner.payload[:cw][:len(r.first)]  # coordinates are below ``dim``: the index bits decode the valid bit
        # A popped (crd, val) is accumulated the next cycle from registers (the valid bit is set
        # at once, and whether it was set is registered with it), so the input FIFOs are not on
        # the read-add-write path.
        if self.buffers == 1:
            self._one_bank(m, r)
        else:
            self._two_banks(m, r)
        with m.If(r.flushing & r.room):
            with m.If(r.any_valid):
                self.push(m, "crd", data_word(r.first, cw))
                self.push(m, "val", data_word(r.word, vw))
                m.d.comb += r.clear.eq(1)
            with m.Else():
                self.push(m, "crd", r.stop)
                self.push(m, "val", recast(r.stop, cw, vw))
                m.d.sync += r.flushing.eq(0)
                if self.buffers == 1:  # the stops stayed at the heads through the flush
                    self._pop_all(m)
        with m.If(r.accumulates & inner.valid & val.valid):
            self._accumulate(m, r)

    def _pop_all(self, m):
        for n in ("outer", "inner", "val"):
            self.pop(m, n)

    def _accumulate(self, m, r):
        """ACC mode, by the inner head (``r.accumulates``: when it runs); ``D`` waits for a
        flush to end and for room, and the end of a fiber calls ``r.end_fiber()``."""
        cw, vw = self.cw, self.lw
        outer = self.i_outer
        tok, oh = self.i_inner.payload, outer.payload
        with m.If(is_data(tok, cw)):
            m.d.comb += r.popped.eq(1)
            m.d.sync += r.valid.bit_select(r.ci, 1).eq(1)
            self.pop(m, "inner")
            self.pop(m, "val")
        with m.Elif(outer.valid):
            with m.If(is_done(tok, cw)), m.If(~r.flushing & r.room):
                self._pop_all(m)
                self.push(m, "crd", done_word(cw))
                self.push(m, "val", done_word(vw))
            with m.Elif(level(tok) == 0):
                self._pop_all(m)
            with m.Elif(is_data(oh, cw)):
                self.pop(m, "outer")
            with m.Else():
                r.end_fiber()

    def _one_bank(self, m, r):
        """One bank of sums: the accumulator runs when no flush does and the outputs have room;
        the end of a fiber starts the flush, which ends with the fiber's outer stop.  A flush
        starts at least two cycles after the last pop (the stop that starts it pops no data),
        so it reads up-to-date sums.  Sets ``r.word`` (the sum at ``first``), ``r.stop``,
        ``r.accumulates`` and ``r.end_fiber``."""
        acc = memory.Memory(shape=unsigned(self.lw), depth=self.dim, init=[])
        m.submodules.acc = acc
        wp = acc.write_port()
        pending = self._pending(m, r.valid, r.ci, r.popped)
        first_next = None  # with block RAM: ``first`` as it will be next cycle
        if self.block_ram and self.dim > GROUPED_MAX:
            first_next = self._group_walk(m, r, pending)
        else:
            # While flushing, ``valid`` is ``rest`` plus the bit ``first`` (when ``any_valid``),
            # so emitting ``first`` clears it by loading ``rest``: no decoder of ``first``.
            with m.If(r.clear):
                m.d.sync += r.valid.eq(r.rest)
        if self.block_ram and first_next is None:
            # One encoder, over ``rest`` while flushing (the candidate for a flush that emits)
            # and over the valid bits otherwise; a flush cycle that emits nothing holds the
            # registers, which already describe the unchanged valid bits.  ``clear`` only
            # selects at the end, so it is not in front of the encoder.
            hold = Signal()
            m.d.comb += hold.eq(r.flushing & ~r.clear)
            first_next = self._lowest_valid(m, r, Mux(r.flushing, r.rest, r.valid), hold, lowest_bit_grouped)
        elif not self.block_ram:
            self._walk_ahead(m, r.first, r.any_valid, r.rest, r.flushing, r.clear, pending)
        r.word = self._read_add_write(m, acc, wp, r.ci, pending, r.first, first_next)
        r.stop = self.i_outer.payload
        r.accumulates = r.room & ~r.flushing
        r.end_fiber = _sync(m, r.flushing.eq(1))

    def _two_banks(self, m, r):
        """Two banks of sums (:meth:`_banked_sums`): the accumulator runs whatever the outputs,
        and the end of a fiber hands its bank to the flusher when that is free (idle, or
        emitting its stop this cycle).  One encoder over ``rest`` while walking and over
        ``valid`` otherwise (so it has loaded the accumulating bank's bits in the cycle of a
        hand-over); ``hold`` selects at the end, so the outputs' ready is not in front of it."""
        bank = Signal()  # the accumulating bank; the flusher reads the other one
        flush_stop = Signal(self.cw + 1)  # the outer stop that ends the fiber being flushed
        walking = Signal()  # entries left to flush: the encoder walks ``rest``
        hold = Signal()  # a flush waits for room: the registers keep their entry
        free = Signal()  # the flusher is idle or emits its stop this cycle
        m.d.comb += [walking.eq(r.flushing & r.any_valid), hold.eq(r.flushing & ~r.room),
                     free.eq(~r.flushing | (r.room & ~r.any_valid))]
        encoder = lowest_bit_grouped if self.block_ram else lowest_bit
        first_next = self._lowest_valid(m, r, Mux(walking, r.rest, r.valid), hold, encoder)
        r.word = self._banked_sums(m, r.valid, r.ci, r.popped, r.first, first_next, bank, walking)
        r.stop, r.accumulates = flush_stop, 1

        def hand_over():  # after any stop the flusher emits: its ``flushing.eq(0)`` comes first
            with m.If(free):
                self._pop_all(m)
                m.d.sync += [r.flushing.eq(1), flush_stop.eq(self.i_outer.payload), bank.eq(~bank),
                             r.valid.eq(0)]

        r.end_fiber = hand_over

    def _lowest_valid(self, m, r, src_bits: Value, hold: Value, encoder) -> Signal:
        """``r.first`` / ``r.any_valid`` / ``r.rest`` registered from one ``encoder`` of
        ``src_bits``, kept while ``hold``; returns ``first`` as it will be next cycle."""
        dim = self.dim
        src = Signal(dim)
        m.d.comb += src.eq(src_bits)
        src_first, src_rest = encoder(m, src, dim, "low")
        first_next = Signal(range(max(dim, 2)))
        m.d.comb += first_next.eq(Mux(hold, r.first, src_first))
        m.d.sync += r.first.eq(first_next)
        with m.If(~hold):
            m.d.sync += [r.any_valid.eq(src.any()), r.rest.eq(src_rest)]
        return first_next

    def _group_walk(self, m, r, pending) -> Signal:
        """``first`` and ``any_valid`` of a wide accumulator with block RAM, without an encoder
        of all ``dim`` valid bits in front of the flush read's address (one of 1,433 bits, ahead
        of that address, limited the Cora GCN's ULX3S top to 41 MHz); returns ``first`` as it
        will be next cycle, which addresses the flush read.

        The valid bits are kept in groups of :data:`WALK_GROUP` (the index is (group, bit)),
        and the flush walks them one group at a time, its next group ready in registers: the
        bits of ``first``'s group above it (``grp_rest``), the next non-empty group (``ng``,
        ``ng_any``) with its bits (``ng_bits``), and the non-empty groups after that one
        (``after``).  Emitting ``first`` moves to the lowest bit of ``grp_rest``, else of
        ``ng_bits``, whose group then takes the lowest group of ``after`` and its bits from the
        valid bits: every register's input is an encoder of 32 or ``dim / 32`` bits, never of
        ``dim``.  Outside a flush the pops only set bits: each newly set one (the pending
        coordinate ``c``) is compared with ``first`` and ``ng`` and goes into the register it
        belongs to.  The valid bits are not cleared as the flush emits (only the groups after
        ``ng`` are read from them) but all at once by its stop.  Same values in every cycle
        as the encoder of the valid bits."""
        G, dim = WALK_GROUP, self.dim
        n_groups = (dim + G - 1) // G
        gb = G.bit_length() - 1  # the bit index within a group: the low bits of an index
        pend, pend_hit, c, _ = pending
        first, any_valid = r.first, r.any_valid
        grp_rest = Signal(G, name="grp_rest")
        ng = Signal(range(max(n_groups, 2)), name="ng")
        ng_any = Signal(name="ng_any")
        ng_bits = Signal(G, name="ng_bits")
        after = Signal(n_groups, name="after")
        first_next = Signal(len(first), name="first_next")
        m.d.comb += first_next.eq(first)
        m.d.sync += first.eq(first_next)
        fg, fl, cg, cl = first[gb:], first[:gb], c[gb:], c[:gb]

        def bit(i: Value, n: int) -> Value:  # one-hot of ``i`` (below ``n``)
            return Cat(*[i == k for k in range(n)])

        rest_idx, rest_wo = lowest_bit_grouped(m, grp_rest, G, "grp")
        nb_idx, nb_wo = lowest_bit_grouped(m, ng_bits, G, "ngb")
        after_idx, after_wo = lowest_bit_grouped(m, after, n_groups, "after")
        after_low = Signal(n_groups, name="after_low")  # one-hot: the lowest group of ``after``
        m.d.comb += after_low.eq(after & ~after_wo)
        groups = [r.valid[k:min(k + G, dim)] for k in range(0, dim, G)]
        picked = Signal(G, name="after_bits")  # the valid bits of that group
        m.d.comb += picked.eq(Cat(*[Cat(*[groups[g][j] & after_low[g] for g in range(n_groups) if j < len(groups[g])]).any()
                                    for j in range(G)]))
        with m.If(r.flushing):
            with m.If(r.room & ~any_valid):  # the stop: the fiber's bits are all flushed
                m.d.sync += r.valid.eq(0)
            with m.If(r.clear):
                with m.If(grp_rest.any()):
                    m.d.comb += first_next.eq(Cat(rest_idx, fg))
                    m.d.sync += grp_rest.eq(rest_wo)
                with m.Elif(ng_any):
                    m.d.comb += first_next.eq(Cat(nb_idx, ng))
                    m.d.sync += [grp_rest.eq(nb_wo), ng.eq(after_idx), ng_any.eq(after.any()),
                                 ng_bits.eq(picked), after.eq(after_wo)]
                with m.Else():
                    m.d.sync += any_valid.eq(0)
        with m.Elif(pend & ~pend_hit):  # the bit ``c`` is set now (a flush pops no data)
            with m.If(~any_valid):
                m.d.comb += first_next.eq(c)
                m.d.sync += any_valid.eq(1)
            with m.Elif(c < first):
                m.d.comb += first_next.eq(c)
                with m.If(cg == fg):  # the old ``first`` is above ``c`` in its group
                    m.d.sync += grp_rest.eq(grp_rest | bit(fl, G))
                with m.Else():  # ``c`` is alone in its group; ``first``'s group is the next
                    m.d.sync += [grp_rest.eq(0), ng.eq(fg), ng_any.eq(1), ng_bits.eq(grp_rest | bit(fl, G))]
                    with m.If(ng_any):
                        m.d.sync += after.eq(after | bit(ng, n_groups))
            with m.Elif(cg == fg):
                m.d.sync += grp_rest.eq(grp_rest | bit(cl, G))
            with m.Elif(~ng_any):
                m.d.sync += [ng.eq(cg), ng_any.eq(1), ng_bits.eq(bit(cl, G))]
            with m.Elif(cg == ng):
                m.d.sync += ng_bits.eq(ng_bits | bit(cl, G))
            with m.Elif(cg < ng):
                m.d.sync += [ng.eq(cg), ng_bits.eq(bit(cl, G)), after.eq(after | bit(ng, n_groups))]
            with m.Else():
                m.d.sync += after.eq(after | bit(cg, n_groups))
        return first_next

    def _walk_ahead(self, m, first, any_valid, rest, flushing, clear, pending):
        """``first``, ``any_valid`` and ``rest`` without a priority encoder between two
        registers (for the ECP5, where the encoder of ``rest`` into ``first`` limited the clock).

        Outside a flush the valid bits are only set, by the pops, and a flush starts from them
        and ends with none left: the registers take in each newly set bit, the pending
        coordinate ``c``, by compares of ``c`` with ``first`` and with the second-lowest set bit,
        whose index is kept for that (all from registers).  While flushing they walk one step
        ahead: ``rest`` is kept as its lowest bit, one-hot (``nxt``), and the bits above it
        (``above``), so emitting ``first`` loads ``first`` from ``nxt`` encoded (an OR tree)
        and ``nxt`` / ``above`` from the lowest bit of ``above`` isolated
        (:func:`isolate_lowest`) and the bits without it: each register's input is one half of the
        encoder.  Same values in every cycle as the encoder of the valid bits."""
        dim = self.dim
        pend, pend_hit, c, _ = pending
        nxt = Signal(dim, name="nxt")  # one-hot: the second-lowest set bit (none: 0)
        nxt_idx = Signal(range(max(dim, 2)), name="nxt_idx")  # its index (kept outside a flush)
        above = Signal(dim, name="above")  # the set bits above ``nxt``
        low = Signal(dim, name="above_low")
        m.d.comb += [rest.eq(nxt | above), low.eq(isolate_lowest(m, above, dim, "above"))]
        encoded = Signal(len(first), name="nxt_encoded")
        for b in range(len(first)):
            terms = [nxt[k] for k in range(dim) if (k >> b) & 1]
            m.d.comb += encoded[b].eq(Cat(*terms).any() if terms else 0)

        def onehot(i: Value) -> Value:
            return Cat(*[i == k for k in range(dim)])

        with m.If(flushing), m.If(clear):
            m.d.sync += [first.eq(encoded), any_valid.eq(nxt.any()), nxt.eq(low),
                         above.eq(above & ~low)]
        with m.Elif(pend & ~pend_hit):  # the bit ``c`` is set now (a flush pops no data)
            with m.If(~any_valid):
                m.d.sync += [first.eq(c), any_valid.eq(1)]
            with m.Elif(c < first):  # ``first`` becomes the second-lowest
                m.d.sync += [first.eq(c), nxt.eq(onehot(first)), nxt_idx.eq(first),
                             above.eq(above | nxt)]
            with m.Elif(~nxt.any()):
                m.d.sync += [nxt.eq(onehot(c)), nxt_idx.eq(c)]
            with m.Elif(c < nxt_idx):
                m.d.sync += [nxt.eq(onehot(c)), nxt_idx.eq(c), above.eq(above | nxt)]
            with m.Else():
                m.d.sync += above.eq(above | onehot(c))

    def _read_add_write(self, m, acc, wp, ci, pending, first, first_next):
        """The pipelined ``acc[ci] op= val`` of a popped coordinate ``ci`` (``pending``: the
        registers of the pop, see :meth:`_pending`) and the flush read; returns the flushed word
        (= the sum at ``first``).

        The stored word is read in the cycle of the pop, at the input head's coordinate, and
        registered (a word written in that cycle at the same coordinate, by the previous pop,
        is taken from the write port instead of the RAM), so the read-add-write of the next
        cycle starts at registers: the memory's read is not in front of the adder."""
        pend, pend_hit, pend_c, pend_v = pending
        m.d.comb += [wp.addr.eq(pend_c), wp.en.eq(pend)]
        if self.block_ram:
            acc_word = forwarded_read(m, acc, wp, ci, "acc")  # = acc[pend_c] next cycle
            flush_word = forwarded_read(m, acc, wp, first_next, "flush", addr_q=first)  # = acc[first] next cycle
        else:
            rp = acc.read_port(domain="comb")  # read-add-write, a cycle early
            fp = acc.read_port(domain="comb")  # flush (its own port keeps the paths apart)
            acc_word = Signal(self.lw, name="acc_word")  # = acc[pend_c] as written up to now
            m.d.comb += [rp.addr.eq(ci), fp.addr.eq(first)]
            m.d.sync += acc_word.eq(Mux(wp.en & (wp.addr == ci), wp.data, rp.data))
            flush_word = fp.data
        self._write_back(m, wp, acc_word, pend_hit, pend_v)
        return flush_word

    def _pending(self, m, valid, ci, popped):
        """The registers of a popped (crd, val), accumulated the next cycle: whether one is
        pending, whether its valid bit was set, its coordinate and value."""
        vw, dim = self.lw, self.dim
        vtok = self.i_val.payload
        v = Mux(is_data(vtok, vw), vtok[:vw], 0)
        pend, pend_hit = Signal(), Signal()
        pend_c = Signal(range(max(dim, 2)))
        pend_v = Signal(signed(vw) if self.lanes == 1 else unsigned(vw))  # the value (vectors: its lanes)
        v = v.as_signed() if self.lanes == 1 else v
        m.d.sync += [pend.eq(popped), pend_c.eq(ci), pend_v.eq(v), pend_hit.eq(valid.bit_select(ci, 1))]
        return pend, pend_hit, pend_c, pend_v

    def _write_back(self, m, wp, acc_word, pend_hit, pend_v):
        """``wp`` writes the stored word ``op`` the pending value, or the value alone (a
        coordinate not yet valid)."""
        w = self.vw
        flags: Flags = []  # any lane's sum brought into range
        if self.lanes == 1:
            summed = reduce_op(self.num, self.op, acc_word.as_signed(), pend_v, flags)[:w]
        else:  # lane by lane
            summed = Cat(*[reduce_op(self.num, self.op, acc_word[k * w:(k + 1) * w].as_signed(),
                                     pend_v[k * w:(k + 1) * w].as_signed(), flags)[:w] for k in range(self.lanes)])
        m.d.comb += wp.data.eq(Mux(pend_hit, summed, pend_v[:self.lw]))
        sticky_overflow(m, self, wp.en & pend_hit, flags)  # a first value is stored as it is


    def _banked_sums(self, m, valid, ci, popped, first, first_next, bank, walking):
        """The two banks of sums, the pending read-add-write into bank ``bank`` and the flush
        read of the other; returns the flushed word (= the sum at ``first``).

        One memory of ``2 * dim`` words, the bank as the low address bit: no address
        arithmetic, a LUT-RAM read multiplexer only as deep as ``2 * dim`` words need (the bank
        as the top bit would pad each bank to a power of two; one memory per bank, each with its
        own read-add-write, measured slower on the ECP5: docs/fpga.md), and on the iCE40 as many
        RAM blocks as one bank while ``2 * dim`` words fit a block.  The write goes to the
        accumulating bank, which does not change between a pop and its write (the hand-over's
        cycle and the one before it pop no data); the flush reads the other bank, so it never
        reads the word being written and needs no forwarding.  With block RAM the flush read is
        addressed a cycle early, in the bank flushed next cycle: the other one while walking,
        else the one a hand-over in this cycle gives the flusher."""
        pend, pend_hit, pend_c, pend_v = self._pending(m, valid, ci, popped)
        acc = memory.Memory(shape=unsigned(self.lw), depth=2 * self.dim, init=[])
        m.submodules.acc = acc
        wp = acc.write_port()
        m.d.comb += [wp.addr.eq(Cat(bank, pend_c)), wp.en.eq(pend)]
        if self.block_ram:
            acc_word = forwarded_read(m, acc, wp, Cat(bank, ci), "acc")  # = acc[pend] next cycle
            fp = acc.read_port(domain="sync")  # = acc[flushed bank][first] next cycle
            m.d.comb += [fp.addr.eq(Cat(Mux(walking, ~bank, bank), first_next)), fp.en.eq(1)]
        else:
            rp = acc.read_port(domain="comb")  # read-add-write
            fp = acc.read_port(domain="comb")  # flush
            m.d.comb += [rp.addr.eq(Cat(bank, pend_c)), fp.addr.eq(Cat(~bank, first))]
            acc_word = rp.data
        self._write_back(m, wp, acc_word, pend_hit, pend_v)
        return fp.data



class SpAcc1Double(SpAcc1):
    """:class:`SpAcc1` with two banks of sums: the name of ``SpAcc1(buffers=2)``."""

    def __init__(self, **kw):
        super().__init__(buffers=2, **kw)


class SpAcc2(StreamPrimitive):
    """Sparse accumulator, order 2 (see sw_sim.accumulate.SpAcc2): an accumulator memory of
    ``dim0 * dim1`` entries (address ``i * dim1 + j``) with a valid bit each; the flush walks
    the valid bits in address order with a priority encoder.  ``buffers`` banks of sums, 1 or 2.

    One bank: the accumulator and the flush take turns, both waiting for output room; the end
    of an outer fiber starts the flush, which leaves the stops at the heads and pops them with
    its own stops.

    Two banks (sw_sim.accumulate.SpAcc2Double) in one memory (the bank is the low address
    bit): ``valid`` holds the accumulating bank's bits, ``flush_valid`` the flushed bank's,
    walked by the priority encoder and cleared entry by entry.  The end of an outer fiber hands
    the bank over when the flusher is idle or emits its stops this cycle: pops the four stops,
    keeps outer ``Sm`` for the flush, moves ``valid`` to ``flush_valid`` and flips ``bank``.
    The accumulator does not wait for output room; the flusher and ``D`` do."""

    def __init__(self, *, dim0: int, dim1: int, op: ReduceOp = ReduceOp.ADD, cw: int = CRD_WIDTH,
                 numerics: Numerics = INT32, depths=None, buffers: int = 1):
        if buffers not in (1, 2):
            raise ValueError(f"sparse accumulator: buffers={buffers!r} must be 1 or 2")
        self.dim0, self.dim1, self.op, self.cw, self.num = dim0, dim1, op, cw, numerics
        self.vw, self.buffers = numerics.width, buffers
        super().__init__({"outer": cw, "inner0": cw, "inner1": cw, "val": self.vw},
                         {"crd0": cw, "crd1": cw, "val": self.vw}, depths, overflow_member(op))

    def logic(self, m):
        cw, vw, d1 = self.cw, self.vw, self.dim1
        size = self.dim0 * d1
        acc = memory.Memory(shape=vw, depth=self.buffers * size, init=[])
        m.submodules.acc = acc
        r = SimpleNamespace(wp=acc.write_port(), rp=acc.read_port(domain="comb"), valid=Signal(size, name="valid"),
                            flushing=Signal(name="flushing"), group_open=Signal(name="group_open"),
                            cur_i=Signal(cw, name="cur_i"), last_i=Signal(cw, name="last_i"),
                            cur_valid=Signal(name="cur_valid"), first=Signal(range(max(size, 2)), name="first"),
                            room=Signal(name="room"), more=Signal(name="more"))
        flags: Flags = []
        r.addr, summed, v = self._accumulate_datapath(m, r.rp, r.cur_valid, r.cur_i, flags)
        hit = r.valid.bit_select(r.addr, 1)
        sticky_overflow(m, self, r.wp.en & hit, flags)  # a first value is stored as it is
        m.d.comb += [r.wp.data.eq(Mux(hit, summed, v[:vw])), r.room.eq(self.room())]
        if self.buffers == 1:
            self._one_bank(m, r)
        else:
            self._two_banks(m, r, acc)
        for b in reversed(range(size)):  # the lowest set bit of the entries to flush
            with m.If(r.flush_valid[b]):
                m.d.comb += r.first.eq(b)
        fi, fj = Signal(cw), Signal(cw)
        m.d.comb += [fi.eq(r.first // d1), fj.eq(r.first % d1), r.more.eq(r.flush_valid.any())]
        with m.If(r.flushing & r.room):
            with m.If(r.more):
                self._flush_entry(m, r.flush_valid, r.first, fi, fj, r.group_open, r.last_i, r.word)
            with m.Else():
                if self.buffers == 1:  # the stops stayed at the heads through the flush
                    self._pop_all(m)
                self.push(m, "crd0", r.stop)
                self.push(m, "crd1", stop_word(level(r.stop) + 1, cw))
                self.push(m, "val", stop_word(level(r.stop) + 1, vw))
                m.d.sync += [r.flushing.eq(0), r.group_open.eq(0)]
        with m.If(r.accumulates & self.i_inner1.valid & self.i_val.valid):
            self._accumulate(m, r.wp, r.valid, r.addr, r.cur_valid, r.cur_i, r.end_fiber, r.may_finish)

    def _one_bank(self, m, r):
        """One bank: the flush reads the accumulator's port and walks ``valid`` itself; the
        accumulator runs when no flush does and the outputs have room.  Sets ``r.flush_valid``,
        ``r.word``, ``r.stop``, ``r.accumulates``, ``r.end_fiber`` and ``r.may_finish``."""
        m.d.comb += [r.rp.addr.eq(Mux(r.flushing, r.first, r.addr)), r.wp.addr.eq(r.addr)]
        r.flush_valid, r.word, r.stop = r.valid, r.rp.data, self.i_outer.payload
        r.accumulates, r.may_finish = ~r.flushing & r.room, None
        r.end_fiber = _sync(m, r.flushing.eq(1))

    def _two_banks(self, m, r, acc):
        """Two banks: a second read port for the flush of the other bank, which walks
        ``flush_valid``; the accumulator runs whatever the outputs, and the end of an outer
        fiber hands its bank over when the flusher is free (idle, or emitting its stops this
        cycle).  Sets what :meth:`_one_bank` sets."""
        fp = acc.read_port(domain="comb")  # flush, the other bank
        bank = Signal(name="bank")
        r.flush_valid = Signal(len(r.valid), name="flush_valid")
        flush_stop = Signal(self.cw + 1, name="flush_stop")  # the outer stop that ends the fiber being flushed
        free = Signal(name="free")
        m.d.comb += [r.rp.addr.eq(Cat(bank, r.addr)), fp.addr.eq(Cat(~bank, r.first)),
                     r.wp.addr.eq(Cat(bank, r.addr)), free.eq(~r.flushing | (r.room & ~r.more))]
        r.word, r.stop, r.accumulates, r.may_finish = fp.data, flush_stop, 1, ~r.flushing & r.room

        def hand_over():
            with m.If(free):
                self._pop_all(m)
                m.d.sync += [r.flushing.eq(1), flush_stop.eq(self.i_outer.payload), bank.eq(~bank),
                             r.flush_valid.eq(r.valid), r.valid.eq(0)]

        r.end_fiber = hand_over

    def _pop_all(self, m):
        for n in ("outer", "inner0", "inner1", "val"):
            self.pop(m, n)

    def _accumulate_datapath(self, m, rp, cur_valid, cur_i, flags: Flags):
        """The address ``i * dim1 + j`` of the ``inner1`` head (``i`` held or at the ``inner0``
        head), the sum of its stored word (``rp``) and the value, and the value; ``flags`` gets
        the sum's overflow conditions."""
        cw, vw, d1 = self.cw, self.vw, self.dim1
        tok, vtok, ih = self.i_inner1.payload, self.i_val.payload, self.i_inner0.payload
        i = Mux(cur_valid, cur_i, ih[:cw])
        addr = Signal(range(max(self.dim0 * d1, 2)))
        m.d.comb += addr.eq(i * d1 + tok[:cw])
        v = Mux(is_data(vtok, vw), vtok[:vw], 0).as_signed()
        summed = reduce_op(self.num, self.op, rp.data.as_signed(), v, flags)
        return addr, summed, v

    def _flush_entry(self, m, valid, first, fi, fj, group_open, last_i, word):
        """One flush step while entries are left: close the open ``i`` group (``S0``) when the
        next entry starts a new one, else emit it (``i`` on ``crd0`` when a group opens)."""
        cw, vw = self.cw, self.vw
        with m.If(group_open & (fi != last_i)):
            self.push(m, "crd1", stop_word(0, cw))
            self.push(m, "val", stop_word(0, vw))
            m.d.sync += group_open.eq(0)
        with m.Else():
            with m.If(~group_open):
                self.push(m, "crd0", data_word(fi, cw))
                m.d.sync += [group_open.eq(1), last_i.eq(fi)]
            self.push(m, "crd1", data_word(fj, cw))
            self.push(m, "val", data_word(word, vw))
            m.d.sync += valid.bit_select(first, 1).eq(0)

    def _accumulate(self, m, wp, valid, addr, cur_valid, cur_i, end_fiber, may_finish=None):
        """ACC mode, by the ``inner1`` head (the sw_sim model's rules); ``end_fiber()`` adds the
        statements for the end of an outer fiber (``inner1`` ``S(m+2)``, outer ``Sm``) and
        ``may_finish`` gates ``D``."""
        cw, vw = self.cw, self.vw
        outer, ii, ij = self.i_outer, self.i_inner0, self.i_inner1
        tok, ih, oh = ij.payload, ii.payload, outer.payload
        with m.If(is_data(tok, cw)), m.If(cur_valid | ii.valid):
            with m.If(~cur_valid):
                self.pop(m, "inner0")
                m.d.sync += [cur_i.eq(ih[:cw]), cur_valid.eq(1)]
            m.d.comb += wp.en.eq(1)
            m.d.sync += valid.bit_select(addr, 1).eq(1)
            self.pop(m, "inner1")
            self.pop(m, "val")
        with m.Elif(ii.valid):
            with m.If(is_done(tok, cw)), m.If(outer.valid if may_finish is None else outer.valid & may_finish):
                self._pop_all(m)
                self.push(m, "crd0", done_word(cw))
                self.push(m, "crd1", done_word(cw))
                self.push(m, "val", done_word(vw))
            with m.Elif(~cur_valid & is_data(ih, cw)):
                self.pop(m, "inner0")
                with m.If(level(tok) == 0):
                    self.pop(m, "inner1")
                    self.pop(m, "val")
            with m.Elif(level(tok) == 0):
                m.d.sync += cur_valid.eq(0)
                self.pop(m, "inner1")
                self.pop(m, "val")
            with m.Elif(outer.valid):
                m.d.sync += cur_valid.eq(0)
                with m.If(level(tok) == 1):
                    self._pop_all(m)
                with m.Elif(is_data(oh, cw)):
                    self.pop(m, "outer")
                with m.Else():
                    end_fiber()


class SpAcc2Double(SpAcc2):
    """:class:`SpAcc2` with two banks of sums: the name of ``SpAcc2(buffers=2)``."""

    def __init__(self, **kw):
        super().__init__(buffers=2, **kw)


class Merge2(StreamPrimitive):
    """The merge of two order-2 results (see sw_sim.accumulate.Merge2): ``open_a`` /
    ``open_b`` are the sides whose row is open (neither: the next ``crd0`` heads decide),
    ``had_a`` / ``had_b`` whether a side had a row in this outer fiber (a side with none
    leaves a lone stop on ``crd1`` / ``val``), ``any_row`` whether the merged result had one.
    The smaller head is picked as in :class:`hw.join.Union`: a control head sorts last."""

    def __init__(self, *, op: ReduceOp = ReduceOp.ADD, cw: int = CRD_WIDTH, numerics: Numerics = INT32,
                 depths=None):
        self.op, self.cw, self.num, self.vw = op, cw, numerics, numerics.width
        ins = {f"{p}_{s}": w for s in "ab" for p, w in (("crd0", cw), ("crd1", cw), ("val", self.vw))}
        super().__init__(ins, {"crd0": cw, "crd1": cw, "val": self.vw}, depths, overflow_member(op))

    def logic(self, m):
        cw = self.cw
        i0 = [self.inp(f"crd0_{s}") for s in "ab"]
        i1 = [self.inp(f"crd1_{s}") for s in "ab"]
        iv = [self.inp(f"val_{s}") for s in "ab"]
        is_open = [Signal(name=f"open_{s}") for s in "ab"]
        had = [Signal(name=f"had_{s}") for s in "ab"]
        any_row = Signal(name="any_row")
        room = Signal()
        m.d.comb += room.eq(self.room())
        ctl0 = [is_ctl(c.payload, cw) for c in i0]
        row = self._row_datapath(m, i1, iv, is_open, room)
        idle = ~is_open[0] & ~is_open[1]  # no row open: the crd0 heads decide
        with m.If(idle & room & i0[0].valid & i0[1].valid):
            self._outer(m, i0, i1, iv, ctl0, had, any_row, is_open)
        with m.Elif(~idle):
            self._row(m, i0, i1, iv, ctl0, is_open, row)

    def _outer(self, m, i0, i1, iv, ctl0, had, any_row, is_open):
        """No row open; both ``crd0`` heads are here and every output has room."""
        cw, vw = self.cw, self.vw
        head = i0[0].payload
        with m.If(ctl0[0] & ctl0[1]):
            done = is_done(head, cw)
            with m.If(done & i1[0].valid & i1[1].valid & iv[0].valid & iv[1].valid):
                for c in (*i0, *i1, *iv):
                    m.d.comb += c.ready.eq(1)
                self.push(m, "crd0", done_word(cw))
                self.push(m, "crd1", done_word(cw))
                self.push(m, "val", done_word(vw))
            with m.Elif(~done & (had[0] | (i1[0].valid & iv[0].valid))
                        & (had[1] | (i1[1].valid & iv[1].valid))):
                for s in (0, 1):  # a side without a row: its lone S(m+1)
                    m.d.comb += [i0[s].ready.eq(1), i1[s].ready.eq(~had[s]), iv[s].ready.eq(~had[s])]
                self.push(m, "crd0", head)
                with m.If(~any_row):
                    self.push(m, "crd1", stop_word(level(head) + 1, cw))
                    self.push(m, "val", stop_word(level(head) + 1, vw))
                m.d.sync += [had[0].eq(0), had[1].eq(0), any_row.eq(0)]
        with m.Else():
            keyed = [Cat(c.payload[:cw], c.payload[cw]) for c in i0]  # control sorts last
            take = [~ctl0[0] & (keyed[0] <= keyed[1]), ~ctl0[1] & (keyed[1] <= keyed[0])]
            self.push(m, "crd0", data_word(Mux(take[0], i0[0].payload[:cw], i0[1].payload[:cw]), cw))
            for s in (0, 1):
                m.d.comb += i0[s].ready.eq(take[s])
                m.d.sync += is_open[s].eq(take[s])
                with m.If(take[s]):
                    m.d.sync += had[s].eq(1)
            m.d.sync += any_row.eq(1)

    def _row_datapath(self, m, i1, iv, is_open, room) -> SimpleNamespace:
        """The open row's heads compared and its values combined (outside the state's control
        flow, as is the overflow flag: its registers update whatever the state)."""
        cw, vw = self.cw, self.vw
        here = room
        for s in (0, 1):
            here = here & (~is_open[s] | (i1[s].valid & iv[s].valid))
        data = [is_open[s] & ~is_ctl(i1[s].payload, cw) for s in (0, 1)]
        keyed = [Cat(i1[s].payload[:cw], ~data[s]) for s in (0, 1)]  # a closed or ended side sorts last
        take = [data[0] & (keyed[0] <= keyed[1]), data[1] & (keyed[1] <= keyed[0])]
        va, vb = (iv[s].payload[:vw].as_signed() for s in (0, 1))
        both = Signal()
        m.d.comb += both.eq(take[0] & take[1])
        flags: Flags = []
        combined = reduce_op(self.num, self.op, va, vb, flags)[:vw]
        sticky_overflow(m, self, here & both & (is_open[0] | is_open[1]), flags)
        return SimpleNamespace(here=here, data=data, take=take, both=both, value=Mux(both, combined, Mux(take[0], va, vb)))

    def _row(self, m, i0, i1, iv, ctl0, is_open, r):
        """A row open on one side or both: merge its entries; at its end, close it."""
        cw, vw = self.cw, self.vw
        here, data, take = r.here, r.data, r.take
        with m.If(here & (data[0] | data[1])):
            self.push(m, "crd1", data_word(Mux(take[0], i1[0].payload[:cw], i1[1].payload[:cw]), cw))
            self.push(m, "val", data_word(r.value, vw))
            for s in (0, 1):
                m.d.comb += [i1[s].ready.eq(take[s]), iv[s].ready.eq(take[s])]
        with m.Elif(here & i0[0].valid & i0[1].valid):  # every open side at its row's stop
            last = ctl0[0] & ctl0[1]  # both sides at the outer stop: the merged result's last row
            end = Mux(last, level(i0[0].payload) + 1, 0)
            self.push(m, "crd1", stop_word(end, cw))
            self.push(m, "val", stop_word(end, vw))
            for s in (0, 1):
                m.d.comb += [i1[s].ready.eq(is_open[s]), iv[s].ready.eq(is_open[s])]
                m.d.sync += is_open[s].eq(0)


@rtl("merge2")
def _merge2(b: HwBuild):
    return Merge2(op=b.params.get("op", ReduceOp.ADD), cw=b.cfg.cw, numerics=b.cfg.num, depths=b.depths), {}


@rtl("spacc1")
def _spacc1(b: HwBuild):
    p, cfg = b.params, b.cfg
    return SpAcc1(dim=p["dim"], op=p.get("op", ReduceOp.ADD), cw=cfg.cw, vw=cfg.vw, numerics=cfg.num,
                  depths=b.depths, block_ram=spacc_in_block_ram(cfg, p["dim"]), lanes=b.lanes,
                  buffers=p.get("buffers", 1)), {}


def spacc_in_block_ram(cfg, dim: int) -> bool:
    """Whether a sparse accumulator of ``dim`` entries keeps its sums in block RAM under ``cfg``."""
    return cfg.spacc_block_ram or (cfg.spacc_block_ram_min_dim is not None and dim >= cfg.spacc_block_ram_min_dim)


@rtl("spacc2")
def _spacc2(b: HwBuild):
    p, cfg = b.params, b.cfg
    return SpAcc2(dim0=p["dim0"], dim1=p["dim1"], op=p.get("op", ReduceOp.ADD), cw=cfg.cw, numerics=cfg.num,
                  depths=b.depths, buffers=p.get("buffers", 1)), {}
