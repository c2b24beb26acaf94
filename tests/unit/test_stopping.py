"""Signals to the job (`job.stopping`): the first asks for a stop, one within a second is the same
stop reaching the driver's other process, a later one aborts."""

from __future__ import annotations

import signal

from icesink.job.stopping import StopSignals


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_first_signal_requests_a_stop_and_a_later_one_aborts_with_its_exit_code() -> None:
    aborted: list[int] = []
    clock = Clock()
    stop = StopSignals(abort=aborted.append, clock=clock)
    assert not stop.requested.is_set()

    stop.receive(signal.SIGTERM)
    assert stop.requested.is_set()
    assert stop.name == "SIGTERM"
    assert aborted == []

    clock.now += 0.3  # the same Ctrl-C or systemd stop, delivered to the JVM too
    stop.receive(signal.SIGINT)
    assert aborted == []

    clock.now += 2
    stop.receive(signal.SIGINT)
    assert aborted == [128 + signal.SIGINT]
    assert stop.name == "SIGTERM", "the stop is named after the first signal"
