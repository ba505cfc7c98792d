"""Queue scheduling of matches over Ray rollout workers (ROLL Flash, Lu et al. 2025,
https://arxiv.org/abs/2510.11345): a job's matches are cut into batches, and each batch goes to
whichever worker frees up first, instead of one share per worker fixed up front, so a slow
worker or a long match holds up one batch, not the iteration. Jobs are served in the order they
were put (an async run's iterations), and a thread of the driver hands the batches out, so the
workers keep playing while the driver waits on a learner.

A batch whose worker dies (or is restarting) goes back to the front of the queue and is played
again by the next free worker: a match's randomness derives from its seed, so the replay is the
same match, and the job completes with no lost and no duplicated episodes.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

WAIT_S = 0.02  # how long the hand-out thread waits on running batches before looking at the queue again
REST_S = 0.5  # a worker whose actor died or is restarting gets no batch for this long


@dataclass(eq=False)
class Ticket:
    """A job in the queue: its batches' records as they come back, or the error that ended it."""

    batches: int
    roster: dict[str, tuple]
    done: dict[int, list[dict]] = field(default_factory=dict)
    error: BaseException | None = None
    dropped: bool = False

    @property
    def finished(self) -> bool:
        return self.error is not None or len(self.done) == self.batches


@dataclass
class _Batch:
    ticket: Ticket
    index: int
    plans: list
    tries: int = 0


class Queue:
    """Batches of matches handed to ``workers`` (Ray actors with ``play(plans, roster)``) as they free up."""

    def __init__(self, workers: list[Any], max_tries: int):
        self.workers, self.max_tries = workers, max_tries
        self.idle = deque(range(len(workers)))
        self.resting: dict[int, float] = {}  # a worker whose actor failed -> when it may take a batch again
        self.waiting: deque[_Batch] = deque()
        self.running: dict[Any, tuple[_Batch, int]] = {}  # object ref -> the batch, and its worker
        self.tickets: list[Ticket] = []
        self.cond = threading.Condition()
        self.closed = False
        self.broken: BaseException | None = None  # what stopped the hand-out thread, if anything did
        self.thread = threading.Thread(target=self._serve, name="coevo-dispatch", daemon=True)
        self.thread.start()

    def put(self, plans: list, roster: dict[str, tuple], batches: int) -> Ticket:
        """Queue ``plans`` as ``batches`` interleaved batches (long and short matches mix)."""
        batches = max(1, min(batches, len(plans)))
        ticket = Ticket(batches if plans else 0, roster, error=self.broken)
        with self.cond:
            self.tickets.append(ticket)
            self.waiting.extend(_Batch(ticket, b, plans[b::batches]) for b in range(ticket.batches))
            self.cond.notify_all()
        return ticket

    def wait(self, ticket: Ticket) -> list[dict]:
        """The job's records in the order of its plans, once every batch is back."""
        with self.cond:
            self.cond.wait_for(lambda: ticket.finished)
            self.tickets.remove(ticket)
        if ticket.error is not None:
            raise ticket.error
        records: list[dict] = [None] * sum(map(len, ticket.done.values()))  # type: ignore[list-item]
        for index, batch in ticket.done.items():
            records[index :: ticket.batches] = batch
        return records

    def drop(self, ticket: Ticket) -> None:
        """Forget a job: its waiting batches are not played, its running ones not read."""
        with self.cond:
            ticket.dropped = True
            self.waiting = deque(b for b in self.waiting if b.ticket is not ticket)
            if ticket in self.tickets:
                self.tickets.remove(ticket)

    def pending(self) -> list[Ticket]:
        with self.cond:
            return list(self.tickets)

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        self.thread.join()

    def _serve(self) -> None:
        """Hand batches out until closed; should that fail, every job waiting on it fails with
        the reason instead of waiting for ever."""
        try:
            self._hand_out()
        except BaseException as err:
            with self.cond:
                self.broken = err
                for ticket in self.tickets:
                    ticket.error = ticket.error or err
                self.cond.notify_all()

    def _hand_out(self) -> None:
        """Start waiting batches on idle workers, then take back finished ones."""
        import ray

        while True:
            with self.cond:
                self.cond.wait_for(self._work_to_do, timeout=WAIT_S if self.resting else None)
                if self.closed:
                    return
                for worker in [w for w, until in self.resting.items() if time.monotonic() >= until]:
                    del self.resting[worker]
                    self.idle.append(worker)
                while self.waiting and self.idle:
                    batch, worker = self.waiting.popleft(), self.idle.popleft()
                    self.running[self.workers[worker].play.remote(batch.plans, batch.ticket.roster)] = (batch, worker)
                refs = list(self.running)
            if not refs:  # every free worker resting
                continue
            ready, _ = ray.wait(refs, num_returns=1, timeout=WAIT_S)
            for ref in ready:
                self._finish(ref)

    def _work_to_do(self) -> bool:
        return self.closed or bool(self.running) or bool(self.waiting and self.idle)

    def _finish(self, ref: Any) -> None:
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError

        with self.cond:
            batch, worker = self.running.pop(ref)
        try:
            records, error = ray.get(ref), None
        except RayActorError as err:  # died, or restarting: the batch is lost either way
            records, error = None, err
        except Exception as err:  # the match itself failed: the job fails with its error
            records, error = None, err
            batch.tries = self.max_tries
        with self.cond:
            if isinstance(error, RayActorError):
                # Rested: a restarting actor fails every call at once, and would burn the batch's
                # tries in a burst while the other workers are busy (a restart imports torch: seconds).
                self.resting[worker] = time.monotonic() + REST_S
            else:
                self.idle.append(worker)
            ticket = batch.ticket
            if ticket.dropped:
                pass
            elif error is None:
                ticket.done[batch.index] = records
            elif isinstance(error, ActorUnavailableError):  # restarting: not a try; Ray's max_restarts bounds it
                self.waiting.appendleft(batch)
            elif batch.tries < self.max_tries:
                batch.tries += 1
                self.waiting.appendleft(batch)
            else:
                ticket.error = error
            self.cond.notify_all()
