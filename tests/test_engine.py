"""The cycle engine has no process-wide state: a primitive reads the clock of its own engine."""

from sw_sim.engine import Engine, Primitive


class _FinishAt(Primitive):
    """Finishes in cycle ``at``."""

    def __init__(self, name: str, at: int) -> None:
        super().__init__(name, {}, {})
        self.at = at

    def step(self) -> bool:
        if self.cycle == self.at:
            self.finish()
        return True


def test_each_primitive_reads_the_clock_of_its_own_engine():
    a, b = _FinishAt("a", 5), _FinishAt("b", 2)
    ea, eb = Engine([a], [], [a]), Engine([b], [], [b])
    assert ea.run() == 6 and a.stats.done_cycle == 5
    assert b.cycle == 0 and "at cycle 0" in str(b.error("not started"))  # not ea's clock
    assert eb.run() == 3 and b.stats.done_cycle == 2
    assert "node 'a' (_FinishAt): late at cycle 6" in str(a.error("late"))


def test_a_primitive_outside_an_engine_is_at_cycle_zero():
    p = _FinishAt("p", 0)
    assert p.engine is None and p.cycle == 0
